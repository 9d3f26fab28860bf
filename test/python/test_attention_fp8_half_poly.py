"""The FP8 forward's polynomial exp2 on f16 pairs
(``AttentionConfig.exp2_poly_half``: two of P's values per f16x2
instruction, ``attention_fwd.exponentials.exp2_poly_half``), without a GPU.

The very formula the kernel emits (``exp2_poly_half`` with its operations
swapped for numpy ones that round as PTX's f16x2 instructions do) against
2^x: within 4e-3 of it for x in [-8, 8] and 6e-3 down to -13 (x rounded to
f16, then the polynomial's 2.1e-3; e4m3 rounds P by up to 2^-4 and holds
nothing below 2^-9), and at most 2^-10 below that (e4m3 rounds it to
0, as it does 2^x there), masked (-inf) values included. The kernels:
the pairs' conversions straight from f16x2 to e4m3, as many MUFU ex2 fewer
as the option says, no spills or serialized wgmmas, and the protocol
checker and the simulator accept them. The GPU check is
benchmarks/attention/run_attention_fp8.py (candidates ``nph4``, ``nph6``,
``nph8``: timed in run 14; full attention's no-LSE configuration takes 6 of 16;
the odd counts ``nph5``, ``nph7`` and the LSE configurations' ``lph4``,
``lph6``, ``lph8``, whose FMA-pipe row sum adds the pairs on f16x2
(``exponentials.half_row_sums``, its error on numpy below): run 15)."""

import re

import numpy as np
import pytest

from _example_checks import protocol_warnings, simulate, verify_protocol
from _ptxas import report as _ptxas_info

from pipeline_mlir.kernels import attention_fwd
from pipeline_mlir.kernels.attention_fwd import AttentionConfig
from pipeline_mlir.kernels.attention_fwd import exponentials as ex
from pipeline_mlir.ops import attention_fp8_configs

F16, U32 = np.float16, np.uint32


def _halves(bits):
    """The two f16 halves (low, high) of u32 registers."""
    return ((bits & U32(0xFFFF)).astype(np.uint16).view(F16),
            (bits >> U32(16)).astype(np.uint16).view(F16))


def _join(lo, hi):
    return (lo.astype(F16).view(np.uint16).astype(U32)
            | (hi.astype(F16).view(np.uint16).astype(U32) << U32(16)))


class NumpyHalfOps:
    """exp2_poly_half's operations on numpy, each rounded once as PTX's
    f16x2 instructions round (to nearest even); registers are u32."""

    @staticmethod
    def pack(x0, x1):
        # cvt.rn: past f16's range to -inf (as -1e30 does here)
        with np.errstate(over="ignore"):
            return _join(np.asarray(x0, np.float32).astype(F16),
                         np.asarray(x1, np.float32).astype(F16))

    @staticmethod
    def const(c):
        h = F16(c)
        assert float(h) == c
        return U32(int(h.view(np.uint16)) * 0x10001)

    @staticmethod
    def _map(fn, *regs):
        regs = [r.astype(U32) for r in np.broadcast_arrays(*regs)]
        lo = fn(*[_halves(r)[0].astype(np.float64) for r in regs])
        hi = fn(*[_halves(r)[1].astype(np.float64) for r in regs])
        return _join(lo.astype(F16), hi.astype(F16))

    @classmethod
    def maximum(cls, a, b):
        return cls._map(np.maximum, a, b)

    @classmethod
    def add(cls, a, b):
        return cls._map(lambda x, y: x + y, a, b)

    @classmethod
    def sub(cls, a, b):
        return cls._map(lambda x, y: x - y, a, b)

    @classmethod
    def fma(cls, a, b, c):
        # f16 products are exact in f64, and so is the sum here: one rounding.
        return cls._map(lambda x, y, z: x * y + z, a, b, c)

    @staticmethod
    def add_to_exponents(rounded, frac_pow):
        n = (rounded & U32(ex.F16_EXPONENT_LOW5)) << U32(10)
        return (frac_pow + n - U32(ex.F16_BIAS_BITS)).astype(U32)


def half_exp2(x0, x1):
    return _halves(ex.exp2_poly_half(x0, x1, NumpyHalfOps))


X = np.concatenate([np.linspace(-20.0, 8.0, 200001, dtype=np.float32),
                    np.float32([-np.inf, -1e30, -127.0, -14.5, -14.25, -9.0, 0.0, 8.0])])


def test_within_4e_3_of_2_to_the_x_and_below_2_to_the_minus_10_where_e4m3_has_0():
    """Both halves, each value as the low and as the high one."""
    lo, hi = half_exp2(X, X[::-1])
    for got, x in ((lo, X), (hi, X[::-1])):
        got = got.astype(np.float64)
        exact = np.exp2(x.astype(np.float64))
        held = x >= -13.0
        with np.errstate(divide="ignore"):
            err = np.abs(got / exact - 1)
        # x itself rounded to f16 (half an ulp: 2^-9 below 8, 2^-8 below
        # 16 in magnitude) and the polynomial's 2.1e-3
        assert np.max(err[(x >= -8.0)]) < 4e-3
        assert np.max(err[held]) < 6e-3
        assert np.all((got[~held] >= 0) & (got[~held] <= 2.0 ** -10))
        assert got[x == 0.0][0] == 1.0 and err[x == 8.0][0] < 4e-3


def test_the_check_finds_the_f32_polynomials_coefficients():
    """The planted mistake: the f32 polynomial's degree-2 coefficients
    (fitted on [0, 1), not on this formula's [-1/2, 1/2]) miss by far more
    than the bound above."""
    real = ex.EXP2_HALF_COEFFS
    try:
        ex.EXP2_HALF_COEFFS = tuple(float(F16(c)) for c in ex.EXP2_POLY2_COEFFS)
        lo, _ = half_exp2(X, X)
    finally:
        ex.EXP2_HALF_COEFFS = real
    held = X >= -13.0
    err = np.abs(lo[held].astype(np.float64) / np.exp2(X[held].astype(np.float64)) - 1)
    assert np.max(err) > 1e-2


def test_pairs_are_spread_over_32_values_odd_counts_too():
    assert ex.half_pair_slots(4) == {0, 8, 16, 24}
    assert ex.half_pair_slots(8) == {0, 4, 8, 12, 16, 20, 24, 28}
    for n in range(1, 17):
        slots = ex.half_pair_slots(n)
        # n of every 16 values: n pairs of the 16 in 32 values
        assert len(slots) == n and all(i % 2 == 0 and 0 <= i < 32 for i in slots), n
        if n % 2 == 0:
            # an even count: n / 2 pairs of each 16 values, the same in both
            # (the pairs run 14 timed)
            assert {i % 16 for i in slots if i < 16} == {i - 16 for i in slots if i >= 16}
    assert ex.half_pair_slots(7) == {0, 6, 10, 14, 20, 24, 28}


def _numpy_sum_ops(low_half_twice=False):
    """half_row_sums' operations on numpy: f32 adds, f16x2 adds rounded as
    add.rn.f16x2, the halves converted exactly; ``low_half_twice``: the
    planted mistake (the high half never read)."""
    class Ops:
        add_f32 = staticmethod(lambda a, b: (np.float32(a) + np.float32(b)).astype(np.float32))
        add_f16x2 = staticmethod(NumpyHalfOps.add)
        bits = staticmethod(lambda v: v)

        @staticmethod
        def half_to_f32(bits, half):
            return _halves(bits)[0 if low_half_twice else half].astype(np.float32)
    return Ops


def _row_sums_of_a_block(per_16, ops, seed=0, trials=2000):
    """One 192-key block of a thread (96 values, two rows): exponents in
    [-20, 8] (8: the rescale threshold), half of them near the top, P by
    the kernel's formulas (pairs on f16x2, the rest 2^x in f32), summed by
    ``half_row_sums`` on ``ops``; returns (sums, the exact sums of the same
    P, the exact sums of 2^x) per row."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-20.0, 8.0, (96, trials)).astype(np.float32)
    x[rng.random((96, trials)) < 0.5] *= np.float32(0.1)
    first = ex.half_pair_slots(per_16)
    values, p = [], np.zeros((96, trials), np.float64)
    for i in range(0, 96, 2):
        if i % ex.HALF_WINDOW in first:
            bits = ex.exp2_poly_half(x[i], x[i + 1], NumpyHalfOps)
            lo, hi = _halves(bits)
            values += [bits, bits]
            p[i], p[i + 1] = lo, hi
        else:
            values += [np.exp2(x[i]), np.exp2(x[i + 1])]
            p[i], p[i + 1] = values[-2], values[-1]
    sums = ex.half_row_sums(values, per_16, ops)
    row = np.array([(i // 2) % 2 for i in range(96)])
    exact_p = [p[row == r].sum(axis=0) for r in range(2)]
    exact_x = [np.exp2(x[row == r].astype(np.float64)).sum(axis=0) for r in range(2)]
    return sums, exact_p, exact_x


@pytest.mark.parametrize("per_16", [4, 6, 7, 8])
def test_the_lse_row_sums_of_pairs_stay_within_the_lse_bound(per_16):
    """The configurations that return the LSE: the pairs added on f16x2
    lose at most 2e-3 of a row's sum, and the sum of P as computed is within
    5e-3 of the sum of 2^x: log of it (the LSE) within 5e-3, half the FP8
    check's 0.01."""
    sums, exact_p, exact_x = _row_sums_of_a_block(per_16, _numpy_sum_ops())
    for got, ep, ex_ in zip(sums, exact_p, exact_x):
        assert np.max(np.abs(got / ep - 1)) < 2e-3
        assert np.max(np.abs(np.log(got.astype(np.float64)) - np.log(ex_))) < 5e-3


def test_the_check_finds_a_half_never_summed():
    sums, _, exact_x = _row_sums_of_a_block(6, _numpy_sum_ops(low_half_twice=True))
    assert max(np.max(np.abs(np.log(g.astype(np.float64)) - np.log(e)))
               for g, e in zip(sums, exact_x)) > 0.05


FULL = attention_fp8_configs.VARIANTS["fp8_d128_nolse"]
CAUSAL = attention_fp8_configs.VARIANTS["fp8_d128c_nolse"]


@pytest.mark.parametrize("over, message", [
    (dict(FULL, exp2_poly=6, p_pack_merge=False, exp2_poly_half=True), "p_pack_merge"),
    (dict(FULL, exp2_poly=0, p_pack_merge=True, exp2_poly_half=True), "exp2_poly > 0"),
    (dict(attention_fp8_configs.VARIANTS["fp8_d128c"], exp2_poly=4, p_pack_merge=False,
          exp2_poly_half=True), "p_pack_merge"),
])
def test_the_option_is_refused_outside_its_range(over, message):
    with pytest.raises(ValueError, match=message):
        AttentionConfig(dtype="e4m3", **over)


@pytest.fixture(scope="module")
def causal8():
    """Causal with 8 of 16 values by the polynomial (4 pairs of 16)."""
    return attention_fwd.build(AttentionConfig(dtype="e4m3", **dict(
        CAUSAL, exp2_poly=8, exp2_poly_half=True)))


def test_the_pairs_convert_from_f16x2_without_spills(causal8):
    """Two softmax copies (the first block and the loop), 96 values a
    thread each: 24 pairs on f16x2, 48 values by MUFU; 24 pairs packed
    from f32 and converted from f16x2, the other 24 converted from f32."""
    ptx = causal8.to_ptx()
    count = {k: len(re.findall(k, ptx)) for k in (
        r"cvt\.rn\.f16x2\.f32", r"fma\.rn\.f16x2", r"max\.f16x2",
        r"cvt\.rn\.satfinite\.e4m3x2\.f16x2", r"cvt\.rn\.satfinite\.e4m3x2\.f32",
        r"ex2\.approx\.ftz\.f32", r"add\.rm\.f32")}
    assert count == {r"cvt\.rn\.f16x2\.f32": 48, r"fma\.rn\.f16x2": 96, r"max\.f16x2": 48,
                     r"cvt\.rn\.satfinite\.e4m3x2\.f16x2": 48,
                     r"cvt\.rn\.satfinite\.e4m3x2\.f32": 48,
                     # 2 x 48 values, and each block's correction of two rows
                     r"ex2\.approx\.ftz\.f32": 96 + 2, r"add\.rm\.f32": 0}, count
    info = _ptxas_info(ptx)
    if info is not None:
        assert not re.search(r"C75[12]\d", info), info
        assert re.findall(r"(\d+) bytes spill stores", info) == ["0"]


def test_the_kernel_checks_and_simulates_clean(causal8):
    text = str(causal8.module)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    (report,) = simulate(text, schedules=2, args={5: 1, 6: 4, 7: 2, 8: 200, 9: 300}).values()
    assert report.ok and report.schedules == 2, report


@pytest.fixture(scope="module")
def full7():
    """Full attention without the LSE, 7 of 16 on f16 pairs (an odd count:
    7 pairs of every 16, over 32 values)."""
    return attention_fwd.build(AttentionConfig(dtype="e4m3", **dict(FULL, exp2_poly=7)))


def test_an_odd_share_takes_7_pairs_of_16_without_spills(full7):
    """96 values a thread a block: 21 pairs on f16x2, 54 values by MUFU, in
    each of the two softmax copies."""
    ptx = full7.to_ptx()
    count = {k: len(re.findall(k, ptx)) for k in (
        r"cvt\.rn\.f16x2\.f32", r"fma\.rn\.f16x2", r"cvt\.rn\.satfinite\.e4m3x2\.f16x2",
        r"cvt\.rn\.satfinite\.e4m3x2\.f32", r"ex2\.approx\.ftz\.f32")}
    assert count == {r"cvt\.rn\.f16x2\.f32": 42, r"fma\.rn\.f16x2": 84,
                     r"cvt\.rn\.satfinite\.e4m3x2\.f16x2": 42,
                     r"cvt\.rn\.satfinite\.e4m3x2\.f32": 54,
                     r"ex2\.approx\.ftz\.f32": 108 + 2}, count
    info = _ptxas_info(ptx)
    if info is not None:
        assert not re.search(r"C75[12]\d", info), info
        assert re.findall(r"(\d+) bytes spill stores", info) == ["0"]


FULL_LSE = attention_fp8_configs.VARIANTS["fp8_d128"]


@pytest.fixture(scope="module")
def full_lse6():
    """Full attention with the LSE (the FMA pipe's row sum), 6 of 16 on f16
    pairs (candidate ``lph6``)."""
    return attention_fwd.build(AttentionConfig(dtype="e4m3", **dict(
        FULL_LSE, exp2_poly=6, p_pack_merge=True, exp2_poly_half=True)))


def test_the_lse_kernel_sums_its_pairs_on_f16x2(full_lse6):
    """Per softmax copy: 18 pairs (12 of row 0, 6 of row 1) added in 16
    add.rn.f16x2 besides the polynomial's 18, each row's two halves
    converted to f32; no row-sum wgmma (the FMA pipe's sum), no spills."""
    ptx = full_lse6.to_ptx()
    assert len(re.findall(r"add\.rn\.f16x2", ptx)) == 2 * (18 + 16)
    assert len(re.findall(r"cvt\.f32\.f16", ptx)) == 2 * 2 * 2
    assert sorted(set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k32)", ptx))) == [
        "m64n128k32", "m64n192k32"]
    assert len(re.findall(r"ex2\.approx\.ftz\.f32", ptx)) == 2 * 60 + 2
    info = _ptxas_info(ptx)
    if info is not None:
        assert not re.search(r"C75[12]\d", info), info
        assert re.findall(r"(\d+) bytes spill stores", info) == ["0"]


@pytest.mark.parametrize("fixture", ["full7", "full_lse6"])
def test_the_new_kernels_check_and_simulate_clean(fixture, request):
    text = str(request.getfixturevalue(fixture).module)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    (report,) = simulate(text, schedules=1, args={5: 1, 6: 4, 7: 2, 8: 200, 9: 300}).values()
    assert report.ok and report.schedules == 1, report
