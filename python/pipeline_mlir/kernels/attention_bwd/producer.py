"""Stage: the backward's producer warp (``producer``): K and V once, then Q,
LSE, dO and dPsum per step.
"""

from pipeline_mlir.kernel.memory import element_ptr
from pipeline_mlir.kernel.values import f32
from pipeline_mlir.pipeline import PipelineUserType



def producer(k, cfg, rings, sched, args):
    """Warp 0 of warpgroup 0: the CTA's K and V once, then per step Q,
    LSE, dO and dPsum, each into its ring: Q and dO as 3-D TMA boxes (rows
    past the sequence read zeros), LSE and dPsum as bulk copies of one
    query block's padded row (with ``stats_with_tiles`` on Q's and dO's
    stages: LSE's copy after Q's boxes, dPsum's after dO's, under the same
    acquire; with ``rows_first`` before them)."""
    d, bm, bn = cfg.head_dim, cfg.block_m, cfg.block_n
    kv_layout, q_layout = cfg.kv_layout(), cfg.q_layout()
    kv_bytes = kv_layout.bytes
    b, h_kv = sched.b, sched.h_kv
    pipe_kv = rings.kv.pipe
    kv_state = rings.kv.state(PipelineUserType.Producer)
    pipe_kv.producer_acquire(kv_state)
    with k.elect_one():
        tile = rings.kv.buffer(kv_state.index)
        for desc, base in ((args.k, 0), (args.v, kv_bytes)):
            for col, off in kv_layout.box_offsets():
                pipe_kv.tma_load(kv_state, desc, [h_kv * d + col, sched.n_block * bn, b],
                                 tile + (base + off), kv_layout.box_bytes)
    pipe_kv.producer_commit(kv_state)
    kv_state.advance()

    states = rings.states(PipelineUserType.Producer)
    for it, _ in k.range(sched.steps, carry=states):
        h, m_block = sched.step(it)
        q_state, lse_state, do_state, dpsum_state = rings.step_states(states)
        row = (b * args.heads + h) * sched.padded_q + m_block * bm

        def row_copy(ring, state, rows, src):
            """The query block's row of ``src`` into ``rows``' buffer of
            ``state``'s stage, counted on ``ring``'s barrier."""
            ring.pipe.bulk_copy(state, element_ptr(src, f32(), row),
                                rows.buffer(state.index), cfg.row_bytes)

        def tile_load(ring, state, desc, row_src=None):
            ring.pipe.producer_acquire(state)
            with k.elect_one():
                t = ring.buffer(state.index)
                if row_src is not None and cfg.rows_first:
                    row_copy(ring, state, rings.rows_of(ring), row_src)
                for col, off in q_layout.box_offsets():
                    ring.pipe.tma_load(state, desc, [h * d + col, m_block * bm, b],
                                       t + off, q_layout.box_bytes)
                if row_src is not None and not cfg.rows_first:
                    # stats_with_tiles: its row rides along
                    row_copy(ring, state, rings.rows_of(ring), row_src)
            ring.pipe.producer_commit(state)
            state.advance()

        def row_load(ring, state, src):
            ring.pipe.producer_acquire(state)
            with k.elect_one():
                row_copy(ring, state, ring, src)
            ring.pipe.producer_commit(state)
            state.advance()

        if rings.stats_with_tiles:
            tile_load(rings.q, q_state, args.q, args.lse_log2)
            tile_load(rings.do, do_state, args.do, args.dpsum)
        else:
            tile_load(rings.q, q_state, args.q)
            row_load(rings.lse, lse_state, args.lse_log2)
            tile_load(rings.do, do_state, args.do)
            row_load(rings.dpsum, dpsum_state, args.dpsum)
    # No arrive may land on this CTA's barriers after it exits.
    pipe_kv.producer_tail(kv_state)
    piped = ((rings.q, rings.do) if rings.stats_with_tiles
             else (rings.q, rings.lse, rings.do, rings.dpsum))
    for ring, state in zip(piped, states):
        ring.pipe.producer_tail(state)
