"""``dq_acc_order``'s dQ postprocess kernel
(kernels/attention_bwd_dq_convert.py), without a GPU: the flat fp32
accumulator in the wgmma fragments' order, un-permuted and rounded to the
bf16 dQ in one pass (coalesced 16-byte loads, a 4 x 4 transpose of bf16x2
words within each quad by ``shfl.sync.bfly``, 16-byte stores of 8
contiguous columns).

Here: the CPU reference of the kernel's index map (its own read and write
address functions and its exchange, run on numpy arrays over every thread
of every tile, land each accumulator float where the host's un-permute
puts it, ragged rows left out, for 3 heads and 2 batch entries at d 64 and
d 128; a wrong exchange fails it); the PTX (8 ``ld.global.v4``, 16
``shfl.sync.bfly``, 4 ``st.global.v4``, no barrier, no shared memory) and
ptxas without spills; the family builds it, the host loads it only for
``dq_acc_order`` builds and checks its arguments.
"""

import numpy as np
import pytest

from _ptxas import spill_bytes
from pipeline_mlir.kernels import attention_bwd as ab
from pipeline_mlir.kernels import attention_bwd_dq_convert as conv
from pipeline_mlir.ops import attention_bwd_host as host
from pipeline_mlir.ops import attention_configs


@pytest.fixture(scope="module")
def ptx():
    """PTX of the postprocess at d 64 and d 128, built once."""
    return {d: conv.build(d).to_ptx() for d in conv.HEAD_DIMS}


def _numpy_bfly(v, mask):
    """``shfl.sync.bfly`` over the last axis (128 threads: lane ^ mask
    stays in the warp for mask < 32)."""
    return v[..., np.arange(v.shape[-1]) ^ mask]


def emulate(acc, batch, padded, seqlen, heads, head_dim, transpose=conv.quad_transpose):
    """The kernel on the host: for every tile (CTA) and thread, the
    accumulator floats its stores write, by the kernel's own address
    functions and exchange (words carry the accumulator index of their
    low float). Returns the (batch, seqlen, heads, head_dim) output and how
    often each element was written."""
    groups = head_dim // conv.TILE
    tiles_per_batch = padded // conv.TILE
    ntiles = batch * tiles_per_batch * heads * groups
    tile = np.arange(ntiles)[:, None]
    t = np.arange(conv.THREADS)[None, :]
    p = t % 4
    b, mt, h, g = conv.tile_coords(tile, tiles_per_batch, heads, groups)
    out = np.zeros(batch * seqlen * heads * head_dim, dtype=acc.dtype)
    writes = np.zeros(out.shape, dtype=np.int64)
    for eh in range(2):
        for j in range(2):
            words = []
            for kk in (2 * j, 2 * j + 1):
                first = conv.read_float(tile, t, 2 * kk + eh)
                words += [first, first + 2]        # (x0, x1), (x2, x3)
            words = transpose(words, p, np.where, _numpy_bfly)
            row_in_tile, col = conv.write_row_col(t, eh, j)
            row = mt * conv.TILE + row_in_tile
            valid = row < seqlen
            e0 = conv.write_element(conv.row_head(b, row, h, seqlen, heads),
                                    g * conv.TILE + col, head_dim)
            for n, w in enumerate(words):
                for half in range(2):
                    dst = (e0 + 2 * n + half)[valid]
                    out[dst] = acc[(w + half)[valid]]
                    np.add.at(writes, dst, 1)
    return out.reshape(batch, seqlen, heads, head_dim), writes


def _no_transpose(words, p, select, bfly):
    return list(words)


def _one_stage(words, p, select, bfly):
    """Only the mask-1 stage: a planted mistake."""
    words = list(words)
    high = p % 2 == 1
    for m in (0, 2):
        got = bfly(select(high, words[m], words[m + 1]), 1)
        words[m], words[m + 1] = select(high, got, words[m]), select(high, words[m + 1], got)
    return words


@pytest.mark.parametrize("head_dim,opts", [
    (64, attention_configs.bwd_default_options(64, False)),
    (128, attention_configs.BWD_DEFAULT_OPTIONS[128])], ids=["d64", "d128"])
def test_the_kernels_index_map_is_the_unpermute(head_dim, opts):
    """A random accumulator of a ragged length (padded to the main kernel's
    query block), 3 heads, 2 batch entries: the kernel's map writes every
    dQ element once, the value the host's un-permute
    (``dq_from_acc_order``) puts there; without the exchange, or with one
    stage of it, it does not."""
    cfg = ab.AttentionBwdConfig(**attention_configs.bwd_variant(
        head_dim, False, options=opts + ("dq_acc_order",))[1])
    batch, heads, seqlen = 2, 3, 200
    padded = -(-seqlen // cfg.block_m) * cfg.block_m
    rng = np.random.default_rng(1)
    acc = rng.standard_normal(batch * padded * heads * head_dim).astype(np.float32)
    want = host.dq_from_acc_order(acc, batch, padded, heads, head_dim)[:, :seqlen]
    got, writes = emulate(acc, batch, padded, seqlen, heads, head_dim)
    assert (writes == 1).all()
    assert np.array_equal(got, want)
    for wrong in (_no_transpose, _one_stage):
        bad, _ = emulate(acc, batch, padded, seqlen, heads, head_dim, transpose=wrong)
        assert not np.array_equal(bad, want), wrong.__name__


def test_each_load_and_store_is_contiguous():
    """At each load a warp reads 512 contiguous bytes; each store is 8
    contiguous bf16 columns (16 bytes, aligned) and a quad's four stores
    one row's 64 contiguous bytes."""
    for c in range(conv.CHUNKS):
        for w in range(4):
            starts = [conv.read_float(0, t, c) * 4 for t in range(32 * w, 32 * w + 32)]
            assert starts == list(range(starts[0], starts[0] + 512, 16))
    for t in range(0, conv.THREADS, 4):
        for eh in range(2):
            for j in range(2):
                rc = [conv.write_row_col(t + p, eh, j) for p in range(4)]
                assert len({r for r, _ in rc}) == 1
                assert [c for _, c in rc] == [32 * j + 8 * p for p in range(4)]


def test_the_ptx_and_ptxas(ptx):
    """8 ``ld.global.v4`` and 4 ``st.global.v4`` a thread, 16 butterfly
    shuffles, 16 bf16x2 conversions, no barrier and no shared memory;
    ptxas spills nothing."""
    for d, text in ptx.items():
        assert text.count("ld.global.v4.b32") == 8, d
        assert text.count("st.global.v4.b32") == 4, d
        assert text.count("shfl.sync.bfly.b32") == 16, d
        assert text.count("cvt.rn.bf16x2.f32") == 16, d
        assert "bar.sync" not in text and "barrier" not in text and ".shared" not in text, d
        spills = spill_bytes(text)
        if spills is None:
            pytest.skip("ptxas not installed")
        assert spills == 0, (d, spills)


def test_the_family_builds_it_and_the_host_wants_it_for_dq_acc_order():
    """In the backward's variant table (so the kernel cache builds it),
    built by the family from its overrides; d 256 and other overrides
    refused."""
    for d in (64, 128):
        name, over = attention_configs.bwd_dq_convert_variant(d)
        assert attention_configs.BWD_VARIANTS[name] == over == dict(kernel="dq_convert",
                                                                    head_dim=d)
    image, meta = ab.build_variant(over, "bf16", "sm_90a")
    assert len(image) > 0 and meta["head_dim"] == 128 and meta["threads"] == conv.THREADS
    assert meta["params"] == ["acc", "dq", "tiles_per_batch", "heads", "seqlen"]
    assert meta["smem"] == 0
    with pytest.raises(ValueError, match="overrides are kernel and head_dim"):
        ab.build_variant(dict(over, causal=True), "bf16", "sm_90a")
    with pytest.raises(ValueError, match="head_dim must be one of"):
        attention_configs.bwd_dq_convert_variant(256)
    with pytest.raises(ValueError, match="head_dim must be one of"):
        conv.build(256)
