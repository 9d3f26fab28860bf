"""The attention backward's dQ postprocess for ``dq_acc_order``: the flat
fp32 accumulator, in the wgmma fragments' own order per 64 x 64 tile
(``kernels/attention_bwd/dq_acc_order.py``), un-permuted and rounded to the
(batch, seqlen, heads, head_dim) bf16 dQ in one pass.

One CTA of 128 threads per tile (batch entry, 64-row query tile, head,
64-column group, in the accumulator's order of tiles). The order is
``ops/attention_bwd_acc_order.ACC_ORDER`` (the main kernel's stores and
the host's un-permute read it too).
Thread ``t = 32 w + 4 q + p`` reads its 8 chunks of 16 bytes (chunk ``c``
at float ``(c 128 + t) 4`` of the tile: at each load the warp reads 512
contiguous bytes). Chunk ``c = 2 kk + eh`` holds row ``16 w + 8 eh + q``,
columns ``16 kk + (2p, 2p + 1, 2p + 8, 2p + 9)``; the thread rounds each
column pair to a bf16x2 word. For a row half ``eh`` and 32 columns
``32 j ..`` (chunks ``kk = 2j, 2j + 1``) the four lanes of a quad (same
``q``) hold 16 words: lane ``p`` word ``m`` is column pair ``4 m + p``.
A 4 x 4 transpose within the quad (two butterfly stages, ``shfl.sync.bfly``
with masks 1 and 2, each exchanging the words whose slot bit differs from
the lane bit) leaves lane ``p`` pairs ``4 p .. 4 p + 3``: 8 contiguous bf16
columns ``32 j + 8 p ..``, one 16-byte store (a quad's four stores are a
row's 64 contiguous bytes). Rows past ``seqlen`` (the last query tile's
padding) are not stored: the output is dQ itself, ragged or not.

No scaling: the main kernel adds dQ * softmax_scale into the accumulator,
and the plain conversion (``acc.to(bfloat16)``) rounds it as it is; the
rounding here is the same (``cvt.rn.bf16x2.f32``, round to nearest even).
No shared memory and no barrier.

With 80-query steps (``block_m`` 80, d 128) the accumulator is in the
transposed order (``ACC_ORDER.for_block_m(80)``: tiles of 80 queries x 64
columns): ``build(128, block_m=80)``. Thread ``t`` reads its 10 chunks;
chunk ``j`` holds queries ``8 j + 2 p + el``, columns ``16 w + 8 eh + q``
(``el``, ``eh`` its slots). Lanes ``q`` and ``q ^ 1`` (``shfl.sync.bfly``
mask 4) trade one value per query (``pair_exchange``): the even lane keeps
its ``eh`` 0 and takes its partner's (columns ``q, q + 1``), the odd one
keeps its ``eh`` 1 and takes its partner's (``q + 7, q + 8``), so each
rounds a column pair to one bf16x2 word, a 4-byte store
(``write_row_col_t``): a warp's store is 4 queries x 32 contiguous bytes,
whole 32-byte sectors.

The address arithmetic (``read_float``, ``tile_coords``, ``write_row_col``,
``row_head``, ``write_element``)
and the exchange (``quad_transpose``) are plain Python over ``+ * // %``
and two callables, so the tests run them on integers and numpy arrays.
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm, nvvm, vector

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, Scalar
from pipeline_mlir.kernel.values import f32, i32, to_value
from pipeline_mlir.ops.attention_bwd_acc_order import ACC_ORDER, TRANSPOSED_BLOCK_M

TILE = ACC_ORDER.tile                       # rows and columns of a tile
TILE_FLOATS = ACC_ORDER.tile_floats
THREADS = ACC_ORDER.threads
CHUNKS = ACC_ORDER.chunks                   # 8 chunks of 4 floats a thread
CHUNK_BYTES = ACC_ORDER.chunk_floats * 4
HEAD_DIMS = (64, 128)
_FULL_MASK = -1


def read_float(tile, t, c):
    """Float index in the flat accumulator of thread ``t``'s chunk ``c`` of
    tile ``tile``."""
    return tile * TILE_FLOATS + ACC_ORDER.chunk_float(t, c)


# (batch entry, query tile, head, column group) of a tile.
tile_coords = ACC_ORDER.tile_coords


def write_row_col(t, eh, j):
    """(row within the tile, first column within the tile) of thread ``t``'s
    16-byte store for row half ``eh`` and 32-column block ``j``."""
    w, lane = t // 32, t % 32
    return 16 * w + 8 * eh + lane // 4, 32 * j + 8 * (lane % 4)


def write_row_col_t(t, j, el):
    """Transposed order (80-query tiles): (query within the tile, first of
    the two columns within the tile) of thread ``t``'s 4-byte store for
    chunk ``j``, query slot ``el``."""
    w, lane = t // 32, t % 32
    q, p = lane // 4, lane % 4
    odd = q % 2
    return 8 * j + 2 * p + el, 16 * w + (q - odd) + 8 * odd


def pair_exchange(c0, c1, odd, select, bfly):
    """Transposed order: (low, high) values of the lane's column pair from
    its ``eh`` 0 and 1 values ``c0``, ``c1`` of one query, ``odd`` whether
    ``q`` is odd (``select(cond, a, b)``, ``bfly(v, mask)``: lane ``lane ^
    mask``'s value; mask 4 is ``q ^ 1``)."""
    got = bfly(select(odd, c0, c1), 4)
    return select(odd, got, c0), select(odd, c1, got)


def row_head(b, row, h, seqlen, heads):
    """Index of (batch entry, row, head) in the (batch, seqlen, heads) rows of dQ."""
    return (b * seqlen + row) * heads + h


def write_element(rh, col, head_dim):
    """Element index in the (batch, seqlen, heads, head_dim) dQ of column
    ``col`` of row-head ``rh`` (``row_head``)."""
    return rh * head_dim + col


def quad_transpose(words, p, select, bfly):
    """The 4 x 4 transpose of ``words`` (4 values a lane) among the lanes of
    a quad, ``p`` the lane's position in it: word ``m`` of lane ``s`` ends
    as word ``s`` of lane ``m``. ``select(cond, a, b)``; ``bfly(v, mask)``
    the value of lane ``lane ^ mask``. Two stages: stage ``b`` swaps bit
    ``b`` of the lane with bit ``b`` of the word (a lane whose bit is 0
    keeps its words with the bit 0 and sends those with the bit 1)."""
    words = list(words)
    for b in (0, 1):
        high = (p // (1 << b)) % 2 == 1
        for m in range(4):
            if m & (1 << b):
                continue
            m2 = m | (1 << b)
            got = bfly(select(high, words[m], words[m2]), 1 << b)
            words[m], words[m2] = select(high, got, words[m]), select(high, words[m2], got)
    return words


def _bfly(v, mask):
    return nvvm.shfl_sync(v.type, to_value(_FULL_MASK, i32()), v, to_value(mask, i32()),
                          to_value(0x1F, i32()), nvvm.ShflKind.bfly)


def _select(cond, a, b):
    return arith.select(cond.ir_value, a, b)


def _bf16x2(lo, hi):
    """Two f32 values rounded to one bf16x2 word, ``lo`` in the low half
    (``cvt.rn.bf16x2.f32``)."""
    pair = vector.from_elements(ir.VectorType.get([2], f32()), [lo, hi])
    half = arith.truncf(ir.VectorType.get([2], ir.BF16Type.get()), pair)
    return llvm.bitcast(i32(), half)


def _gep(base, byte_offset):
    """``base + byte_offset`` (an i64 Scalar offset)."""
    return llvm.getelementptr(base.type, base, [byte_offset.ir_value], [-2147483648],
                              ir.IntegerType.get_signless(8), 0)


def build(head_dim, chip="sm_90a", block_m=64):
    """The postprocess for ``head_dim`` (64 or 128): parameters ``(acc, dq,
    tiles_per_batch, heads, seqlen)``, grid ``batch * tiles_per_batch *
    heads * head_dim / 64`` CTAs of 128 threads (``tiles_per_batch``: the
    padded query length / 64, or / 80 with ``block_m`` 80, d 128 only:
    the transposed order)."""
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"attention_bwd_dq_convert: head_dim must be one of {HEAD_DIMS}, "
                         f"got {head_dim}")
    mt = TRANSPOSED_BLOCK_M
    if block_m not in (TILE, mt) or block_m == mt and head_dim != 128:
        raise ValueError(f"attention_bwd_dq_convert: block_m {TILE}, or {mt} at head_dim 128, "
                         f"got {block_m} at {head_dim}")
    groups = head_dim // TILE
    name = f"attn_bwd_dq_convert_d{head_dim}" + (f"_m{mt}" if block_m == mt else "")
    k = Kernel(name, chip=chip, block_dim=THREADS,
               params={"acc": GlobalPtr(), "dq": GlobalPtr(), "tiles_per_batch": Int32(),
                       "heads": Int32(), "seqlen": Int32()})
    if block_m == mt:
        _build_transposed(k, head_dim, groups)
        k.head_dim, k.queries = head_dim, block_m
        return k
    k.queries = TILE
    with k:
        quad_t = ir.VectorType.get([4], f32())
        words_t = ir.VectorType.get([4], i32())
        acc, dq, tiles_per_batch, heads, seqlen = k.args
        acc_v, dq_v = to_value(acc), to_value(dq)
        tile = k.block_idx()
        t = k.thread_idx()
        p = t % 4
        b, mt, h, g = tile_coords(tile, tiles_per_batch, heads, groups)
        src = _gep(acc_v, tile.to(64) * (TILE_FLOATS * 4) + t.to(64) * CHUNK_BYTES)
        chunks = []
        for c in range(CHUNKS):
            ptr = llvm.getelementptr(src.type, src, [], [ACC_ORDER.chunk_float(0, c) * 4],
                                     ir.IntegerType.get_signless(8), 0)
            v = llvm.load(quad_t, ptr, alignment=16)
            chunks.append([llvm.extractelement(v, to_value(Scalar(e))) for e in range(4)])
        # All lanes shuffle (full mask); only the stores are guarded.
        for eh in range(2):
            row_in_tile, _ = write_row_col(t, eh, 0)
            row = mt * TILE + row_in_tile
            vecs = []
            for j in range(2):
                words = []
                for kk in (2 * j, 2 * j + 1):
                    x = chunks[2 * kk + eh]
                    words += [_bf16x2(x[0], x[1]), _bf16x2(x[2], x[3])]
                words = quad_transpose(words, p, _select, _bfly)
                vec = llvm.mlir_undef(words_t)
                for e, w in enumerate(words):
                    vec = llvm.insertelement(vec, w, to_value(Scalar(e)))
                vecs.append(vec)
            with k.if_(row < seqlen):
                rh = row_head(b, row, h, seqlen, heads)
                base = _gep(dq_v, write_element(rh.to(64), (g * TILE + p * 8).to(64),
                                                head_dim) * 2)
                for j, vec in enumerate(vecs):
                    ptr = llvm.getelementptr(base.type, base, [], [j * 32 * 2],
                                             ir.IntegerType.get_signless(8), 0)
                    llvm.store(vec, ptr, alignment=16)
    k.head_dim = head_dim
    return k


def meta(k):
    """What the host launcher needs of the built postprocess ``k``."""
    return {"signature": [p.kind for _, p in k.params],
            "params": [name for name, _ in k.params], "name": k.name,
            "threads": THREADS, "smem": k.smem_bytes, "head_dim": k.head_dim,
            "tile": TILE, **({"queries": k.queries} if k.queries != TILE else {})}


def _build_transposed(k, head_dim, groups):
    """The body for the transposed order (module doc)."""
    order = ACC_ORDER.for_block_m(TRANSPOSED_BLOCK_M)
    with k:
        quad_t = ir.VectorType.get([4], f32())
        acc, dq, tiles_per_batch, heads, seqlen = k.args
        acc_v, dq_v = to_value(acc), to_value(dq)
        tile = k.block_idx()
        t = k.thread_idx()
        odd = ((t // 4) % 2) == 1
        b, mt, h, g = order.tile_coords(tile, tiles_per_batch, heads, groups)
        src = _gep(acc_v, tile.to(64) * (order.tile_floats * 4) + t.to(64) * CHUNK_BYTES)
        words = []
        for j in range(order.chunks):
            ptr = llvm.getelementptr(src.type, src, [], [order.chunk_float(0, j) * 4],
                                     ir.IntegerType.get_signless(8), 0)
            v = llvm.load(quad_t, ptr, alignment=16)
            x = [llvm.extractelement(v, to_value(Scalar(e))) for e in range(4)]
            for el in range(2):              # slot 2 eh + el; all lanes shuffle
                lo, hi = pair_exchange(x[el], x[2 + el], odd, _select, _bfly)
                words.append((j, el, _bf16x2(lo, hi)))
        q_row, col = write_row_col_t(t, 0, 0)
        row0 = mt * order.queries + q_row
        base = _gep(dq_v, write_element(row_head(b, row0, h, seqlen, heads).to(64),
                                        (g * TILE + col).to(64), head_dim) * 2)
        for j, el, word in words:
            dr = 8 * j + el                  # query offset from row0
            with k.if_(row0 + dr < seqlen):
                # dr rows further: dr * heads * head_dim elements.
                ptr = _gep(base, (heads * (dr * head_dim * 2)).to(64)) if dr else base
                llvm.store(word, ptr, alignment=4)
