"""The softmax's exponentials (``exponentials``): MUFU's ex2, or for some of
them a polynomial on the FMA pipe (``exp2_poly``, FlashAttention-4's
emulation; ``AttentionConfig.exp2_poly``).
"""

from mlir.dialects import arith, llvm

from pipeline_mlir.kernel.fragment import Fragment, exp2
from pipeline_mlir.kernel.values import f32, i32, to_value


POLY_SLOTS = 16                  # exp2_poly counts values of every 16 a thread holds


# The polynomial exp2 (FlashAttention-4's emulation on the FMA pipe). For x
# <= 0 (the softmax's exponents): x clamped at -127, split into n = floor(x)
# (an add rounding down onto 1.5 * 2^23, where the ulp is 1, leaves n in the
# low mantissa bits) and f = x - n in [0, 1); 2^f from a degree-3 minimax
# polynomial with constant term 1 (relative error < 1e-4, below bf16's and
# far below e4m3's rounding of P), and n added to its exponent field as an
# integer. At x = -127 (and -inf, masked): f = 0, 2^f = 1.0 exactly, and
# the exponent field becomes 0 with a zero mantissa: exactly +0.0, as
# ex2.approx.ftz gives. Exponents above 127 are outside its range (the
# softmax's are <= 0).
EXP2_POLY_COEFFS = (1.0, 0.695146143436431884765625, 0.227564394474029541015625,
                    0.077119089663028717041015625)
# Degree 2 (``AttentionConfig.exp2_poly_degree=2``, FP8 only): one FMA less,
# relative error < 2.1e-3 (minimax on [0, 1) with constant term 1, the
# coefficients rounded to f32), far below e4m3's 2^-4 rounding of P.
EXP2_POLY2_COEFFS = (1.0, 0.6659702062606812, 0.32991597056388855)
EXP2_POLY_MIN = -127.0
EXP2_ROUND_MAGIC = float(2 ** 23 + 2 ** 22)


class PolyIrOps:
    """The operations ``exp2_poly`` is written in, emitted as MLIR (the
    tests run the same formula on numpy with their own ops)."""

    @staticmethod
    def const(c):
        return to_value(float(c), f32())

    @staticmethod
    def maximum(a, b):
        return arith.maxnumf(a, b)

    @staticmethod
    def add_round_down(a, b):
        """``add.rm.f32``: the sum rounded toward -inf."""
        return llvm.call_intrinsic(f32(), "llvm.nvvm.add.rm.f", [a, b], [], [])

    sub = staticmethod(arith.subf)

    @staticmethod
    def fma(a, b, c):
        return llvm.intr_fma(a, b, c)

    @staticmethod
    def add_to_exponent(rounded, frac_pow):
        """The f32 whose bits are ``frac_pow``'s plus ``rounded``'s shifted
        left by 23 (its low bits: floor(x), into the exponent field)."""
        n = arith.shli(llvm.bitcast(i32(), rounded), to_value(23, i32()))
        return llvm.bitcast(f32(), arith.addi(llvm.bitcast(i32(), frac_pow), n))


def exp2_poly(x, ops=PolyIrOps, degree=3):
    """``2 ** x`` for x <= 0 without MUFU (the comment above); ``degree``
    3, or 2 (``EXP2_POLY2_COEFFS``: one FMA less)."""
    xc = ops.maximum(x, ops.const(EXP2_POLY_MIN))
    rounded = ops.add_round_down(xc, ops.const(EXP2_ROUND_MAGIC))
    f = ops.sub(xc, ops.sub(rounded, ops.const(EXP2_ROUND_MAGIC)))
    if degree == 2:
        c = EXP2_POLY2_COEFFS
        poly = ops.fma(ops.fma(ops.const(c[2]), f, ops.const(c[1])), f, ops.const(c[0]))
    else:
        c = EXP2_POLY_COEFFS
        poly = ops.fma(ops.fma(ops.fma(ops.const(c[3]), f, ops.const(c[2])), f,
                               ops.const(c[1])), f, ops.const(c[0]))
    return ops.add_to_exponent(rounded, poly)


def poly_slots(per_16):
    """Which of a thread's 16 consecutive values take ``exp2_poly``:
    ``per_16`` of them, spread evenly (so MUFU and FMA work interleave in
    the register order the compiler schedules from)."""
    return frozenset(i for i in range(POLY_SLOTS) if (i * per_16) % POLY_SLOTS < per_16)


def exponentials(x, per_16, degree=3):
    """``2 ** x`` of each value of the fragment ``x``: ``per_16`` of every
    16 by ``exp2_poly`` (of ``degree``), the others by ex2.approx."""
    if not per_16:
        return x.exp2()
    slots = poly_slots(per_16)
    return Fragment(x.n, values=[exp2_poly(v, degree=degree) if i % POLY_SLOTS in slots
                                 else exp2(v)
                                 for i, v in enumerate(x.values)])
