"""FlashAttention-3's Hopper forward kernel, synchronization only.

Warp specialization over three warpgroups (384 threads): warpgroup 0 is the
producer, of which warp 0 issues every TMA load; warpgroups 1 and 2 are the
MMA consumers, each computing 64 rows of the tile. Three TMA pipelines feed
them:

- Q, one stage: loaded once per tile (persistent tile loop), waited on by both
  consumer warpgroups, released after the tile's last S = Q K^T retired.
- K and V, ``num_stages`` stages each, advanced *together by one state*
  (flash-attention's ``kv`` state) on the producer side.

The consumers overlap softmax with the next GEMM inside a warpgroup
(FA-3's intra-warpgroup overlap): block 0's S is computed first; then each
iteration issues S of block n and O += P V of block n - 1 as two wgmma
groups, so ``wait_group(1)`` retires S (K of block n may go back) while P V
still runs, and ``wait_group(0)`` retires P V (V of block n - 1 may go
back). The read state of V runs one stage behind K's. The last block's P V
closes the tile.

The two consumer warpgroups take turns on the tensor cores (FA-3's
inter-warpgroup ping-pong): each waits on its own scheduler barrier before
issuing its GEMMs and then arrives on the other's; warpgroup 2 arrives on
warpgroup 1's once at the start so that warpgroup 1 goes first. They meet
on a named barrier before the epilogue writes O.

The math is left out: one k16 wgmma stands for each GEMM (the order of
groups, waits and releases is what is checked), P is read from shared
memory instead of registers.

``build(mistake=...)`` plants one of the attention-specific mistakes
(``MISTAKES``) that the checker and the simulator must reject.
"""

from pipeline_mlir.kernel import Int32, Kernel, TmaDescriptor, wgmma
from pipeline_mlir.layout import OperandLayout
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier,
                                    PipelineState, PipelineTmaAsync, PipelineUserType,
                                    make_pipeline_state)

HEAD_DIM = 128
TILE_M, TILE_N = 128, 128
Q_BYTES = TILE_M * HEAD_DIM * 2  # bf16
KV_BYTES = TILE_N * HEAD_DIM * 2
MMA_WARPGROUPS = 2
MMA_WARPS = 4 * MMA_WARPGROUPS
THREADS = 128 * (1 + MMA_WARPGROUPS)
ROWS_PER_WARPGROUP = TILE_M // MMA_WARPGROUPS
P_BYTES = ROWS_PER_WARPGROUP * TILE_N * 2
SWIZZLE = 128
EPILOGUE_BARRIER = 2
SCHEDULER_BARRIER = 3  # ids 3 and 4: one per consumer warpgroup

MISTAKES = (
    # K of block n released between the P V commit and wait_group(1): the
    # S = Q K^T group may still read it.
    "k_released_before_s_retired",
    # V of block n - 1 released after wait_group(1), which keeps the newest
    # group (P V) in flight.
    "v_released_before_pv_retired",
    # Each warpgroup waits on the other's scheduler barrier instead of its
    # own (and still arrives there): each barrier is reached by one
    # warpgroup only; warpgroup 2 completes barrier 1 with its own arrives
    # and runs ahead, warpgroup 1 waits forever, and both end up waiting
    # (warpgroup 2 at the epilogue barrier).
    "pingpong_barriers_crossed",
    # Q released right after block 0's S was issued (not after the tile's
    # last S retired): the producer re-arms Q and loads the next tile's Q
    # while that S still reads it.
    "q_rearmed_while_read",
)


def build(num_stages=2, chip="sm_90a", mistake=None):
    if mistake not in (None, *MISTAKES):
        raise ValueError(f"fa3_hopper_fwd: mistake must be None or one of {MISTAKES}, "
                         f"got {mistake!r}")
    k = Kernel("fa3_hopper_fwd", chip=chip, block_dim=THREADS,
               params={"q_desc": TmaDescriptor(), "k_desc": TmaDescriptor(),
                       "v_desc": TmaDescriptor(), "num_tiles": Int32(),
                       "n_blocks": Int32()})
    with k:
        q_desc, k_desc, v_desc, num_tiles, n_blocks = k.args
        smem_q = k.smem_alloc(Q_BYTES, align=1024, name="Q")
        smem_k = k.smem_alloc(num_stages * KV_BYTES, align=1024, name="K")
        smem_v = k.smem_alloc(num_stages * KV_BYTES, align=1024, name="V")
        smem_p = k.smem_alloc(MMA_WARPGROUPS * P_BYTES, align=1024, name="P")

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
        epilogue_barrier = NamedBarrier(barrier_id=EPILOGUE_BARRIER,
                                        num_threads=128 * MMA_WARPGROUPS)
        # Both warpgroups reach each scheduler barrier: its owner syncs,
        # the other arrives.
        scheduler = NamedBarrier(barrier_id=SCHEDULER_BARRIER,
                                 num_threads=128 * MMA_WARPGROUPS, num_ids=MMA_WARPGROUPS)

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
            wg = warp_idx // 4 - 1
            own, other = wg, 1 - wg
            if mistake == "pingpong_barriers_crossed":
                own = other  # waits where it also arrives: on the other's id
            mma_s = wgmma.WarpgroupMma(TILE_N)
            mma_o = wgmma.WarpgroupMma(HEAD_DIM)
            # One swizzle span of K per operand tile: the descriptors only
            # have to address the right stage here.
            rows_64 = OperandLayout.one_box("bf16", "K", SWIZZLE, ROWS_PER_WARPGROUP)
            rows_k = OperandLayout.one_box("bf16", "K", SWIZZLE, TILE_N)
            rows_v = OperandLayout.one_box("bf16", "K", SWIZZLE, HEAD_DIM)
            p_desc = wgmma.smem_matrix_descriptor(smem_p + wg * P_BYTES, rows_64)

            def q_desc_of(q_read):
                rows = smem_q.stage(q_read.index, Q_BYTES) + wg * (Q_BYTES // MMA_WARPGROUPS)
                return wgmma.smem_matrix_descriptor(rows, rows_64)

            def gemm_s(q_read, k_read):
                """S = Q K^T of one block, one wgmma group."""
                s = mma_s.accumulator()
                wgmma.fence()
                mma_s.mma(s, q_desc_of(q_read), wgmma.smem_matrix_descriptor(
                    smem_k.stage(k_read.index, KV_BYTES), rows_k))
                wgmma.commit_group()

            def gemm_pv(o, v_read):
                """O += P V of one block, one wgmma group."""
                wgmma.fence()
                mma_o.mma(o, p_desc, wgmma.smem_matrix_descriptor(
                    smem_v.stage(v_read.index, KV_BYTES), rows_v))
                wgmma.commit_group()

            # Warpgroup 1 takes the tensor cores first.
            with k.if_(wg == 1):
                scheduler.arrive_w_index(0)

            kv = make_pipeline_state(PipelineUserType.Consumer, num_stages)
            for tile, _ in k.range(num_tiles, carry=[kv]):
                q_read = PipelineState(1, 0, 0, tile & 1, user_type=PipelineUserType.Consumer)
                pipeline_q.consumer_wait(q_read)
                o = mma_o.accumulator()

                # Block 0: S only (there is no P yet).
                pipeline_k.consumer_wait(kv)
                scheduler.arrive_and_wait_w_index(own)
                gemm_s(q_read, kv)
                scheduler.arrive_w_index(other)
                if mistake == "q_rearmed_while_read":
                    pipeline_q.consumer_release(q_read)
                wgmma.wait_group(0)
                pipeline_k.consumer_release(kv)
                # softmax(S_0) -> P
                v_read = kv.clone()
                kv.advance()

                for nb, _ in k.range(1, n_blocks, carry=[kv, v_read, o]):
                    pipeline_k.consumer_wait(kv)
                    scheduler.arrive_and_wait_w_index(own)
                    gemm_s(q_read, kv)
                    pipeline_v.consumer_wait(v_read)
                    gemm_pv(o, v_read)
                    scheduler.arrive_w_index(other)
                    if mistake == "k_released_before_s_retired":
                        pipeline_k.consumer_release(kv)
                    # Retires S (committed before P V): K of block n is free.
                    wgmma.wait_group(1)
                    if mistake != "k_released_before_s_retired":
                        pipeline_k.consumer_release(kv)
                    if mistake == "v_released_before_pv_retired":
                        pipeline_v.consumer_release(v_read)
                    # softmax(S_n) overlaps P V of block n - 1
                    wgmma.wait_group(0)
                    if mistake != "v_released_before_pv_retired":
                        pipeline_v.consumer_release(v_read)
                    kv.advance()
                    v_read.advance()

                # Every S of the tile has retired: Q may be re-armed.
                if mistake != "q_rearmed_while_read":
                    pipeline_q.consumer_release(q_read)
                # The last block's P V.
                pipeline_v.consumer_wait(v_read)
                scheduler.arrive_and_wait_w_index(own)
                gemm_pv(o, v_read)
                scheduler.arrive_w_index(other)
                wgmma.wait_group(0)
                pipeline_v.consumer_release(v_read)
                # Both warpgroups finished with the tile before O goes to
                # shared memory.
                epilogue_barrier.arrive_and_wait()
    return k


if __name__ == "__main__":
    import sys
    mistake = sys.argv[1] if len(sys.argv) > 1 else None
    print(build(mistake=mistake).module)
