"""CuTe DSL's Hopper dense GEMM (persistent, warp-specialized),
synchronization only.

Warpgroup 0 is the DMA warpgroup, of which warp 0 loads the A and B tiles
with TMA into a ``num_stages`` ring (PipelineTmaAsync); warpgroups 1 and 2
cooperate on each output tile with wgmma. A static persistent scheduler hands
each CTA ``num_tiles`` tiles; the producer and consumer states run across
tiles, so the ring never drains between them.

The consumers wait on a stage, issue its wgmma and release it. CuTe DSL
keeps one k-tile of wgmma in flight (a release state lagging the read state
by a peeled prologue stage); that shape is checked in
test/Dialect/Pipeline/VerifyProtocol/valid.mlir (@lagged_release) and left
out here because the simulator runs every loop with a runtime bound exactly
``trip_count`` times, whatever its start, so a loop from 1 to k_tiles would
not match the producer's loop from 0.

The epilogue stages C through shared memory and stores it with TMA
(PipelineTmaStore): the first MMA warp's elected thread acquires a staging
buffer, both warpgroups write it and meet on a named barrier, then the same
thread issues the store and commits; the store pipeline's tail drains the
bulk groups before the CTA exits.
"""

from pipeline_mlir.kernel import Int32, Kernel, TmaDescriptor
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier,
                                    PipelineTmaAsync, PipelineTmaStore,
                                    PipelineUserType, make_pipeline_state)

TILE_M, TILE_N, TILE_K = 128, 256, 64
A_BYTES = TILE_M * TILE_K * 2  # bf16
B_BYTES = TILE_N * TILE_K * 2
C_SUBTILE_BYTES = 64 * 32 * 2
EPI_STAGES = 2
MMA_WARPGROUPS = 2
MMA_THREADS = 128 * MMA_WARPGROUPS
THREADS = 128 + MMA_THREADS


def build(num_stages=4, chip="sm_90a"):
    k = Kernel("cute_hopper_gemm", chip=chip, block_dim=THREADS,
               params={"a_desc": TmaDescriptor(), "b_desc": TmaDescriptor(),
                       "c_desc": TmaDescriptor(), "num_tiles": Int32(),
                       "k_tiles": Int32(), "epi_subtiles": Int32()})
    with k:
        a_desc, b_desc, c_desc, num_tiles, k_tiles, epi_subtiles = k.args
        smem_a = k.smem_alloc(num_stages * A_BYTES, align=1024, name="A")
        smem_b = k.smem_alloc(num_stages * B_BYTES, align=1024, name="B")
        smem_c = k.smem_alloc(EPI_STAGES * C_SUBTILE_BYTES, align=1024, name="C")

        ab = PipelineTmaAsync.create(
            num_stages=num_stages,
            producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, MMA_THREADS // 32),
            tx_count=A_BYTES + B_BYTES,
            barrier_storage=k.alloc_barriers(2 * num_stages), name="ab")
        c_store = PipelineTmaStore.create(
            num_stages=EPI_STAGES,
            producer_group=CooperativeGroup(Agent.Thread, MMA_THREADS))
        epilogue_barrier = NamedBarrier(barrier_id=1, num_threads=MMA_THREADS)

        warp_idx = k.warp_idx()
        with k.if_(warp_idx == 0):  # DMA warp
            prod = make_pipeline_state(PipelineUserType.Producer, num_stages)
            for tile, _ in k.range(num_tiles, carry=[prod]):
                for kt, _ in k.range(k_tiles, carry=[prod]):
                    ab.producer_acquire(prod)
                    with k.elect_one():
                        stage = prod.index
                        ab.tma_load(prod, a_desc, [kt * TILE_K, tile * TILE_M],
                                    smem_a.stage(stage, A_BYTES), A_BYTES)
                        ab.tma_load(prod, b_desc, [kt * TILE_K, tile * TILE_N],
                                    smem_b.stage(stage, B_BYTES), B_BYTES)
                    ab.producer_commit(prod)
                    prod.advance()
            ab.producer_tail(prod)

        with k.if_(warp_idx >= 4):  # MMA warpgroups
            cons = make_pipeline_state(PipelineUserType.Consumer, num_stages)
            is_storer = warp_idx == 4
            for tile, _ in k.range(num_tiles, carry=[cons]):
                for kt, _ in k.range(k_tiles, carry=[cons]):
                    ab.consumer_wait(cons)
                    # wgmma on stage cons.index, warpgroup.wait_group(0)
                    ab.consumer_release(cons)
                    cons.advance()

                for sub in k.range(epi_subtiles):
                    with k.if_(is_storer):
                        with k.elect_one():
                            c_store.producer_acquire()
                    epilogue_barrier.arrive_and_wait()
                    # registers -> smem_c.stage(sub % EPI_STAGES), fence
                    epilogue_barrier.arrive_and_wait()
                    with k.if_(is_storer):
                        with k.elect_one():
                            c_store.tma_store(c_desc, [sub, tile],
                                              smem_c.stage(sub % EPI_STAGES,
                                                           C_SUBTILE_BYTES))
                            c_store.producer_commit()
            with k.if_(is_storer):
                with k.elect_one():
                    c_store.producer_tail()
    return k
