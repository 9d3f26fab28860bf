"""CuTe DSL's Blackwell dense GEMM (persistent, warp-specialized),
synchronization only.

Six warps: warps 0-3 run the epilogue, warp 4 issues the tcgen05 MMAs,
warp 5 loads A and B with TMA. Two pipelines:

- ``ab`` (PipelineTmaUmma, ``num_stages``): the TMA warp fills a stage, the
  MMA warp waits for it and releases it with an elected ``tcgen05.commit``
  that arrives once the MMAs reading it are done;
- ``acc`` (PipelineUmmaAsync, two accumulator stages in tensor memory): the
  MMA warp acquires an accumulator buffer per tile and commits it after the
  tile's last MMA; the 128 epilogue threads wait for it, drain it and release
  it, so the MMA warp can start the next tile while the epilogue runs.

A static persistent scheduler hands each CTA ``num_tiles`` tiles; every state
runs across tiles. Both producer warps end with their pipeline's tail.

``cta_pair=True`` is the 2-CTA (``cta_group::2``) form: a cluster of two CTAs
whose TMA warps each load half of the operands onto the pair leader's full
barrier (tx_count is the pair's bytes), whose MMA warp runs in the leader
only (its tcgen05.commit signals both CTAs), and whose epilogue threads of
both CTAs release the leader's accumulator stage -- the empty barrier
counts twice the consumer group, as the lowering initializes it.
"""

from pipeline_mlir.kernel import Int32, Kernel, TmaDescriptor
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineTmaUmma,
                                    PipelineUmmaAsync, PipelineUserType,
                                    make_pipeline_state)

TILE_M, TILE_N, TILE_K = 128, 256, 64
A_BYTES = TILE_M * TILE_K * 2  # bf16
B_BYTES = TILE_N * TILE_K * 2
EPILOGUE_THREADS = 128
ACC_STAGES = 2
MMA_WARP, TMA_WARP = 4, 5


def build(num_stages=4, chip="sm_100a", cta_pair=False):
    pair = 2 if cta_pair else 1
    layout = (2, 1, 1, 1) if cta_pair else None
    k = Kernel("cute_blackwell_gemm" + ("_2cta" if cta_pair else ""), chip=chip,
               block_dim=EPILOGUE_THREADS + 64, cluster_dim=(pair, 1, 1),
               params={"a_desc": TmaDescriptor(), "b_desc": TmaDescriptor(),
                       "num_tiles": Int32(), "k_tiles": Int32()})
    with k:
        a_desc, b_desc, num_tiles, k_tiles = k.args
        smem_a = k.smem_alloc(num_stages * A_BYTES, align=1024, name="A")
        smem_b = k.smem_alloc(num_stages * B_BYTES, align=1024, name="B")

        ab = PipelineTmaUmma.create(
            num_stages=num_stages,
            producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 1),
            tx_count=pair * (A_BYTES + B_BYTES), cta_layout_vmnk=layout,
            barrier_storage=k.alloc_barriers(2 * num_stages), name="ab")
        acc = PipelineUmmaAsync.create(
            num_stages=ACC_STAGES,
            producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, EPILOGUE_THREADS),
            cta_layout_vmnk=layout,
            barrier_storage=k.alloc_barriers(2 * ACC_STAGES), name="acc")

        warp_idx = k.warp_idx()
        with k.if_(warp_idx == TMA_WARP):
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

        is_mma = warp_idx == MMA_WARP
        if cta_pair:  # the pair leader issues the 2-CTA MMAs
            is_mma = is_mma & (k.cluster_cta_rank() % 2 == 0)
        with k.if_(is_mma):
            ab_cons = make_pipeline_state(PipelineUserType.Consumer, num_stages)
            acc_prod = make_pipeline_state(PipelineUserType.Producer, ACC_STAGES)
            for tile, _ in k.range(num_tiles, carry=[ab_cons, acc_prod]):
                acc.producer_acquire(acc_prod)
                for kt, _ in k.range(k_tiles, carry=[ab_cons]):
                    ab.consumer_wait(ab_cons)
                    # tcgen05.mma into accumulator stage acc_prod.index
                    ab.consumer_release(ab_cons)
                    ab_cons.advance()
                acc.producer_commit(acc_prod)
                acc_prod.advance()
            acc.producer_tail(acc_prod)

        with k.if_(warp_idx < 4):  # epilogue warps
            acc_cons = make_pipeline_state(PipelineUserType.Consumer, ACC_STAGES)
            for tile, _ in k.range(num_tiles, carry=[acc_cons]):
                acc.consumer_wait(acc_cons)
                # tcgen05.ld the accumulator, convert, store C
                acc.consumer_release(acc_cons)
                acc_cons.advance()
    return k
