"""Stage: the forward's producer warp (``producer``): per work unit Q, then
K and V block by block.
"""

from mlir.dialects import llvm, nvvm

from pipeline_mlir.kernel import fence_view_async_shared
from pipeline_mlir.kernel.values import i32, to_value
from pipeline_mlir.pipeline import PipelineUserType

from .config import ROW_SUM_ROWS
from .mainloop import E4M3_ONES

FULL_WARP = 0xFFFFFFFF


def producer(k, cfg, rings, sched, args):
    """Warp 0 of warpgroup 0: per work unit, Q into its stage, then K and V
    block by block into their rings, every load a 3-D TMA box (d-columns,
    rows, batch) that reads zeros past the sequence's end."""
    d, bm, bn = cfg.head_dim, cfg.block_m, cfg.kv_block
    if cfg.row_sum_fold:
        write_ones(k, cfg, rings.v)
    q_state, k_state, v_state = rings.states(PipelineUserType.Producer)
    for r, _ in k.range(sched.rounds, carry=[q_state, k_state, v_state]):
        m_block, b, h = sched.round_unit(r)
        q = rings.q
        if cfg.pack_gqa:
            # The unit's head is the K/V head; Q is a 4-D TMA box (columns,
            # the group's g heads, tile_positions positions, batch), whose
            # rows land in shared memory as packed rows (position, head).
            h_kv = h
            q_coords = [h * cfg.pack_gqa, m_block * cfg.tile_positions, b]
        else:
            h_kv = h // sched.group
            q_coords = None
        q.pipe.producer_acquire(q_state)
        with k.elect_one():
            for col, off in q.layout.box_offsets():
                coords = ([col] + q_coords if q_coords is not None
                          else [h * d + col, m_block * bm, b])
                q.pipe.tma_load(q_state, args.q, coords,
                                q.buffer(q_state.index) + off, q.layout.box_bytes)
        q.pipe.producer_commit(q_state)
        q_state.advance()

        def load(ring, desc, state, j, transposed=False):
            # Each box's bytes: its share of the stage's transaction bytes
            # (with row_sum_fold V's boxes are 8 rows longer than the TMA
            # box: the ones below it).
            box_bytes = ring.tx_bytes // ring.layout.boxes
            ring.pipe.producer_acquire(state)
            with k.elect_one():
                tile = ring.buffer(state.index)
                for col, off in ring.layout.box_offsets():
                    # V^T (FP8): rows are the head's d, columns its keys.
                    coords = ([j * bn + col, h_kv * d, b] if transposed
                              else [h_kv * d + col, j * bn, b])
                    ring.pipe.tma_load(state, desc, coords, tile + off, box_bytes)
            ring.pipe.producer_commit(state)
            state.advance()

        # In the order the consumers read them: K_0, then K_j with
        # V_{j-1} (S_j is issued before P_{j-1} V_{j-1}), then the
        # last V. Loading V_j before K_{j+1} would make the next
        # K wait behind a V stage released one block later.
        load(rings.k, args.k, k_state, 0)
        for j, _ in k.range(1, sched.kv_blocks(m_block), carry=[k_state, v_state]):
            load(rings.k, args.k, k_state, j)
            load(rings.v, args.v, v_state, j - 1, cfg.fp8)
        load(rings.v, args.v, v_state, sched.kv_blocks(m_block) - 1, cfg.fp8)
    # No arrive may land on this CTA's barriers after it exits.
    rings.q.pipe.producer_tail(q_state)
    rings.k.pipe.producer_tail(k_state)
    rings.v.pipe.producer_tail(v_state)


def write_ones(k, cfg, ring):
    """``cfg.row_sum_fold``: the ones' 8 rows below V^T's d rows in every
    box of every V stage (``cfg.pv_layout``), e4m3 1.0 in every byte (so
    the swizzle does not matter), written by the producer warp before its
    first load: the stages are all empty then and the TMA never writes
    these bytes. Fenced for the async proxy (wgmma reads them) and synced
    over the warp, so the first V stage's commit, one lane's arrive,
    releases them with the TMA's bytes."""
    layout = ring.layout
    lane = k.lane_idx()
    words = ROW_SUM_ROWS * layout.atom_bytes // 4          # one box's ones, 4 bytes a word
    first = cfg.head_dim * layout.atom_bytes               # below the box's d rows
    for stage in range(ring.stages):
        for _, off in layout.box_offsets():
            base = ring.buffer(stage) + off + first
            for w in range(0, words, 32):
                llvm.store(to_value(E4M3_ONES, i32()), (base + (lane + w) * 4).ir_value)
    fence_view_async_shared()
    nvvm.bar_warp_sync(to_value(FULL_WARP, i32()))
