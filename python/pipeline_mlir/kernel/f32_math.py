"""Operations on one f32 value that the register fragments (fragment.py)
are built from: the NVVM instructions for ``2 ** x``, ``log2`` and ``1 / x``,
the butterfly shuffle of a row reduction, and the math beyond the
instructions -- :func:`sigmoid`, :func:`tanh`, :func:`erf` (Abramowitz &
Stegun 7.1.26) and the activations :func:`relu`, :func:`gelu_tanh`,
:func:`gelu_erf`, :func:`silu` -- each written once over an ``ops``
argument (:class:`IrOps` emits MLIR; the tests run the same formulas on
numpy). fragment.py re-exports all of them: ``Fragment`` applies them value
by value.
"""

import math

from mlir.dialects import arith, llvm, nvvm

from .values import f32, i32, to_value


LOG2_E = math.log2(math.e)
_FULL_MASK = -1          # all 32 lanes of the warp take part in a shuffle


def _f32_value(x, what):
    """An f32 ir.Value from a Python number, a float Scalar or an f32 value."""
    v = to_value(x, f32() if isinstance(x, (int, float)) else None, what=what)
    if v.type != f32():
        raise TypeError(f"{what}: expected an f32 value, got {v.type}")
    return v


def shfl_xor(value, mask):
    """``shfl.sync.bfly.b32`` of an f32 value with the lane ``lane ^ mask``
    (all 32 lanes take part)."""
    return nvvm.shfl_sync(value.type, to_value(_FULL_MASK, i32()), value,
                          to_value(mask, i32()), to_value(0x1F, i32()),
                          nvvm.ShflKind.bfly)


def _nvvm_intrinsic(name, *args):
    """A call of the NVVM intrinsic ``name`` returning f32. Used where the
    NVVM dialect has no op and the generic LLVM intrinsic is not an option:
    the GPU-to-NVVM conversion rewrites ``llvm.intr.exp2``/``log2`` of f32
    into libdevice calls (``__nv_exp2f``), which would need libdevice linked
    and cost a function's worth of range checks per value."""
    return llvm.call_intrinsic(f32(), name, list(args), [], [])


def exp2(x):
    """``2 ** x`` of an f32 value: PTX ``ex2.approx.ftz.f32`` (2 ulp, what
    every fast softmax uses; subnormal results flush to 0)."""
    return _nvvm_intrinsic("llvm.nvvm.ex2.approx.ftz.f", x)


def log2(x):
    """``log2 x`` of an f32 value: PTX ``lg2.approx.ftz.f32``."""
    return _nvvm_intrinsic("llvm.nvvm.lg2.approx.ftz.f", x)


def reciprocal(x):
    """``1 / x`` of an f32 value (PTX ``rcp.approx.ftz.f32``)."""
    return nvvm.rcp_approx_ftz_f(f32(), x)


def _with_bits(x, fn):
    """``fn`` applied to the 32 bits of the f32 value ``x``, back as f32."""
    return llvm.bitcast(f32(), fn(llvm.bitcast(i32(), x)))


class IrOps:
    """The f32 operations the functions below are written in, emitted as
    MLIR at the insertion point (what a kernel runs). The formulas take
    their operations from an ``ops`` argument so that the very same
    sequence can run elsewhere: test/python/test_fragment.py runs them on
    numpy float32 with ``ex2``/``rcp`` rounded like the hardware's and
    compares with ``math.erf`` / ``math.tanh``, without a GPU."""

    @staticmethod
    def const(c):
        return _f32_value(float(c), "constant")

    add, sub, mul = staticmethod(arith.addf), staticmethod(arith.subf), staticmethod(arith.mulf)
    exp2, rcp = staticmethod(exp2), staticmethod(reciprocal)

    @staticmethod
    def fma(a, b, c):
        return llvm.intr_fma(a, b, c)

    # |x| and copysign on the sign bit: the GPU-to-NVVM conversion makes
    # ``llvm.intr.fabs``/``copysign`` illegal (it would call libdevice).
    @staticmethod
    def abs(x):
        return _with_bits(x, lambda b: arith.andi(b, to_value(0x7FFFFFFF, i32())))

    @staticmethod
    def copysign(magnitude, sign):
        sign_bit = arith.andi(llvm.bitcast(i32(), sign), to_value(-0x80000000, i32()))
        return _with_bits(magnitude, lambda b: arith.ori(
            arith.andi(b, to_value(0x7FFFFFFF, i32())), sign_bit))

    @staticmethod
    def maximum(a, b):
        """NaN-propagating (``max.NaN.f32``), as ``torch.maximum`` is."""
        return arith.maximumf(a, b)

    @staticmethod
    def select_nonneg(x, if_nonneg, otherwise):
        """``x >= 0 ? if_nonneg : otherwise`` (NaN takes ``otherwise``)."""
        return arith.select(arith.cmpf(arith.CmpFPredicate.OGE, x, IrOps.const(0.0)),
                            if_nonneg, otherwise)


# Abramowitz & Stegun 7.1.26 (Hastings): for z >= 0,
#   erfc z = t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^(-z^2),  t = 1 / (1 + p z),
# with |error| <= 1.5e-7 (absolute) over z >= 0. Written as erfc so that a
# GELU of a negative input, 0.5 x erfc(|x| / sqrt 2), does not subtract two
# numbers near 1 (what 1 + erf(x / sqrt 2) would do).
ERFC_P = 0.3275911
ERFC_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
SQRT_HALF = math.sqrt(0.5)
# GELU's tanh form: tanh(sqrt(2 / pi) (x + 0.044715 x^3)).
GELU_TANH_C = (math.sqrt(2.0 / math.pi), math.sqrt(2.0 / math.pi) * 0.044715)


def sigmoid(x, ops=IrOps):
    """``1 / (1 + e^-x)``: ``rcp(1 + ex2(-x log2 e))``. Saturates without NaN
    (``ex2`` of a large argument is inf and ``rcp(inf)`` is 0)."""
    o = ops
    return o.rcp(o.add(o.const(1.0), o.exp2(o.mul(x, o.const(-LOG2_E)))))


def tanh(x, ops=IrOps):
    """``tanh x = 1 - 2 / (e^2x + 1)`` from ``ex2`` and ``rcp`` (the NVVM
    ``tanh.approx`` has a relative error of 2^-11, too coarse for an fp32
    epilogue). Absolute error about 2e-7 everywhere (5e-7 with the
    approximate ``ex2``/``rcp``); relative error is larger below |x| ~ 1e-3,
    where the result is 1 minus a number near 1."""
    o = ops
    e = o.exp2(o.mul(x, o.const(2.0 * LOG2_E)))
    return o.sub(o.const(1.0), o.mul(o.const(2.0), o.rcp(o.add(e, o.const(1.0)))))


def erfc_nonneg(z, ops=IrOps):
    """``erfc z`` for ``z >= 0`` (A&S 7.1.26, see ``ERFC_A``)."""
    o = ops
    t = o.rcp(o.fma(z, o.const(ERFC_P), o.const(1.0)))
    poly = o.const(ERFC_A[4])
    for a in reversed(ERFC_A[:4]):
        poly = o.fma(poly, t, o.const(a))
    return o.mul(o.mul(poly, t), o.exp2(o.mul(o.mul(z, z), o.const(-LOG2_E))))


def erf(x, ops=IrOps):
    """``erf x`` (A&S 7.1.26 on |x|, the sign copied back): absolute error
    below 5e-7 in fp32 (the formula's 1.5e-7, the rest the rounding of
    ``1 - erfc`` near 0), below 1e-6 with the approximate ``ex2``/``rcp``."""
    o = ops
    return o.copysign(o.sub(o.const(1.0), erfc_nonneg(o.abs(x), o)), x)


def gelu_erf(x, ops=IrOps):
    """``x Phi(x) = 0.5 x (1 + erf(x / sqrt 2))`` (``torch.nn.functional.gelu``):
    ``Phi(x) = 1 - erfc(z) / 2`` for ``x >= 0`` and ``erfc(z) / 2`` below, with
    ``z = |x| / sqrt 2``, so a negative input loses no digits."""
    o = ops
    half_q = o.mul(erfc_nonneg(o.mul(o.abs(x), o.const(SQRT_HALF)), o), o.const(0.5))
    cdf = o.select_nonneg(x, o.sub(o.const(1.0), half_q), half_q)
    return o.mul(x, cdf)


def gelu_tanh(x, ops=IrOps):
    """``0.5 x (1 + tanh u)``, ``u = sqrt(2/pi) (x + 0.044715 x^3)``
    (``gelu(approximate='tanh')``), computed as the identical ``x sigmoid(2u)``:
    no cancellation for negative ``x``."""
    o = ops
    u = o.mul(x, o.fma(o.mul(x, x), o.const(GELU_TANH_C[1]), o.const(GELU_TANH_C[0])))
    return o.mul(x, sigmoid(o.mul(u, o.const(2.0)), o))


def relu(x, ops=IrOps):
    """``max(x, 0)``; NaN stays NaN (``torch.relu``'s behaviour)."""
    return ops.maximum(x, ops.const(0.0))


def silu(x, ops=IrOps):
    """``x sigmoid(x)`` (``torch.nn.functional.silu``)."""
    return ops.mul(x, sigmoid(x, ops))
