"""The attention forward's polynomial exp2 (``AttentionConfig.exp2_poly``:
part of the softmax's exponentials on the FMA pipe, FlashAttention-4's
emulation), without a GPU: the very formula the kernel emits
(``attention_fwd.exp2_poly``) run on numpy float32 with the PTX rounding of
each step, against 2^x; the kernels that use it pass the protocol checker
and the simulator and compile without spills, with as many ``add.rm`` (one
per polynomial value) and as many fewer ``ex2`` as the option says."""

import re

import numpy as np
import pytest

from _example_checks import protocol_warnings, simulate, verify_protocol
from test_gemm_epilogue import _ptxas_spills

from pipeline_mlir.kernels import attention_fwd
from pipeline_mlir.kernels.attention_fwd import (EXP2_ROUND_MAGIC, AttentionConfig,
                                                 exp2_poly, poly_slots)

F32 = np.float32


class NumpyOps:
    """exp2_poly's operations on numpy float32, rounded as PTX rounds them."""

    @staticmethod
    def const(c):
        return F32(c)

    @staticmethod
    def maximum(a, b):
        return np.maximum(a, b).astype(F32)

    @staticmethod
    def add_round_down(a, b):
        # add.rm.f32 where the sum lies in [2^23, 2^24): the ulp is 1 there,
        # so rounding toward -inf is the floor of the exact sum.
        exact = a.astype(np.float64) + np.float64(b)
        assert ((exact >= 2.0 ** 23) & (exact < 2.0 ** 24)).all()
        return np.floor(exact).astype(F32)

    @staticmethod
    def sub(a, b):
        return (a - b).astype(F32)

    @staticmethod
    def fma(a, b, c):
        return (np.float64(a) * np.float64(b) + np.float64(c)).astype(F32)

    @staticmethod
    def add_to_exponent(rounded, frac_pow):
        n = (rounded.view(np.uint32) << np.uint32(23)).astype(np.uint32)
        return (frac_pow.view(np.uint32) + n).astype(np.uint32).view(F32)


def poly(x):
    return exp2_poly(np.asarray(x, dtype=F32), NumpyOps)


def test_the_polynomial_is_within_1e_4_of_exp2_over_the_softmax_range():
    x = np.concatenate([np.linspace(-126.0, 0.0, 2_000_001, dtype=F32),
                        -np.random.default_rng(0).random(100_000, dtype=F32) * 20])
    got = poly(x).astype(np.float64)
    want = np.exp2(x.astype(np.float64))
    rel = np.abs(got - want) / want
    # Degree-3 minimax of 2^f on [0, 1): 8.8e-5; ex2.approx is 2 ulp (2.4e-7).
    assert rel.max() < 1e-4, rel.max()


def test_exact_values_at_the_ends():
    # 2^0 = 1 and the integers exactly (f = 0: the polynomial's 1.0).
    ints = np.arange(-126, 1, dtype=F32)
    assert (poly(ints) == np.exp2(ints)).all()
    # At and below -127, and for a masked (-inf) score: exactly +0.0, as
    # ex2.approx.ftz, so a fully masked row sums to 0 (O = 0, LSE = -inf).
    low = poly(np.array([-127.0, -127.5, -1e30, -np.inf], dtype=F32))
    assert (low == 0.0).all() and not np.signbit(low).any()


def test_the_magic_constant_leaves_the_floor_in_the_low_bits():
    x = np.array([-0.25, -1.0, -1.5, -126.75], dtype=F32)
    rounded = NumpyOps.add_round_down(x, EXP2_ROUND_MAGIC)
    assert (rounded - F32(EXP2_ROUND_MAGIC) == np.floor(x)).all()


@pytest.mark.parametrize("k", range(17))
def test_poly_slots_take_k_of_16_spread_evenly(k):
    slots = sorted(poly_slots(k))
    assert len(slots) == k
    if k > 1:
        gaps = np.diff(slots + [slots[0] + 16])
        assert gaps.max() - gaps.min() <= 1


def test_out_of_range_counts_are_refused():
    with pytest.raises(ValueError, match="exp2_poly"):
        AttentionConfig(exp2_poly=17)


POLY = [dict(head_dim=128, causal=True, block_n=192, stages=3, dtype="e4m3", exp2_poly=4),
        dict(head_dim=256, causal=False, stages=3, q_stages=1, dtype="e4m3", exp2_poly=2),
        dict(head_dim=128, causal=True, exp2_poly=3)]


@pytest.mark.parametrize("cfg", POLY[:1], ids=str)
def test_polynomial_kernels_check_and_simulate_clean(cfg):
    text = str(attention_fwd.build(AttentionConfig(**cfg)).module)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    args = {5: 1, 6: 4, 7: 2, 8: 200, 9: 300}
    (report,) = simulate(text, schedules=2, args=args).values()
    assert report.ok and report.schedules == 2, report


@pytest.mark.parametrize("cfg", POLY, ids=str)
def test_polynomial_kernels_compile_without_spills(cfg):
    c = AttentionConfig(**cfg)
    ptx = attention_fwd.build(c).to_ptx()
    assert _ptxas_spills(ptx) in (None, 0)
    # Per block: a thread's bn / 2 values of P, exp2_poly of every 16 by
    # the polynomial (one add.rm each), in the first block's softmax and the
    # loop's; the rest and the corrections by ex2.
    per_block = c.kv_block // 2
    n_poly = per_block // 16 * c.exp2_poly
    assert len(re.findall(r"add\.rm\.f32", ptx)) == 2 * n_poly
    base = attention_fwd.build(AttentionConfig(**dict(cfg, exp2_poly=0))).to_ptx()
    assert (len(re.findall(r"ex2\.approx", base)) - len(re.findall(r"ex2\.approx", ptx))
            == 2 * n_poly)


def test_the_name_says_the_option():
    cfg = dict(head_dim=128, block_n=192, stages=3, dtype="e4m3")
    assert "_px" not in AttentionConfig(**cfg).name
    assert AttentionConfig(**cfg, exp2_poly=3).name.endswith("_px3_e4m3")
