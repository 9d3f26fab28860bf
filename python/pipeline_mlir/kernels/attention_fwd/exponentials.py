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


# The polynomial on pairs of values as f16 (``AttentionConfig.exp2_poly_half``,
# FP8 without the FMA pipe's row sum): one f16x2 instruction per step for two
# values of P. x rounded to f16 and clamped at -14.5 (below 2^-14 e4m3 has
# nothing: its smallest value is 2^-9); n = round(x) from an add onto
# 2^10 + 15, where the ulp is 1: that sum's 5 low mantissa bits are 15 + n,
# the f16 exponent field of 2^n; f = x - n in [-1/2, 1/2]; 2^f by a degree-2
# polynomial in f16 arithmetic (coefficients exact in f16: relative error
# < 2.2e-3 in exact arithmetic, < 3e-3 with f16's rounding of each step, far
# below e4m3's 2^-4 rounding of P); n added to its exponent field as an
# integer on both halves at once (each half's result >= 0, so no borrow
# crosses them). Masked (-inf) values become 2^-14.5 at most before the
# conversion to e4m3, which rounds them to 0 as it does every value below
# 2^-10. Exponents above 15 are outside its range (the softmax's are <= 8,
# the rescale threshold).
EXP2_HALF_COEFFS = (1.0, 0.703125, 0.2388916015625)
EXP2_HALF_MIN = -14.5
EXP2_HALF_MAGIC = 1039.0                 # 2^10 + 15
F16_EXPONENT_LOW5 = 0x001F001F           # the sum's 5 low mantissa bits, both halves
F16_BIAS_BITS = 0x3C003C00               # 15 << 10 in both halves: the bias of 2^n


def _f16x2_bits(c):
    """Both halves of an f16x2 register set to ``c`` (exact in f16)."""
    import numpy as np

    h = int(np.float16(c).view(np.uint16))
    if float(np.float16(c)) != c:
        raise ValueError(f"exp2_poly_half: {c} is not exact in f16")
    return h | h << 16


def _asm(text, *args):
    """One f16x2 instruction as inline PTX on b32 registers (LLVM would
    otherwise widen f16x2 min/max to f32 and back)."""
    constraints = ",".join(["=r"] + ["r"] * len(args))
    return llvm.inline_asm(i32(), list(args), text, constraints, has_side_effects=False)


class HalfIrOps:
    """The operations ``exp2_poly_half`` is written in: f16x2 instructions
    on b32 registers (inline PTX) and i32 arithmetic (the tests run the same
    formula on numpy with their own ops)."""

    @staticmethod
    def pack(x0, x1):
        """x0 (the low half) and x1 rounded to f16."""
        return _asm("cvt.rn.f16x2.f32 $0, $2, $1;", x0, x1)

    @staticmethod
    def const(c):
        return to_value(_f16x2_bits(c), i32())

    @staticmethod
    def maximum(a, b):
        return _asm("max.f16x2 $0, $1, $2;", a, b)

    @staticmethod
    def add(a, b):
        return _asm("add.rn.f16x2 $0, $1, $2;", a, b)

    @staticmethod
    def sub(a, b):
        return _asm("sub.rn.f16x2 $0, $1, $2;", a, b)

    @staticmethod
    def fma(a, b, c):
        return _asm("fma.rn.f16x2 $0, $1, $2, $3;", a, b, c)

    @staticmethod
    def add_to_exponents(rounded, frac_pow):
        """The i32 whose halves are ``frac_pow``'s halves with ``rounded``'s
        5 low mantissa bits (15 + n) added to their exponent fields, less
        the bias: 2^f 2^n in both halves."""
        n = arith.andi(rounded, to_value(F16_EXPONENT_LOW5, i32()))
        q = arith.addi(frac_pow, arith.shli(n, to_value(10, i32())))
        return arith.subi(q, to_value(F16_BIAS_BITS, i32()))


def exp2_poly_half(x0, x1, ops=HalfIrOps):
    """``2 ** x0`` and ``2 ** x1`` for x <= 15 as one f16x2 (x0 the low half),
    without MUFU (the comment above): an i32 from ``HalfIrOps``."""
    h = ops.maximum(ops.pack(x0, x1), ops.const(EXP2_HALF_MIN))
    rounded = ops.add(h, ops.const(EXP2_HALF_MAGIC))
    f = ops.sub(h, ops.sub(rounded, ops.const(EXP2_HALF_MAGIC)))
    c = EXP2_HALF_COEFFS
    poly = ops.fma(ops.fma(ops.const(c[2]), f, ops.const(c[1])), f, ops.const(c[0]))
    return ops.add_to_exponents(rounded, poly)


HALF_WINDOW = 2 * POLY_SLOTS      # exp2_poly_half spreads its pairs over 32 values


def half_pair_slots(per_16):
    """``exp2_poly_half``: the first value (even, mod ``HALF_WINDOW``) of
    each pair a thread's 32 consecutive values compute on f16x2: ``per_16``
    of its 16 pairs, spread evenly (``per_16`` of every 16 values, odd
    counts included; for an even count the same pairs as ``per_16 / 2`` of
    every 8 pairs of 16 values, repeated)."""
    pairs = HALF_WINDOW // 2
    return frozenset(2 * i for i in range(pairs) if (i * per_16) % pairs < per_16)


class HalfSumIrOps:
    """The operations ``half_row_sums`` is written in, emitted as MLIR (the
    tests run the same sums on numpy with their own ops)."""

    add_f32 = staticmethod(arith.addf)
    add_f16x2 = staticmethod(HalfIrOps.add)

    @staticmethod
    def bits(v):
        """An f16x2 pair's register (carried as an f32 value) as b32."""
        return llvm.bitcast(i32(), v)

    @staticmethod
    def half_to_f32(bits, half):
        """Half ``half`` (0: the low one) of the f16x2 ``bits`` as f32 (exact)."""
        return llvm.inline_asm(f32(), [bits],
                               "{ .reg .f16 lo, hi; mov.b32 {lo, hi}, $1; cvt.f32.f16 $0, "
                               f"{'hi' if half else 'lo'}; }}", "=f,r", has_side_effects=False)


def half_row_sums(values, per_16, ops=HalfSumIrOps):
    """The thread's partial sums of its two rows ([row 0, row 1], as
    ``Fragment.row_sum_partial``) of ``exponentials(x, per_16, half=True)``'s
    ``values``: the f32 ones added in f32 (a pairwise tree), each row's
    f16x2 pairs added on f16x2 (one ``add.rn.f16x2`` a pair, a pairwise
    tree: each half sums at most 24 values of at most 2^8, the rescale
    threshold, a 192-key block: 6144, far inside f16's 65504; each add
    rounded to f16's 11 bits, at most 5 adds deep), whose two halves are
    then converted to f32 and added to the row's f32 sum. For the configurations that return
    the LSE (no row sum on the tensor pipe)."""
    first = half_pair_slots(per_16)
    rows = []
    for row in range(2):
        # Value i belongs to row (i // 2) % 2 (``Fragment._row_reduce``).
        idx = [i for i in range(0, len(values), 2) if (i // 2) % 2 == row]
        f32s = [w for i in idx if i % HALF_WINDOW not in first
                for w in (values[i], values[i + 1])]
        pairs = [ops.bits(values[i]) for i in idx if i % HALF_WINDOW in first]
        total = tree(f32s, ops.add_f32) if f32s else None
        if pairs:
            acc = tree(pairs, ops.add_f16x2)
            for half in range(2):
                h = ops.half_to_f32(acc, half)
                total = h if total is None else ops.add_f32(total, h)
        rows.append(total)
    return rows


def tree(vals, fn):
    """``fn`` over ``vals`` as a pairwise tree (log2 n dependent steps)."""
    vals = list(vals)
    while len(vals) > 1:
        nxt = [fn(vals[j], vals[j + 1]) for j in range(0, len(vals) - 1, 2)]
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


def poly_slots(per_16):
    """Which of a thread's 16 consecutive values take ``exp2_poly``:
    ``per_16`` of them, spread evenly (so MUFU and FMA work interleave in
    the register order the compiler schedules from)."""
    return frozenset(i for i in range(POLY_SLOTS) if (i * per_16) % POLY_SLOTS < per_16)


def exponentials(x, per_16, degree=3, half=False):
    """``2 ** x`` of each value of the fragment ``x``: ``per_16`` of every
    16 by ``exp2_poly`` (of ``degree``), the others by ex2.approx. With
    ``half`` the polynomial's values come in pairs (``half_pair_slots``),
    each pair one f16x2 from ``exp2_poly_half``, its bits (as f32) in both
    values of the pair: only an 8-bit operand made from those pairs
    (``mainloop.pack_merged``) may read them."""
    if not per_16:
        return x.exp2()
    if half:
        first = half_pair_slots(per_16)
        out = []
        v = x.values
        for i in range(0, len(v), 2):
            if i % HALF_WINDOW in first:
                bits = llvm.bitcast(f32(), exp2_poly_half(v[i], v[i + 1]))
                out += [bits, bits]
            else:
                out += [exp2(v[i]), exp2(v[i + 1])]
        return Fragment(x.n, values=out)
    slots = poly_slots(per_16)
    return Fragment(x.n, values=[exp2_poly(v, degree=degree) if i % POLY_SLOTS in slots
                                 else exp2(v)
                                 for i, v in enumerate(x.values)])
