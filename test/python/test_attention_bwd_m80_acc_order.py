"""dQ^T in the accumulator's order at 80-query steps (``block_m80`` with
``dq_acc_order``), without a GPU.

The 80-query step computes dQ^T (an ``m64 x n80`` fragment per consumer:
rows its 64 dQ columns, columns the 80 queries). With ``dq_acc_order`` each
thread writes its 40 values as 10 16-byte chunks in the accumulator's
transposed order (``ACC_ORDER.for_block_m(80)``), the reduce warp adds a
consumer's 20 KiB tile with one reduce-add over the flat view, and the
postprocess (``attention_bwd_dq_convert.build(128, block_m=80)``)
un-permutes it.

Here: the order's map walked over every value of every thread (each lands
once, where the host's un-permute reads the query and dQ column the
fragment holds, through the kernel's own chunk stores and tile rows); the
postprocess's address functions and its pair exchange run on numpy over
every thread of every tile of a ragged GQA-sized accumulator give the
host's un-permute (every element once; without the exchange they do not),
each warp store four whole 32-byte sectors; its PTX counts and ptxas
without spills. The main kernel's checks, simulation, spills and planted
mistakes: test_attention_bwd_m80.py.
"""

import numpy as np
import pytest

from _ptxas import spill_bytes
from test_attention_bwd_dq_convert import _numpy_bfly
from pipeline_mlir.kernel.fragment import Fragment
from pipeline_mlir.kernels import attention_bwd as ab
from pipeline_mlir.kernels import attention_bwd_dq_convert as conv
from pipeline_mlir.kernels.attention_bwd.dq_acc_order import acc_order, acc_tile_row
from pipeline_mlir.ops import attention_bwd_host as host
from pipeline_mlir.ops import attention_configs
from pipeline_mlir.ops.attention_bwd_acc_order import ACC_ORDER

DQA = ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles", "dk_last",
       "ds_one_barrier", "block_m80", "dq_acc_order")
ORDER = ACC_ORDER.for_block_m(80)
BATCH, HEADS, SEQLEN, D = 2, 3, 200, 128        # ragged: 200 is no whole 80-row step


def _cfg():
    return ab.AttentionBwdConfig(**attention_configs.bwd_variant(128, False, options=DQA)[1])


def test_the_set_is_d128_fulls_default_and_its_postprocess_in_the_table():
    """d 128 full's default; its postprocess in the op's variant table (the
    kernel cache builds it) and the host loads it for the 80-query build."""
    name, over = attention_configs.bwd_variant(128, False, options=DQA)
    assert attention_configs.BWD_CANDIDATES[name] == over and name.endswith("_dqa_m80")
    assert attention_configs.bwd_default_options(128, False) == DQA
    cname, cover = attention_configs.bwd_dq_convert_variant(128, 80)
    assert attention_configs.BWD_VARIANTS[cname] == cover
    # The 64-query postprocess's name and overrides are unchanged.
    assert attention_configs.bwd_dq_convert_variant(128) == (
        "bwd_dq_convert_d128", dict(kernel="dq_convert", head_dim=128))
    cfg = _cfg()
    assert acc_order(cfg) == ORDER and ORDER.transposed and not ACC_ORDER.transposed
    assert (ORDER.queries, ORDER.tile_floats, ORDER.chunks, ORDER.tile_rows) == (80, 5120, 10, 20)
    assert cfg.dq_layout().bytes == ORDER.tile_floats * 4       # the reduce-add's box


def _placed_ids(cfg):
    """A flat accumulator in which every value of every consumer's fragment
    of every step, stored as the kernel stores it (``acc_tile_row``'s tile,
    thread ``t``'s chunk ``c`` at ``chunk_float(t, c)``, its values in
    ``chunk_values(c)``'s order), holds the flat index of the dQ element
    (batch, query, head, column) the fragment computes; and how often each
    float was written."""
    padded = -(-SEQLEN // 80) * 80
    acc = np.full(BATCH * padded * HEADS * D, -1, dtype=np.int64)
    writes = np.zeros(acc.shape, dtype=np.int64)
    for b in range(BATCH):
        for m_block in range(padded // 80):
            for h in range(HEADS):
                for cw in range(2):
                    base = acc_tile_row(cfg, b, HEADS, padded, h, m_block, cw) * ORDER.row
                    for t in range(ORDER.threads):
                        row0, col0 = Fragment.thread_origin(t // 32, t % 32)
                        for c in range(ORDER.chunks):
                            for e, i in enumerate(ORDER.chunk_values(c)):
                                dr, dc = Fragment.element_offset(i)
                                query = m_block * 80 + col0 + dc     # dQ^T's column
                                col = cw * 64 + row0 + dr            # dQ^T's row
                                f = base + ORDER.chunk_float(t, c) + e
                                assert f == base + ORDER.value_float(t, i)
                                acc[f] = ((b * padded + query) * HEADS + h) * D + col
                                writes[f] += 1
    return acc, writes, padded


def test_the_transposed_order_walks_every_element():
    """Every value of every thread of every (batch, step, head, consumer)
    lands on its own float, and the host's un-permute (``block_m`` 80)
    reads back, at each dQ element, the value computed for it."""
    acc, writes, padded = _placed_ids(_cfg())
    assert (writes == 1).all()
    got = host.dq_from_acc_order(acc, BATCH, padded, HEADS, D, block_m=80)
    assert np.array_equal(got.reshape(-1), np.arange(acc.size))
    # A fragment value one float off (el's slot and eh's swapped) is found.
    swapped = acc.reshape(-1, 4)[:, [0, 2, 1, 3]].reshape(-1)
    bad = host.dq_from_acc_order(swapped, BATCH, padded, HEADS, D, block_m=80)
    assert not np.array_equal(bad.reshape(-1), np.arange(acc.size))


def emulate(acc, batch, padded, seqlen, heads, head_dim, exchange=conv.pair_exchange):
    """The transposed postprocess on the host, by its own address functions
    and exchange over every tile and thread (values carry their
    accumulator index): the (batch, seqlen, heads, head_dim) output and how
    often each element was written."""
    groups = head_dim // conv.TILE
    tiles_per_batch = padded // ORDER.queries
    tile = np.arange(batch * tiles_per_batch * heads * groups)[:, None]
    t = np.arange(ORDER.threads)[None, :]
    odd = (t // 4) % 2 == 1
    b, mt, h, g = ORDER.tile_coords(tile, tiles_per_batch, heads, groups)
    out = np.zeros(batch * seqlen * heads * head_dim, dtype=acc.dtype)
    writes = np.zeros(out.shape, dtype=np.int64)
    for j in range(ORDER.chunks):
        first = tile * ORDER.tile_floats + ORDER.chunk_float(t, j)
        for el in range(2):
            lo, hi = exchange(first + el, first + 2 + el, odd, np.where, _numpy_bfly)
            q_row, col = conv.write_row_col_t(t, j, el)
            row = mt * ORDER.queries + q_row
            valid = row < seqlen
            e0 = conv.write_element(conv.row_head(b, row, h, seqlen, heads),
                                    g * conv.TILE + col, head_dim)
            for half, src in enumerate((lo, hi)):
                dst = (e0 + half)[valid]
                out[dst] = acc[src[valid]]
                np.add.at(writes, dst, 1)
    return out.reshape(batch, seqlen, heads, head_dim), writes


def _no_exchange(c0, c1, odd, select, bfly):
    return c0, c1


def test_the_postprocess_map_is_the_unpermute():
    """A random accumulator of the ragged shape: the postprocess writes
    every dQ element once, the value the host's un-permute puts there;
    without the pair exchange it does not."""
    padded = -(-SEQLEN // 80) * 80
    rng = np.random.default_rng(2)
    acc = rng.standard_normal(BATCH * padded * HEADS * D).astype(np.float32)
    want = host.dq_from_acc_order(acc, BATCH, padded, HEADS, D, block_m=80)[:, :SEQLEN]
    got, writes = emulate(acc, BATCH, padded, SEQLEN, HEADS, D)
    assert (writes == 1).all()
    assert np.array_equal(got, want)
    bad, _ = emulate(acc, BATCH, padded, SEQLEN, HEADS, D, exchange=_no_exchange)
    assert not np.array_equal(bad, want)


def test_each_warp_store_fills_whole_sectors():
    """At each load a warp reads 512 contiguous bytes; at each store (chunk
    ``j``, slot ``el``) its 32 lanes write 4 queries x 32 contiguous bytes
    of columns, aligned to 32 bytes."""
    for j in range(ORDER.chunks):
        for w in range(4):
            starts = [ORDER.chunk_float(t, j) * 4 for t in range(32 * w, 32 * w + 32)]
            assert starts == list(range(starts[0], starts[0] + 512, 16))
            for el in range(2):
                rows = {}
                for t in range(32 * w, 32 * w + 32):
                    r, c = conv.write_row_col_t(t, j, el)
                    rows.setdefault(r, []).append(c)
                assert len(rows) == 4
                for cols in rows.values():
                    assert sorted(cols) == list(range(16 * w, 16 * w + 16, 2))


@pytest.fixture(scope="module")
def convert_ptx():
    return conv.build(128, block_m=80).to_ptx()


def test_the_postprocess_ptx_and_ptxas(convert_ptx):
    """10 ``ld.global.v4`` a thread, 20 butterfly shuffles, 20 bf16x2
    conversions, 20 4-byte stores; no barrier, no shared memory; ptxas
    spills nothing. Only d 128 has the 80-query step."""
    text = convert_ptx
    assert text.count("ld.global.v4.b32") == 10
    assert text.count("shfl.sync.bfly.b32") == 20
    assert text.count("cvt.rn.bf16x2.f32") == 20
    assert text.count("st.global.b32") == 20
    assert "bar.sync" not in text and ".shared" not in text
    spills = spill_bytes(text)
    if spills is not None:
        assert spills == 0
    with pytest.raises(ValueError, match="block_m"):
        conv.build(64, block_m=80)
    k = conv.build(128, block_m=80)
    m = conv.meta(k)
    assert (m["name"], m["tile"], m["queries"]) == ("attn_bwd_dq_convert_d128_m80", 64, 80)
    assert "queries" not in conv.meta(conv.build(128))
