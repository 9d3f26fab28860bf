"""Register fragments (python/pipeline_mlir/kernel/fragment.py), without a GPU:
the layout helpers against the PTX ISA's accumulator layout
(test/gpu/ptx_layouts.py), each Fragment / RowVector / OperandA op lowered to
the instruction it stands for (through ptxas where it is on PATH), the
register-A wgmma's operands, and bad inputs refused with a message that
names the rule. The GPU suite checks the values (test_gpu.py -k fragment)."""

import math
import os
import re
import shutil
import sys

import numpy as np
import pytest

from pipeline_mlir.kernel import Float32, GlobalPtr, Int32, Kernel, Scalar, load, store, wgmma
from pipeline_mlir.kernel import fragment
from pipeline_mlir.kernel.fragment import ColVector, Fragment, OperandA, RowVector
from pipeline_mlir.kernel.values import f32
from pipeline_mlir.layout import OperandLayout

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "gpu")))
import ptx_layouts  # noqa: E402

ASSEMBLER = "ptxas" if shutil.which("ptxas") else "nvjitlink"


def kernel(name="frag"):
    return Kernel(name, block_dim=128,
                  params={"out": GlobalPtr(), "inp": GlobalPtr(), "s": Float32()})


def loaded(k, inp, n=64):
    """A Fragment of n / 2 distinct values (loaded), so that LLVM cannot
    fold the per-value ops into one."""
    base = k.thread_idx() * 256
    return Fragment(n, values=[load(inp, f32(), base + i) for i in range(n // 2)])


def ptx_of(build, n=64):
    """PTX of a kernel whose body ``build(x, s)`` returns a Fragment or
    RowVector (stored, so that nothing is dead), assembled too."""
    k = kernel()
    with k:
        out, inp, s = k.args
        res = build(loaded(k, inp, n), s)
        for i, v in enumerate(res.values):
            store(v, out, k.thread_idx() * 256 + i)
    k.verify()
    ptx = k.to_ptx()
    k.compile(assembler=ASSEMBLER)
    return ptx


# -- layout ---------------------------------------------------------------------

@pytest.mark.parametrize("n", [8, 24, 64, 256])
def test_layout_helpers_follow_the_ptx_isa(n):
    """thread_origin + element_offset of every value of every thread is the
    PTX ISA's element, and every element of the tile is held exactly once."""
    seen = set()
    for T in range(128):
        warp, lane = T // 32, T % 32
        r0, c0 = Fragment.thread_origin(warp, lane)
        for i in range(n // 2):
            dr, dc = Fragment.element_offset(i)
            assert (r0 + dr, c0 + dc) == ptx_layouts.accumulator_element(T, i), (T, i)
            assert ptx_layouts.owner(r0 + dr, c0 + dc) == T
            seen.add((r0 + dr, c0 + dc))
    assert seen == {(r, c) for r in range(64) for c in range(n)}


def test_element_offset_values():
    # the four values of one 8-column block: (0,0) (0,1) (8,0) (8,1), then +8 columns
    assert [Fragment.element_offset(i) for i in range(6)] == [
        (0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9)]
    assert Fragment.thread_origin(3, 31) == (16 * 3 + 7, 6)


def test_thread_origin_of_runtime_scalars():
    k = kernel()
    with k:
        r, c = Fragment.thread_origin(k.warp_idx() % 4, k.lane_idx())
        assert isinstance(r, Scalar) and isinstance(c, Scalar)
        assert str(r.type) == "i32"


# -- ops and their instructions ------------------------------------------------------

@pytest.mark.parametrize("build, instruction, per_value", [
    (lambda x, s: x.exp2(), "ex2.approx.ftz.f32", 1),
    (lambda x, s: x.reciprocal(), "rcp.approx.ftz.f32", 1),
    (lambda x, s: x.maximum(s), "max.f32", 1),
    (lambda x, s: x.minimum(s), "min.f32", 1),
    (lambda x, s: x.fma(s, x), "fma.rn.f32", 1),
    (lambda x, s: x * s, "mul.rn.f32", 1),
    (lambda x, s: x + s, "add.rn.f32", 1),
    (lambda x, s: x - s, "sub.rn.f32", 1),
    (lambda x, s: x / s, "div.rn.f32", 1),
    (lambda x, s: -x, "neg.f32", 1),
])
def test_elementwise_op_is_one_instruction_per_value(build, instruction, per_value):
    ptx = ptx_of(build)
    assert len(re.findall(re.escape(instruction) + r"\s", ptx)) == 32 * per_value


def test_row_max_and_sum_reduce_in_the_thread_then_across_the_quad():
    ptx = ptx_of(lambda x, s: x.row_max())
    masks = re.findall(r"shfl\.sync\.bfly\.b32\s+%r\d+, %r\d+, (\d+), 31, -1;", ptx)
    assert sorted(masks) == ["1", "1", "2", "2"]        # two rows, xor 1 then xor 2
    # 16 values per row and thread: 15 maxima, then one per shuffle
    assert len(re.findall(r"max\.f32\s", ptx)) == 2 * (15 + 2)
    ptx = ptx_of(lambda x, s: x.row_sum_partial())
    assert "shfl.sync" not in ptx


def test_where_selects_and_skips_python_bools():
    def build(x, s):
        return x.where(lambda r, c: Scalar(r) < s.to("i32") if r else True, 0.0)

    ptx = ptx_of(build)
    # the keep of row offset 0 is Python's True: no select; the 16 values of
    # row offset 8 are one select each
    assert len(re.findall(r"selp\.(?:f|b)32\s", ptx)) == 16


@pytest.mark.parametrize("dtype, instruction", [
    ("bf16", "cvt.rn.bf16x2.f32"), ("f16", "cvt.rn.f16x2.f32"),
    ("e4m3", "cvt.rn.satfinite.e4m3x2.f32"), ("e5m2", "cvt.rn.satfinite.e5m2x2.f32")])
def test_to_packed_converts_pairs(dtype, instruction):
    k = kernel()
    with k:
        out, inp, s = k.args
        x = loaded(k, inp)
        packed = x.to_packed(dtype)
        assert len(packed) == 16
        assert {str(p.type) for p in packed} == {"i32" if dtype in ("bf16", "f16") else "i16"}
        for i, p in enumerate(packed):
            store(p, out, i)
    ptx = k.to_ptx()
    k.compile(assembler=ASSEMBLER)
    assert len(re.findall(re.escape(instruction) + r"\s", ptx)) == 16


def test_to_operand_a_slices():
    k = kernel()
    with k:
        x = Fragment.full(64, 1.0)
        a16, a8 = x.to_operand_a("bf16"), x.to_operand_a("e4m3")
        assert (len(a16), a16.k_per_slice, len(a8), a8.k_per_slice) == (4, 16, 2, 32)
        assert all(len(a.slice(j)) == 4 for a in (a16, a8) for j in range(len(a)))
        assert {str(r.type) for a in (a16, a8) for sl in a.slices for r in sl} == {"i32"}


def test_rowvector_ops_build_and_lower():
    def build(x, s):
        m = x.row_max()
        r = ((m + s) * 2.0 - m / s).max(m.exp2()).min(s).reciprocal()
        r = -r.where([s > 0.0, s < 0.0], m)
        r += RowVector.full(1.0)
        return r.log2()

    ptx = ptx_of(build)
    for text in ("lg2.approx.ftz.f32", "ex2.approx.ftz.f32", "rcp.approx.ftz.f32"):
        assert text in ptx


def test_fragment_struct_round_trip_folds_away():
    """A Fragment passed through its struct form (what wgmma and loops use)
    keeps its values: LLVM folds the packing, no extra instruction."""
    plain = ptx_of(lambda x, s: x * s)
    packed = ptx_of(lambda x, s: Fragment(64, struct=(x * s).ir_value))
    count = (lambda p: len(re.findall(r"mul\.rn\.f32\s", p)))
    assert count(plain) == count(packed)


# -- register-A wgmma ------------------------------------------------------------

def test_mma_rs_is_one_register_a_wgmma_per_slice():
    b = OperandLayout("bf16", "MN", 128, 64, 64)
    k = kernel()
    with k:
        out, inp, s = k.args
        sb = k.smem_alloc(b.bytes, align=b.alignment)
        a = Fragment.full(64, s).to_operand_a("bf16")
        mma = wgmma.WarpgroupMma(64, "bf16", b)
        acc = mma.accumulator()
        desc = wgmma.smem_matrix_descriptor(sb, b)
        wgmma.fence()
        for j in range(len(a)):
            mma.mma_rs(acc, a.slice(j), wgmma.k_slice_descriptor(desc, b, j))
        wgmma.commit_group()
        wgmma.wait_group(0)
        store(acc.value(0), out, 0)
    ptx = k.to_ptx()
    k.compile(assembler=ASSEMBLER)
    found = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n64k16\.f32\.bf16\.bf16 "
                       r"\{[^}]*\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, p, 1, 1, 1;", ptx)
    assert len(found) == 4


def _mma_setup(k, n=64, dtype="bf16"):
    b = OperandLayout.one_box(dtype, "K", 128, n)
    sb = k.smem_alloc(b.bytes, align=b.alignment)
    return wgmma.WarpgroupMma(n, dtype, b), wgmma.smem_matrix_descriptor(sb, b)


def test_mma_rs_refuses_a_whole_operand_a():
    k = kernel()
    with k:
        mma, desc = _mma_setup(k)
        a = Fragment.full(64, 1.0).to_operand_a("bf16")
        with pytest.raises(TypeError, match=r"mma_rs takes one k-slice: a\.slice\(j\), not "
                                            r"the whole OperandA"):
            mma.mma_rs(mma.accumulator(), a, desc)
        with pytest.raises(ValueError, match="a k-slice of A is 4 i32 registers, got 3"):
            mma.mma_rs(mma.accumulator(), a.slice(0)[:3], desc)


def test_mma_rs_refuses_a_wrong_accumulator():
    k = kernel()
    with k:
        mma, desc = _mma_setup(k)
        a = Fragment.full(64, 1.0).to_operand_a("bf16")
        with pytest.raises(TypeError, match="wgmma m64n64: the accumulator must be a Fragment "
                                            "of n=64"):
            mma.mma_rs(Fragment(32), a.slice(0), desc)


def _e4m3_mma_rs_ptx(in_place):
    k = kernel()
    with k:
        out, inp, s = k.args
        mma, desc = _mma_setup(k, dtype="e4m3")
        a = Fragment.full(64, s).to_operand_a("e4m3", in_place=in_place)
        acc = mma.accumulator()
        wgmma.fence()
        for j in range(len(a)):
            mma.mma_rs(acc, a.slice(j), desc)
        wgmma.commit_group()
        wgmma.wait_group(0)
        store(acc.value(0), out, 0)
    ptx = k.to_ptx()
    k.compile(assembler=ASSEMBLER)
    return ptx


def test_mma_rs_on_8_bit_types_is_k32_without_trans_b():
    """e4m3 from registers: one m64nNk32 per 32-column slice, B K-major, so
    the PTX form ends at the two scale immediates (no imm-trans-b). Packed
    in place the operand costs no shuffle; the quad-shuffled packing does."""
    shuffles = {}
    for in_place in (False, True):
        ptx = _e4m3_mma_rs_ptx(in_place)
        found = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n64k32\.f32\.e4m3\.e4m3 "
                           r"\{[^}]*\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, p, 1, 1;",
                           ptx)
        assert len(found) == 2
        shuffles[in_place] = ptx.count("shfl.sync.idx")
    # The one left in place is the kernel's own (the warp index broadcast).
    assert shuffles[True] <= 1 < shuffles[False]


def test_in_place_8_bit_operand_is_refused_for_16_bit_types():
    k = kernel()
    with k:
        with pytest.raises(ValueError, match="in_place is for 8-bit types"):
            Fragment.full(64, 1.0).to_operand_a("bf16", in_place=True)


def test_mma_accumulate_false_sets_scale_d_zero():
    k = kernel()
    with k:
        out, inp, s = k.args
        mma, desc = _mma_setup(k)
        acc = Fragment.undef(64)
        wgmma.fence()
        mma.mma(acc, desc, desc, accumulate=False)
        mma.mma(acc, desc, desc)
        wgmma.commit_group()
        wgmma.wait_group(0)
        store(acc.value(0), out, 0)
    text = str(k.module)
    assert text.count("D[<f32>, <zero>]") == 1 and text.count("D[<f32>, <one>]") == 1


# -- bad inputs --------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 4, 12, 264, 64.0, "64"])
def test_fragment_refuses_a_bad_n(n):
    with kernel():
        with pytest.raises(ValueError, match=r"Fragment: n must be a multiple of 8 in "
                                             rf"8\.\.256, got {re.escape(repr(n))}"):
            Fragment(n)


def test_fragment_refuses_a_wrong_number_of_values():
    with kernel():
        with pytest.raises(ValueError, match="Fragment of n=16: 8 values per thread, got 3"):
            Fragment(16, values=Fragment.full(8, 1.0).values[:3])


def test_mismatched_shapes_are_refused():
    with kernel():
        a, b = Fragment.full(64, 1.0), Fragment.full(32, 1.0)
        for op in (lambda: a + b, lambda: a.maximum(b), lambda: a.fma(b, a),
                   lambda: a.where(lambda r, c: True, b), lambda: a.set(b)):
            with pytest.raises(ValueError, match="fragments of different shapes: 64x64 and "
                                                 "64x32"):
                op()


def test_non_f32_operands_are_refused():
    with kernel():
        a = Fragment.full(64, 1.0)
        with pytest.raises(TypeError, match="expected an f32 value, got i32"):
            a * Scalar(3)
        with pytest.raises(TypeError, match="RowVector: expected an f32 value, got i32"):
            RowVector([Scalar(1), Scalar(2)])
        with pytest.raises(TypeError, match="scale_rows: expected a RowVector, got Fragment"):
            a.scale_rows(a)
        with pytest.raises(ValueError, match="RowVector: 2 values per thread, got 3"):
            RowVector([1.0, 2.0, 3.0])
        with pytest.raises(TypeError, match="Fragment value: expected an f32 value, got i32"):
            Fragment(8, values=[Scalar(1)] * 4)


@pytest.mark.parametrize("dtype", ["fp8", "bfloat16", "f32", "e4m3fn", None])
def test_conversions_refuse_unknown_dtype_names(dtype):
    with kernel():
        a = Fragment.full(64, 1.0)
        if dtype == "f32":
            with pytest.raises(ValueError, match="to_operand_a: dtype must be 16- or 8-bit, "
                                                 "got 'f32'"):
                a.to_operand_a(dtype)
            with pytest.raises(ValueError, match="pack: f32 is not a 16- or 8-bit type"):
                a.to_packed(dtype)
            return
        want = re.escape(f"dtype must be one of ['bf16', 'e4m3', 'e5m2', 'f16', 'f32'], got "
                         f"{dtype!r}")
        with pytest.raises(ValueError, match="to_operand_a: " + want):
            a.to_operand_a(dtype)
        with pytest.raises(ValueError, match="pack: " + want):
            a.to_packed(dtype)


def test_operand_a_refuses_widths_that_are_not_whole_slices():
    with kernel():
        with pytest.raises(ValueError, match=r"to_operand_a: n \(24\) must be a multiple of 16"):
            Fragment.full(24, 1.0).to_operand_a("bf16")
        with pytest.raises(ValueError, match=r"to_operand_a: n \(48\) must be a multiple of 32 "
                                             "for 8-bit types"):
            Fragment.full(48, 1.0).to_operand_a("e5m2")


def test_operand_a_set_refuses_another_shape():
    with kernel():
        a = Fragment.full(64, 1.0).to_operand_a("bf16")
        for other in (Fragment.full(32, 1.0).to_operand_a("bf16"),
                      Fragment.full(64, 1.0).to_operand_a("f16"), Fragment.full(64, 1.0)):
            with pytest.raises(TypeError, match="OperandA.set: expected an OperandA of the "
                                                "same dtype and number of k-slices"):
                a.set(other)
        assert isinstance(a, OperandA)


def test_scalar_times_fragment_defers_to_the_fragment():
    """``s * acc`` and ``row_max - s_tile`` (the Scalar or RowVector on the
    left) broadcast like ``acc * s``; a Scalar cannot be updated in place
    with a Fragment."""
    k = kernel()
    with k:
        out, inp, s = k.args
        x = Fragment(8, values=[s * float(i + 1) for i in range(4)])
        assert isinstance(s * x, Fragment) and isinstance(s - x, Fragment)
        m = x.row_max()
        assert isinstance(m - x, Fragment) and isinstance(m * x, Fragment)
        with pytest.raises(TypeError, match="a Scalar cannot hold a Fragment"):
            t = Scalar(1.0)
            t += x
        with pytest.raises(TypeError, match="RowVector.set: expected a RowVector, got "
                                            "Fragment"):
            m += x


# -- math beyond the instructions: the formulas on numpy, the instructions in PTX -------

class NumpyOps:
    """fragment.IrOps's operations on numpy float32, each rounded once (the
    formulas' own error; the GPU's ex2.approx / rcp.approx add ~2 ulp)."""
    f = np.float32
    const = staticmethod(lambda c: np.float32(c))
    add = staticmethod(lambda a, b: np.float32(a + b))
    sub = staticmethod(lambda a, b: np.float32(a - b))
    mul = staticmethod(lambda a, b: np.float32(a * b))
    exp2 = staticmethod(lambda x: np.exp2(x, dtype=np.float32))
    rcp = staticmethod(lambda x: np.divide(np.float32(1), x, dtype=np.float32))
    fma = staticmethod(lambda a, b, c: np.float32(np.float64(a) * np.float64(b) +
                                                  np.float64(c)))
    abs = staticmethod(np.abs)
    copysign = staticmethod(np.copysign)
    maximum = staticmethod(np.maximum)
    select_nonneg = staticmethod(lambda x, a, b: np.where(x >= 0, a, b))


_X = np.linspace(-9, 9, 180001, dtype=np.float32)
_ERF = np.vectorize(math.erf)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


# name -> (reference in float64, bound on |error| / (1 + |reference|))
MATH = {
    "erf": (_ERF, 6e-7),
    "tanh": (np.tanh, 3e-7),
    "sigmoid": (_sigmoid, 2e-7),
    "gelu_erf": (lambda x: 0.5 * x * (1 + _ERF(x / math.sqrt(2))), 5e-7),
    "gelu_tanh": (_gelu_tanh, 5e-7),
    "silu": (lambda x: x * _sigmoid(x), 3e-7),
    "relu": (lambda x: np.maximum(x, 0), 0),
}


@pytest.mark.parametrize("name", sorted(MATH))
def test_math_formulas_against_float64_references(name):
    """The very formula a kernel emits (fragment.<name> over IrOps), run on
    numpy float32 over [-9, 9], against the float64 function."""
    ref, bound = MATH[name]
    with np.errstate(over="ignore", divide="ignore"):
        got = getattr(fragment, name)(_X, NumpyOps)
    want = ref(_X.astype(np.float64))
    err = np.max(np.abs(got - want) / (1 + np.abs(want)))
    assert err <= bound, f"{name}: {err:.3g} > {bound}"


@pytest.mark.parametrize("name", sorted(MATH))
def test_math_saturates_without_nan(name):
    """ex2 of a huge argument is inf and rcp(inf) 0: the formulas take
    +-1e30 and +-100 to their limits, never NaN."""
    x = np.array([-1e30, -100.0, 100.0, 1e30], dtype=np.float32)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        got = getattr(fragment, name)(x, NumpyOps)
    assert not np.isnan(got).any(), got
    want = {"erf": [-1, -1, 1, 1], "tanh": [-1, -1, 1, 1], "sigmoid": [0, 0, 1, 1]}.get(
        name, [0, 0, 100, 1e30])
    assert np.allclose(got, want, rtol=1e-6, atol=1e-6), got


@pytest.mark.parametrize("build, ex2, rcp", [
    (lambda x, s: x.sigmoid(), 1, 1),
    (lambda x, s: x.tanh(), 1, 1),
    (lambda x, s: x.erf(), 1, 1),
    (lambda x, s: x.map(fragment.gelu_erf), 1, 1),
    (lambda x, s: x.map(fragment.gelu_tanh), 1, 1),
    (lambda x, s: x.map(fragment.silu), 1, 1),
])
def test_math_methods_lower_to_ex2_and_rcp_per_value(build, ex2, rcp):
    ptx = ptx_of(build)
    assert len(re.findall(r"ex2\.approx\.ftz\.f32\s", ptx)) == 32 * ex2
    assert len(re.findall(r"rcp\.approx\.ftz\.f32\s", ptx)) == 32 * rcp
    assert "__nv_" not in ptx          # no libdevice call


def test_abs_clears_the_sign_bit():
    ptx = ptx_of(lambda x, s: x.abs())
    assert len(re.findall(r"(?:abs\.f32|and\.b32\s+%r\d+, %r\d+, 2147483647;)", ptx)) == 32


# -- column vectors and loads --------------------------------------------------------

@pytest.mark.parametrize("n", [8, 64, 256])
def test_col_vector_follows_the_accumulator_columns(n):
    """Value i of a fragment is in the column of ColVector value
    2 (i / 4) + i % 2 (what acc + cols reads), for every thread."""
    for T in range(128):
        r0, c0 = Fragment.thread_origin(T // 32, T % 32)
        for i in range(n // 2):
            k = 2 * (i // 4) + i % 2
            assert c0 + ColVector.element_offset(k) == ptx_layouts.accumulator_element(T, i)[1]


def test_col_vector_broadcasts_down_the_columns():
    k = kernel()
    with k:
        out, inp, s = k.args
        x = loaded(k, inp)
        cols = ColVector(64, [s * float(j) for j in range(16)])
        y = x + cols
        # value i gets column value 2 (i / 4) + i % 2
        for i in (0, 1, 2, 5, 31):
            add = y.value(i).owner
            assert add.operands[1] == cols.values[2 * (i // 4) + i % 2]
        assert isinstance(cols * 2.0 + cols, ColVector) and isinstance(s * x + -cols, Fragment)
        assert isinstance(x.fma(s, cols), Fragment)
        with pytest.raises(ValueError, match="a column vector of n=32 does not fit a 64x64"):
            x + ColVector.full(32, 0.0)
        with pytest.raises(ValueError, match="ColVector of n=64: 16 values per thread, got 3"):
            ColVector(64, [s, s, s])
        with pytest.raises(ValueError, match="column vectors of different widths: 64 and 32"):
            cols + ColVector.full(32, 0.0)


def _load_kernel(dtype, load_fn):
    k = Kernel("loads", block_dim=128, params={"out": GlobalPtr(), "src": GlobalPtr(align=4),
                                               "m": Int32(), "n": Int32()})
    with k:
        out, src, m, n = k.args
        res = load_fn(k, src, m, n)
        for i, v in enumerate(res.values):
            store(v, out, k.thread_idx() * 128 + i)
    k.verify()
    ptx = k.to_ptx()
    k.compile(assembler=ASSEMBLER)
    return ptx


@pytest.mark.parametrize("dtype, instruction", [("bf16", "ld.global.v2.b16"),
                                                ("f16", "ld.global.v2.b16"),
                                                ("f32", "ld.global.v2.b32")])
def test_fragment_load_is_one_guarded_pair_load_per_value_pair(dtype, instruction):
    """A 64 x 64 tile: 16 pair loads per thread, each guarded by its own
    predicate (rows and columns past m, n read 0), their addresses one base
    register plus a constant per row half."""
    ptx = _load_kernel(dtype, lambda k, src, m, n: Fragment.load(
        64, src, m - 64, n - 64, m, n, n, k.warp_idx() % 4, k.lane_idx(), dtype))
    loads = re.findall(re.escape(instruction) + r"\s+\{[^}]*\}, \[(%rd\d+)(?:\+(\d+))?\]", ptx)
    assert len(loads) == 16
    assert len({base for base, _ in loads}) <= 2      # one base per row half
    assert len(re.findall(r"@%p\d+ bra", ptx)) >= 16   # guarded (ptxas predicates them)


def test_col_vector_load():
    ptx = _load_kernel("bf16", lambda k, src, m, n: ColVector.load(
        128, src, n - 128, n, k.lane_idx(), "bf16"))
    loads = re.findall(r"ld\.global\.v2\.b16\s+\{[^}]*\}, \[(%rd\d+)(?:\+(\d+))?\]", ptx)
    assert len(loads) == 16 and len({b for b, _ in loads}) == 1
    assert sorted(int(o or 0) for _, o in loads) == [16 * j for j in range(16)]


def test_loads_refuse_other_dtypes():
    with kernel() as k:
        out, inp, s = k.args
        with pytest.raises(ValueError, match="Fragment.load: dtype must be 'f32', 'bf16' or "
                                             "'f16', got 'e4m3'"):
            Fragment.load(64, inp, 0, 0, 64, 64, 64, 0, 0, "e4m3")
        with pytest.raises(ValueError, match="ColVector.load: dtype must be"):
            ColVector.load(64, inp, Scalar(0), 64, Scalar(0), "i32")
