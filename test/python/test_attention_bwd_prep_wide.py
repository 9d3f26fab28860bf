"""The wide preprocess of the attention backward (kernels/attention_bwd/
prep_wide.py, option ``prep_wide``): it builds through the family with no
spill and every load issued before the arithmetic; its addressing (the
kernel's own ``row_addresses`` and ``lane_rows``) covers every row of
ragged shapes once, in both orders, and a planted mistake is caught; its
sum is the old preprocess's tree bit for bit (a float32 model of both)."""

import numpy as np
import pytest

from _ptxas import registers_and_spills
from pipeline_mlir.kernels.attention_bwd import builder as ab
from pipeline_mlir.kernels.attention_bwd import prep_wide as pw
from pipeline_mlir.ops import attention_configs as ac

CASES = [(64, "bhs", 4), (128, "bhs", 4), (64, "bsh", 4), (128, "bsh", 4), (64, "bhs", 8),
         (128, "bhs", 8)]


@pytest.fixture(scope="module")
def ptxs():
    return {(d, o, n): pw.build(d, slots=n, order=o).to_ptx() for d, o, n in CASES}


@pytest.mark.parametrize("head_dim,order,slots", CASES)
def test_loads_issued_before_the_sum_and_no_spill(ptxs, head_dim, order, slots):
    ptx = ptxs[(head_dim, order, slots)]
    g = head_dim // pw.VEC
    lines = [ln.strip() for ln in ptx.splitlines()]
    first_mul = next(i for i, ln in enumerate(lines) if ln.startswith("mul.rn.f32"))
    before = lines[:first_mul]
    # O and dO of every slot, 16 bytes each, and the slots' LSE words
    assert sum(ln.startswith("ld.global.v4") for ln in before) == 2 * slots
    assert sum(ln.startswith("ld.global.b32") for ln in before) == slots
    assert "fma.rn.f32" not in ptx                  # the old kernel's mul.rn / add.rn
    assert ptx.count("shfl.sync.bfly") == slots * (g.bit_length() - 1)
    assert ptx.count("st.global") == 2 * slots
    regs_spills = registers_and_spills(ptx)
    if regs_spills is not None:
        assert regs_spills[1] == 0, regs_spills
        assert regs_spills[0] <= (64 if slots <= 4 else 128), regs_spills


def test_family_builds_the_variants():
    for name, overrides in (ac.bwd_prep_wide_variant(128), ac.bwd_prep_wide_variant(64, "bsh")):
        image, meta = ab.build_variant(overrides, "bf16", "sm_90a")
        assert len(image) > 0 and meta["params"] == ["o", "do", "lse", "lse_log2", "dpsum",
                                                     "rows", "heads", "seqlen", "padded"]
        assert meta["rows_per_warp"] == ac.BWD_PREP_WIDE_SLOTS * 32 // (overrides["head_dim"] // 8)
    assert ac.bwd_prep_for(128, ac.bwd_default_options(128, False)) == ac.bwd_prep_variant(128)
    assert ac.bwd_prep_for(128, ("prep_wide",)) == ac.bwd_prep_wide_variant(128)
    # d 64 runs it whatever its options (measured faster there), d 128 not
    for opts in ((), ac.bwd_default_options(64, True)):
        assert ac.bwd_prep_for(64, opts) == ac.bwd_prep_wide_variant(64)
    assert ac.BWD_PREP_WIDE_HEAD_DIMS == (64,)
    # the option leaves the main kernel's overrides as the default's
    base = ac.bwd_variant(64, True, options=ac.bwd_default_options(64, True))
    wide = ac.bwd_variant(64, True, options=ac.bwd_default_options(64, True) + ("prep_wide",))
    assert wide[1] == base[1] and wide[0] == base[0] + "_pw" and wide[0] in ac.BWD_CANDIDATES
    with pytest.raises(ValueError, match="overrides are kernel, head_dim"):
        ab.build_variant(dict(kernel="prep_wide", head_dim=64), "bf16", "sm_90a")


def _writes(head_dim, slots, order, b, s, h, warps_total, lane_rows=pw.lane_rows):
    """Every (output word, O row, LSE word) the grid writes, and the O
    columns loaded for each written row, from the kernel's addressing."""
    rows = b * s * h
    padded = -(-s // 64) * 64
    _, _, tile = pw.geometry(head_dim, slots)
    tiles = -(-rows // tile)
    stores, cols = [], {}
    for w in range(warps_total):
        for t in range(w, tiles, warps_total):        # the grid-stride loop
            for lane in range(32):
                for row, stored in lane_rows(head_dim, slots, t, lane, rows):
                    orow, lidx, dst = pw.row_addresses(row, h, s, padded, order)
                    cols.setdefault(orow, set()).update(pw.columns(head_dim, lane))
                    if stored:
                        stores.append((dst, orow, lidx))
    return stores, cols, padded


@pytest.mark.parametrize("head_dim,order,slots", CASES)
@pytest.mark.parametrize("b,s,h,warps_total", [(2, 333, 3, 7), (1, 77, 5, 64), (3, 1, 2, 1)])
def test_every_row_written_once(head_dim, order, slots, b, s, h, warps_total):
    stores, cols, padded = _writes(head_dim, slots, order, b, s, h, warps_total)
    want = {((bb * h + hh) * padded + ss, (bb * s + ss) * h + hh, (bb * h + hh) * s + ss)
            for bb in range(b) for hh in range(h) for ss in range(s)}
    assert len(stores) == len(want) and set(stores) == want     # each once, none past the tail
    assert set(cols) == {o for _, o, _ in want}                  # loads stay inside O
    assert all(c == set(range(head_dim)) for c in cols.values())


def test_a_planted_tail_mistake_is_caught():
    """The tail rows' stores without their ``row < rows`` guard: the clamped
    last row written again."""
    def unguarded(head_dim, slots, t, lane, rows):
        return [(row, lane % (head_dim // 8) == r)
                for r, (row, _) in enumerate(pw.lane_rows(head_dim, slots, t, lane, rows))]
    stores, _, _ = _writes(128, 4, "bhs", 2, 333, 3, 7, lane_rows=unguarded)
    assert len(stores) > len(set(stores))


def _old_sum(o, do):
    """attention_bwd_prep's dPsum of one row in float32: 8 products per lane
    summed pairwise, lanes past the row's 0, butterfly 16 .. 1."""
    d = o.shape[0]
    lanes = np.zeros(32, np.float32)
    for t in range(d // 8):
        p = (o[t * 8:t * 8 + 8] * do[t * 8:t * 8 + 8]).astype(np.float32)
        a = [p[0] + p[1], p[2] + p[3], p[4] + p[5], p[6] + p[7]]
        lanes[t] = (a[0] + a[1]) + (a[2] + a[3])
    for m in (16, 8, 4, 2, 1):
        lanes = lanes[np.arange(32) ^ m] + lanes
    return lanes


def _wide_sum(o, do):
    """prep_wide's: the same per-lane tree, butterfly G/2 .. 1 in the group."""
    d = o.shape[0]
    g = d // 8
    lanes = np.zeros(g, np.float32)
    for t in range(g):
        p = (o[t * 8:t * 8 + 8] * do[t * 8:t * 8 + 8]).astype(np.float32)
        a = [p[0] + p[1], p[2] + p[3], p[4] + p[5], p[6] + p[7]]
        lanes[t] = (a[0] + a[1]) + (a[2] + a[3])
    m = g // 2
    while m:
        lanes = lanes[np.arange(g) ^ m] + lanes
        m //= 2
    return lanes


@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_sum_is_the_old_kernels_bit_for_bit(head_dim):
    rng = np.random.default_rng(head_dim)
    for scale in (1.0, 1e-3, 300.0):
        o, do = (rng.standard_normal((200, head_dim)) * scale).astype(np.float32) \
            .view(np.uint32) & 0xFFFF0000, \
            (rng.standard_normal((200, head_dim))).astype(np.float32).view(np.uint32) & 0xFFFF0000
        o, do = o.view(np.float32), do.view(np.float32)              # bf16 values
        for r in range(200):
            old, new = _old_sum(o[r], do[r]), _wide_sum(o[r], do[r])
            assert old[0].tobytes() == new[0].tobytes()
            assert (new == new[0]).all()                          # every lane of the group
    # a planted change of order (masks 1 .. G/2) differs somewhere
    g = head_dim // 8
    diff = 0
    for r in range(200):
        lanes = np.zeros(g, np.float32)
        for t in range(g):
            p = (o[r, t * 8:t * 8 + 8] * do[r, t * 8:t * 8 + 8]).astype(np.float32)
            lanes[t] = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))
        m = 1
        while m < g:
            lanes = lanes[np.arange(g) ^ m] + lanes
            m *= 2
        diff += lanes[0].tobytes() != _old_sum(o[r], do[r])[0].tobytes()
    assert diff > 0
