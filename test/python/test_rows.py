"""Register rows (python/pipeline_mlir/kernel/rows.py) and the two kernels
built on them (examples/row_softmax.py, examples/rmsnorm.py), without a GPU:
the layout's index model against an independent one for many row lengths
(ragged included), the kernels' address immediates and tail guards against
that model, the instructions each op lowers to (through ptxas where it is on
PATH), and misuse refused with a message naming the rule and the fix. The GPU
suite checks the values (test/gpu/test_gpu_rows.py)."""

import math
import os
import re
import shutil
import sys

import pytest

from pipeline_mlir.kernel import (Float32, GlobalPtr, Int32, Kernel, Rows, RowValues, Scalar,
                                  ScopeError, row_threads)
from pipeline_mlir.kernel import rows as rows_mod

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
sys.path.insert(0, EXAMPLES)
import rmsnorm  # noqa: E402
import row_softmax  # noqa: E402
import rows_host  # noqa: E402

ASSEMBLER = "ptxas" if shutil.which("ptxas") else "nvjitlink"
EB = {"bf16": 2, "f16": 2, "f32": 4}
LENGTHS = [1, 7, 8, 100, 128, 200, 256, 1000, 1001, 1024, 2048, 2049, 3000, 4096, 6000,
           8192, 12288, 16384, 32768]


def model_columns(n, dtype, threads):
    """An independent model of the layout: walk the row in 16-byte (or
    narrower, when n is not a multiple) vectors and deal them out to the
    threads in turn. Returns ({thread: [columns in order]}, vec)."""
    vec = 16 // EB[dtype]
    while n % vec:
        vec //= 2
    held = {t: [] for t in range(threads)}
    for v in range(n // vec):
        held[v % threads] += range(v * vec, v * vec + vec)
    return held, vec


# -- the layout model -------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("n", LENGTHS)
def test_layout_matches_the_independent_model(n, dtype):
    threads = row_threads(n, dtype)
    rows = Rows(n, dtype, threads=threads)
    want, vec = model_columns(n, dtype, threads)
    assert rows.vec == vec
    seen = []
    for t in range(threads):
        cols = rows.thread_columns(t)
        assert cols == want[t], (t, cols[:8], want[t][:8])
        seen += cols
        for i in range(rows.count):
            c = rows.column(t, i)
            assert rows.holds(t, i) == (c < n)
            if i % vec == 0:   # each vector starts 16-byte aligned in a row of n elements
                assert (c * EB[dtype]) % (vec * EB[dtype]) == 0
        # chunks below full_chunks are whole for every thread; the tail per tail_threads
        for c in range(rows.chunks):
            inside = rows.holds(t, c * vec)
            assert inside == (not rows.chunk_masked(c) or t < rows.tail_threads)
    assert sorted(seen) == list(range(n))
    assert rows.count <= rows_mod.MAX_VALUES


def test_row_threads_regimes():
    assert [row_threads(n) for n in (128, 1000, 2048)] == [32, 32, 32]   # a warp per row
    assert row_threads(2048, "f32") == 32
    assert row_threads(4096) == 128 and row_threads(8192) == 256
    # about 32 values per thread over at most 512 threads, then up to 64
    assert row_threads(12288) == 512 and row_threads(16384) == 512
    assert row_threads(32768) == 512
    assert row_threads(65536) == 1024 and row_threads(2 * 65536) == 1024   # refused by Rows
    assert row_threads(2049) > 32        # odd: scalar accesses, 65 per lane is too many


def test_widest_vec_keeps_accesses_aligned():
    assert [rows_mod.widest_vec(n, "bf16") for n in (4096, 1000, 1004, 1002, 1001)] == \
        [8, 8, 4, 2, 1]
    assert rows_mod.widest_vec(1000, "f32") == 4 and rows_mod.widest_vec(1002, "f32") == 2


# -- the kernels --------------------------------------------------------------------

def ptx_and_cubin(k):
    k.verify()
    ptx = k.to_ptx()              # the protocol checker runs here too
    k.compile(assembler=ASSEMBLER)
    return ptx


def count(pattern, ptx):
    return len(re.findall(pattern, ptx))


def global_offsets(ptx, op):
    """Immediate offsets of the ``op`` (ld/st) .global vector accesses."""
    offs = set()
    for m in re.finditer(rf"{op}\.global[.\w]*\s+[^\[]*\[(%rd\d+)(?:\+(\d+))?\]", ptx):
        offs.add(int(m.group(2) or 0))
    return offs


@pytest.mark.parametrize("n", [128, 1000, 2048, 4096, 6000, 16384])
def test_softmax_kernel_instructions_and_addresses(n):
    # rows loaded straight into registers (16 KiB rows take a ring by
    # default: test_row_ring.py)
    k = row_softmax.build(n, stages=0)
    rows = k.rows
    ptx = ptx_and_cubin(k)
    assert count(r"ld\.global[.\w]*\.v4", ptx) == rows.chunks       # one 16-byte load per chunk
    assert count(r"st\.global[.\w]*\.v4", ptx) == rows.chunks
    # the chunks' addresses: one base register plus the model's byte offsets
    want = {c * rows.stride * 2 for c in range(rows.chunks)}
    assert global_offsets(ptx, "ld") == want and global_offsets(ptx, "st") == want
    assert count(r"shfl\.sync\.bfly", ptx) == 10                     # max and sum, 5 each
    assert count(r"ex2\.approx", ptx) == rows.count
    assert count(r"cvt\.rn\.bf16x2\.f32", ptx) == rows.count // 2
    assert "%nctaid.x" in ptx                                          # the grid-stride step
    assert count(r"bar\.sync", ptx) == (0 if rows.per_warp else 4)    # 2 per block reduction
    if rows.tail_threads:   # the ragged chunk is guarded by the model's thread count
        assert re.search(rf"setp\.(lt|gt)\.u32\s+%p\d+, %r\d+, ({rows.tail_threads}|"
                         rf"{rows.tail_threads - 1});", ptx)


def test_softmax_scalar_accesses_when_the_row_is_odd():
    k = row_softmax.build(1001)
    assert k.rows.vec == 1
    ptx = ptx_and_cubin(k)
    assert count(r"ld\.global[.\w]*\.v\d", ptx) == 0
    assert count(r"ld\.global\.\w+\s", ptx) == k.rows.chunks
    assert count(r"st\.global\.b16", ptx) == k.rows.chunks


@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_softmax_other_dtypes(dtype):
    k = row_softmax.build(1000, dtype)
    ptx = ptx_and_cubin(k)
    assert count(r"ld\.global[.\w]*\.v4", ptx) == k.rows.chunks
    if dtype == "f16":
        assert "cvt.rn.f16x2.f32" in ptx


@pytest.mark.parametrize("n", [1000, 2048, 8192])
def test_rmsnorm_kernel_instructions(n):
    k = rmsnorm.build(n, stages=0)
    rows = k.rows
    ptx = ptx_and_cubin(k)
    # the weight once, before the row loop, and the row: two loads per chunk
    assert count(r"ld\.global[.\w]*\.v4", ptx) == 2 * rows.chunks
    assert count(r"st\.global[.\w]*\.v4", ptx) == rows.chunks
    assert count(r"shfl\.sync\.bfly", ptx) == 5
    assert count(r"rsqrt\.approx", ptx) == 1
    assert count(r"bar\.sync", ptx) == (0 if rows.per_warp else 2)
    assert k.smem_bytes == (0 if rows.per_warp else 4 * rows.threads // 32)


def test_rmsnorm_keeps_the_weight_packed_across_the_row_loop():
    """The weight stays bf16 in registers through the loop: its conversion
    to f32 sits inside the loop (after the loop's branch), not hoisted."""
    ptx = rmsnorm.build(2048).to_ptx()
    body = ptx.split("$L__BB0_2:")[1] if "$L__BB0_2:" in ptx else ptx
    assert count(r"mov\.b32", body) >= 32       # one asm move per packed register, per row


def test_meta_of_records_the_launch_facts():
    k = row_softmax.build(4096)
    assert rows_host.meta_of(k.rows, k) == {"n": 4096, "dtype": "bf16", "threads": 128,
                                            "rows_per_cta": 1, "block": 128, "stages": 0,
                                            "parts": 1}
    k = rmsnorm.build(1000)
    assert rows_host.meta_of(k.rows, k)["rows_per_cta"] == 4


# -- every RowValues op ------------------------------------------------------------

def test_row_values_ops_lower_to_their_instructions():
    rows = Rows(1000, "bf16")
    k = Kernel("row_ops", block_dim=64,
               params={"x": GlobalPtr(), "w": GlobalPtr(), "y": GlobalPtr(), "m": Int32(),
                       "s": Float32()})
    with k:
        x_ptr, w_ptr, y_ptr, m, s = k.args
        w = rows.load_columns(w_ptr)
        for row in rows.grid_stride(k, m):
            x = rows.load(x_ptr, row)
            y = (x + 1.0) * w - s                       # columns and scalars broadcast
            y = y / (x.abs() + 2.0)
            y = y.maximum(x).minimum(s * 4.0).fma(0.5, x)
            y = y.where(lambda col: col < 999, 0.0)     # by column
            y = y.where(row < 10, x)                     # by row
            y = (y * x.min()).exp() + x.reciprocal() + (x * x + 1.0).rsqrt()
            y = y * (1.0 / (y.sum() + x.max()))
            rows.store(y, y_ptr, row)
    ptx = ptx_and_cubin(k)
    for ins in ("max.f32", "min.f32", "div.rn.f32", "rcp.approx.ftz.f32",
                "rsqrt.approx.ftz.f32", "ex2.approx.ftz.f32", "fma.rn.f32", "selp.f32",
                "shfl.sync.bfly.b32", "%nctaid.x"):
        assert ins in ptx, ins
    assert count(r"shfl\.sync\.bfly", ptx) == 15          # min, sum, max


def test_block_reduction_through_shared_memory():
    rows = Rows(4096, "f32", threads=256)
    k = Kernel("block_sum", block_dim=256, params={"x": GlobalPtr(), "y": GlobalPtr()})
    with k:
        x_ptr, y_ptr = k.args
        x = rows.load(x_ptr, k.block_idx())
        rows.store(x * x.sum() + x.max(), y_ptr, k.block_idx())
    ptx = ptx_and_cubin(k)
    assert count(r"bar\.sync", ptx) == 4
    assert count(r"st\.shared\.[bf]32", ptx) == 2              # lane 0 of each warp, per reduction
    assert count(r"ld\.shared\.v4\.[bf]32", ptx) == 2 * 2       # 8 warps: two 16-byte loads each
    assert k.smem_bytes == 32


def test_row_values_are_carried_by_loops():
    rows = Rows(512, "bf16")
    k = Kernel("row_accumulate", block_dim=32,
               params={"x": GlobalPtr(), "y": GlobalPtr(), "m": Int32()})
    with k:
        x_ptr, y_ptr, m = k.args
        acc = rows.full(0.0)
        for row, (acc,) in k.range(m, carry=[acc]):
            acc += rows.load(x_ptr, row)
        rows.store(acc, y_ptr, 0)
    ptx_and_cubin(k)

    k = Kernel("row_uncarried", block_dim=32,
               params={"x": GlobalPtr(), "y": GlobalPtr(), "m": Int32()})
    with k:
        x_ptr, y_ptr, m = k.args
        acc = rows.full(0.0)
        with pytest.raises(ScopeError, match="carry=\\[acc\\]"):
            for row in k.range(m):
                acc += rows.load(x_ptr, row)


def test_grid_dim_is_nctaid():
    k = Kernel("grid", block_dim=32, params={"out": GlobalPtr()})
    with k:
        from pipeline_mlir.kernel import store
        store(k.grid_dim() + k.grid_dim("y"), k.args.out, k.thread_idx())
    ptx = ptx_and_cubin(k)
    assert "%nctaid.x" in ptx and "%nctaid.y" in ptx


# -- misuse -------------------------------------------------------------------------

def test_bad_layouts_name_the_rule_and_the_fix():
    with pytest.raises(ValueError, match="power of two dividing n=1000"):
        Rows(1000, vec=16)
    with pytest.raises(ValueError, match="leave it out for the widest, 8"):
        Rows(1000, vec=3)
    with pytest.raises(ValueError, match="multiple of 32 in 32..1024"):
        Rows(1000, threads=48)
    with pytest.raises(ValueError, match=r"row_threads\(8192, 'bf16'\) = 256"):
        Rows(8192)                            # a warp cannot hold 8192 columns
    with pytest.raises(ValueError, match="dtype must be one of"):
        Rows(100, "e4m3")


def test_a_cta_row_needs_the_whole_cta():
    rows = Rows(4096, threads=256)
    k = Kernel("wrong_block", block_dim=128, params={"x": GlobalPtr()})
    with k:
        with pytest.raises(ValueError, match="block_dim=256"):
            rows.load(k.args.x, 0)


def test_rows_of_different_layouts_do_not_mix():
    a, b = Rows(1000), Rows(1024)
    k = Kernel("mixed", block_dim=32, params={"x": GlobalPtr(), "y": GlobalPtr()})
    with k:
        x, y = a.load(k.args.x, 0), b.load(k.args.y, 0)
        with pytest.raises(ValueError, match="layouts differ"):
            x + y
        with pytest.raises(TypeError, match="Rows.store: expected RowValues of Rows\\(n=1024"):
            b.store(x, k.args.y, 0)
        with pytest.raises(TypeError, match="expected an f32 value, got i32"):
            x * Scalar(3)


def test_row_code_outside_a_kernel_says_where_it_belongs():
    with pytest.raises(RuntimeError, match="inside `with k:`"):
        Rows(128).load(None, 0)


@pytest.mark.parametrize("launcher", [row_softmax.RowSoftmax, rmsnorm.RmsNorm])
def test_launcher_of_raw_bytes_asks_for_the_launch_metadata(launcher):
    with pytest.raises(TypeError, match="needs its launch metadata"):
        launcher(b"\0" * 16, {"n": 128, "dtype": "bf16"})
