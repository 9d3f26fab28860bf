"""FlashAttention-3's Hopper forward kernel, synchronization only.

Warp specialization over three warpgroups (384 threads): warpgroup 0 is the
producer, of which warp 0 issues every TMA load; warpgroups 1 and 2 are the
MMA consumers. Three TMA pipelines feed them:

- Q, one stage: loaded once per tile (persistent tile loop), waited on by both
  consumer warpgroups, released when the tile's last P @ V is issued. The
  consumers use the ``*_w_index_phase`` forms (stage 0, phase = tile parity),
  as flash-attention does for its single-stage pipelines.
- K and V, ``num_stages`` stages each, advanced *together by one state*
  (flash-attention's ``kv`` state): K of block n is released after S = Q K^T,
  V after O += P V.

The consumer warpgroups meet on a named barrier before the epilogue writes O
(both must be done reading the tile's Q). FA-3's inter-warpgroup ping-pong
scheduling barriers (which order the two warpgroups' GEMMs but carry no
pipeline stage) are left out.
"""

from pipeline_mlir.kernel import Int32, Kernel, TmaDescriptor
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier,
                                    PipelineTmaAsync, PipelineUserType,
                                    make_pipeline_state)

HEAD_DIM = 128
TILE_M, TILE_N = 128, 128
Q_BYTES = TILE_M * HEAD_DIM * 2  # bf16
KV_BYTES = TILE_N * HEAD_DIM * 2
MMA_WARPGROUPS = 2
MMA_WARPS = 4 * MMA_WARPGROUPS
THREADS = 128 * (1 + MMA_WARPGROUPS)


def build(num_stages=2, chip="sm_90a"):
    k = Kernel("fa3_hopper_fwd", chip=chip, block_dim=THREADS,
               params={"q_desc": TmaDescriptor(), "k_desc": TmaDescriptor(),
                       "v_desc": TmaDescriptor(), "num_tiles": Int32(),
                       "n_blocks": Int32()})
    with k:
        q_desc, k_desc, v_desc, num_tiles, n_blocks = k.args
        smem_q = k.smem_alloc(Q_BYTES, align=1024, name="Q")
        smem_k = k.smem_alloc(num_stages * KV_BYTES, align=1024, name="K")
        smem_v = k.smem_alloc(num_stages * KV_BYTES, align=1024, name="V")

        # Every consumer warp releases a stage once (tma_async consumers
        # count warps: CooperativeGroup(Thread, consumer warps)).
        consumers = CooperativeGroup(Agent.Thread, MMA_WARPS)
        one_tma_thread = CooperativeGroup(Agent.Thread, 1)
        pipeline_q = PipelineTmaAsync.create(
            num_stages=1, producer_group=one_tma_thread,
            consumer_group=consumers, tx_count=Q_BYTES,
            barrier_storage=k.alloc_barriers(2), name="q")
        pipeline_k = PipelineTmaAsync.create(
            num_stages=num_stages, producer_group=one_tma_thread,
            consumer_group=consumers, tx_count=KV_BYTES,
            barrier_storage=k.alloc_barriers(2 * num_stages), name="k")
        pipeline_v = PipelineTmaAsync.create(
            num_stages=num_stages, producer_group=one_tma_thread,
            consumer_group=consumers, tx_count=KV_BYTES,
            barrier_storage=k.alloc_barriers(2 * num_stages), name="v")
        epilogue_barrier = NamedBarrier(barrier_id=2, num_threads=128 * MMA_WARPGROUPS)

        warp_idx = k.warp_idx()
        with k.if_(warp_idx == 0):  # the producer warp
            q_state = make_pipeline_state(PipelineUserType.Producer, 1)
            kv_state = make_pipeline_state(PipelineUserType.Producer, num_stages)
            for tile, _ in k.range(num_tiles, carry=[q_state, kv_state]):
                pipeline_q.producer_acquire(q_state)
                with k.elect_one():
                    pipeline_q.tma_load(q_state, q_desc, [0, tile * TILE_M],
                                        smem_q, Q_BYTES)
                pipeline_q.producer_commit(q_state)
                q_state.advance()
                for nb, _ in k.range(n_blocks, carry=[kv_state]):
                    stage = kv_state.index
                    pipeline_k.producer_acquire(kv_state)
                    with k.elect_one():
                        pipeline_k.tma_load(kv_state, k_desc, [0, nb * TILE_N],
                                            smem_k.stage(stage, KV_BYTES), KV_BYTES)
                    pipeline_k.producer_commit(kv_state)
                    pipeline_v.producer_acquire(kv_state)
                    with k.elect_one():
                        pipeline_v.tma_load(kv_state, v_desc, [0, nb * TILE_N],
                                            smem_v.stage(stage, KV_BYTES), KV_BYTES)
                    pipeline_v.producer_commit(kv_state)
                    kv_state.advance()
            pipeline_q.producer_tail(q_state)
            pipeline_k.producer_tail(kv_state)
            pipeline_v.producer_tail(kv_state)

        with k.if_(warp_idx >= 4):  # the two MMA warpgroups
            kv_state = make_pipeline_state(PipelineUserType.Consumer, num_stages)
            for tile, _ in k.range(num_tiles, carry=[kv_state]):
                q_phase = tile & 1
                pipeline_q.consumer_wait_w_index_phase(0, q_phase)
                for nb, _ in k.range(n_blocks, carry=[kv_state]):
                    pipeline_k.consumer_wait(kv_state)
                    # S = Q @ K^T (wgmma), softmax rescaling
                    pipeline_k.consumer_release(kv_state)
                    pipeline_v.consumer_wait(kv_state)
                    # O += P @ V (wgmma)
                    pipeline_v.consumer_release(kv_state)
                    kv_state.advance()
                pipeline_q.consumer_release_w_index(0)
                # Both warpgroups finished with the tile before O goes to
                # shared memory.
                epilogue_barrier.arrive_and_wait()
    return k
