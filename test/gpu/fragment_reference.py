"""Host side of the register-fragment GPU tests (test_gpu.py, ``-k fragment``):
torch references of every op of test/gpu/fragment_kernels.py, the bounds
they are held to, and the register layouts of the PTX ISA written out
independently of python/pipeline_mlir/kernel/fragment.py.

Bounds (``check``):
- "exact": bit for bit (IEEE add, sub, mul, div, max, min, select, the
  conversions, fills, the float Scalar chains, which have no multiply
  feeding an add and so no fma contraction);
- ("ulp", k): within k units in the last place of the f32 result, against
  an fp64 reference: ``ex2.approx.ftz.f32`` and ``rcp.approx.ftz.f32`` are
  approximate (PTX ISA: at most 2 ulp), the fused ``fma.rn.f32`` is
  correctly rounded (0.5 ulp, the fp64 reference's own error aside);
- "sum": a row sum reduced in a different order than the reference: within
  ``depth * 2**-24 * sum(|x|)``, depth the number of dependent additions
  (a pairwise tree over the thread's n / 4 values, then two shuffles).

Only torch is needed (no MLIR): this file and ptx_layouts.py run from the GPU
bundle.
"""

import math

import torch

import ptx_layouts

M = 64
THREADS = ptx_layouts.THREADS


# -- the PTX ISA layouts (ptx_layouts.py) as tensors ------------------------

def owner_tile(n):
    """The thread that holds each element of a 64 x n accumulator."""
    r = torch.arange(M).view(M, 1)
    c = torch.arange(n).view(1, n)
    return ptx_layouts.owner(r, c).float()


def operand_a_registers(q, bits):
    """Expected registers (slices, 4, 128) int32 of ``to_operand_a`` of the
    64 x n tile ``q`` (already of the 16- or 8-bit dtype): the elements
    ``ptx_layouts.a_register_elements`` names, lower columns in lower bits."""
    n = q.shape[1]
    raw = (q.contiguous().view(torch.int16 if bits == 16 else torch.uint8).long()
           & ((1 << bits) - 1)).tolist()
    slices = n // (8 * 32 // bits)
    out = [[[sum(raw[r][c] << (bits * e) for e, (r, c) in
                 enumerate(ptx_layouts.a_register_elements(T, s, j, bits)))
             for T in range(THREADS)] for j in range(4)] for s in range(slices)]
    out = torch.tensor(out, dtype=torch.int64)
    # as the kernel stores them: int32 words
    return torch.where(out >= 1 << 31, out - (1 << 32), out).to(torch.int32)


# -- fragment ops: name -> (reference(x, y, z, s), bound) -------------------

def _f(s):
    """s as an f32 0-d tensor (Scalar arithmetic rounds to f32 each step)."""
    return torch.tensor(s, dtype=torch.float32)


def _rowmax(t):
    return t.max(dim=1, keepdim=True).values


def _rows(n, pred):
    return pred(torch.arange(M).view(M, 1).expand(M, n))


def _cols(n, pred):
    return pred(torch.arange(n).view(1, n).expand(M, n))


def _scalar_math(s):
    return -(((_f(s) - 1.0) / _f(s) * 3.0).clamp(0.25, 100.0))


def _scalar_convert(s):
    s = _f(s)
    return s.bfloat16().float() + torch.trunc(s * 10.0)


def scalar_compare_bits(s):
    """The ``scalar_compare`` op's value: Python's float comparisons are
    IEEE's (ordered: false on NaN; ``!=`` unordered: true on NaN)."""
    s = float(_f(s))
    return float(sum(bit for bit, cond in ((1, s > 0.5), (2, s == s), (4, s != s),
                                           (8, s <= 0.5), (16, s < 0.5), (32, s >= 0.5))
                     if cond))


def _loop_carry(x):
    acc = torch.zeros_like(x)
    for _ in range(3):
        acc = acc + x
    return acc


def _full(x, v):
    return torch.full_like(x, float(v))


EXACT = "exact"
FRAGMENT_REFS = {
    "add": (lambda x, y, z, s: x + y, EXACT),
    "sub": (lambda x, y, z, s: x - y, EXACT),
    "mul": (lambda x, y, z, s: x * y, EXACT),
    "div": (lambda x, y, z, s: x / y, EXACT),
    "neg": (lambda x, y, z, s: -x, EXACT),
    "fma": (lambda x, y, z, s: x.double() * y.double() + z.double(), ("ulp", 0.5)),
    "maximum": (lambda x, y, z, s: torch.maximum(x, y), EXACT),
    "minimum": (lambda x, y, z, s: torch.minimum(x, y), EXACT),
    "exp2": (lambda x, y, z, s: torch.exp2(x.double()), ("ulp", 2)),
    "reciprocal": (lambda x, y, z, s: 1.0 / x.double(), ("ulp", 2)),
    "add_scalar": (lambda x, y, z, s: x + _f(s), EXACT),
    "rsub_float": (lambda x, y, z, s: 2.5 - x, EXACT),
    "mul_scalar": (lambda x, y, z, s: _f(s) * x, EXACT),
    "scale_rows": (lambda x, y, z, s: x * _rowmax(y), EXACT),
    "add_rows": (lambda x, y, z, s: x + _rowmax(y), EXACT),
    "rsub_rows": (lambda x, y, z, s: _rowmax(y) - x, EXACT),
    "where_causal": (lambda x, y, z, s: torch.where(
        torch.arange(M).view(M, 1) >= torch.arange(x.shape[1]).view(1, -1), x,
        torch.tensor(-math.inf)), EXACT),
    "where_fragment": (lambda x, y, z, s: torch.where(_cols(x.shape[1], lambda c: c % 3 != 0),
                                                      x, y), EXACT),
    "where_static": (lambda x, y, z, s: torch.where(_cols(x.shape[1], lambda c: c % 2 == 0),
                                                    x, z), EXACT),
    "where_rows": (lambda x, y, z, s: torch.where(_rows(x.shape[1], lambda r: r < 32), x,
                                                  _rowmax(y).expand_as(x)), EXACT),
    "zero": (lambda x, y, z, s: torch.zeros_like(x), EXACT),
    "fill": (lambda x, y, z, s: _full(x, _f(s)), EXACT),
    "full": (lambda x, y, z, s: _full(x, 1.5), EXACT),
    "inplace": (lambda x, y, z, s: ((x + y) - z) * _rowmax(y), EXACT),
    "thread": (lambda x, y, z, s: owner_tile(x.shape[1]), EXACT),
    "loop_carry": (lambda x, y, z, s: _loop_carry(x), EXACT),
    "if_carry": (lambda x, y, z, s: torch.where(
        _rows(x.shape[1], lambda r: r // 16 == 1), x * 2.0, x - 1.0), EXACT),
    "if_then_only": (lambda x, y, z, s: torch.where(
        _rows(x.shape[1], lambda r: r < 16), x + 100.0, x), EXACT),
    "loop_if_nested": (lambda x, y, z, s: (x + 1.0) + 1.0, EXACT),
    "scalar_math": (lambda x, y, z, s: _full(x, _scalar_math(s)), EXACT),
    "scalar_convert": (lambda x, y, z, s: _full(x, _scalar_convert(s)), EXACT),
    "scalar_compare": (lambda x, y, z, s: _full(x, scalar_compare_bits(s)), EXACT),
}


def _rm(t):
    return t.max(dim=1).values


ROW_REFS = {
    "row_max": (lambda x, y, z, s: _rm(x), EXACT),
    "row_sum": (lambda x, y, z, s: x.double().sum(dim=1), "sum"),
    "quad_sum": (lambda x, y, z, s: x.double().sum(dim=1), "sum"),
    "rv_exp2": (lambda x, y, z, s: torch.exp2(_rm(x).double()), ("ulp", 2)),
    "rv_reciprocal": (lambda x, y, z, s: 1.0 / _rm(x).double(), ("ulp", 2)),
    "rv_arith": (lambda x, y, z, s: ((_rm(x) + _rm(y)) - _rm(z)) * 0.5, EXACT),
    "rv_div_neg": (lambda x, y, z, s: -(_rm(x) / _rm(y)), EXACT),
    "rv_max_min": (lambda x, y, z, s: torch.minimum(torch.maximum(_rm(x), _rm(y)), _rm(z)),
                   EXACT),
    "rv_where": (lambda x, y, z, s: torch.where(torch.arange(M) < 20, _rm(x), _rm(y)), EXACT),
    "rv_full": (lambda x, y, z, s: torch.full((M,), float(_f(s) * 2.0)), EXACT),
    "rv_inplace": (lambda x, y, z, s: ((0.0 + _rm(x)) * 2.0) - _rm(y), EXACT),
    "rv_loop": (lambda x, y, z, s: (_rm(x) + 1.0) + 2.0, EXACT),
    "rv_if": (lambda x, y, z, s: torch.where(torch.arange(M) < 32, _rm(x) * 2.0, -_rm(x)),
              EXACT),
}

# With a NaN scale every op that reads s is NaN: only these are compared.
NAN_SAFE_WITHOUT_S = {"scalar_compare"}


def _ulp(ref32):
    """The f32 spacing at each reference value (of its binade)."""
    a = ref32.abs()
    return torch.nextafter(a, torch.tensor(math.inf)) - a


def check(name, got, ref, bound, x=None):
    """'' when ``got`` (f32) meets ``bound`` against ``ref``, else what is
    wrong (the worst element). ``x`` is the input of a "sum"."""
    got = got.cpu()
    if bound == EXACT:
        ref = ref.float()
        bad = got.view(torch.int32) != ref.view(torch.int32)
        if not bad.any():
            return ""
        i = bad.nonzero()[0].tolist()
        return (f"{name}: {int(bad.sum())} elements differ from the reference, first at "
                f"{i}: got {got[tuple(i)].item()!r}, want {ref[tuple(i)].item()!r}")
    ref = ref.double()
    err = (got.double() - ref).abs()
    if bound == "sum":
        n = x.shape[1]
        depth = math.ceil(math.log2(max(n // 4, 1))) + 2
        limit = depth * 2.0 ** -24 * x.double().abs().sum(dim=1)
        if got.dim() > 1:
            limit = limit.view(-1, *([1] * (got.dim() - 1)))
        what = f"{depth} * 2^-24 * sum|x|"
    else:
        k = bound[1]
        limit = k * _ulp(ref.float()).double() * (1 + 1e-9)
        what = f"{k} ulp"
    bad = err > limit
    if not bad.any():
        return ""
    i = bad.nonzero()[0].tolist()
    return (f"{name}: {int(bad.sum())} elements beyond {what}, first at {i}: got "
            f"{got[tuple(i)].item()!r}, want {ref[tuple(i)].item()!r}")


# -- conversions ----------------------------------------------------------------

# to_packed / to_operand_a dtype -> (torch dtype, largest finite value: the
# satfinite conversions clamp to it, torch's make NaN (e4m3fn) or inf).
CONVERSIONS = {
    "bf16": (torch.bfloat16, None),
    "f16": (torch.float16, None),
    "e4m3": (torch.float8_e4m3fn, 448.0),
    "e5m2": (torch.float8_e5m2, 57344.0),
}


def convert(x, dtype):
    """torch's conversion of f32 ``x`` to ``dtype`` (round to nearest even),
    saturating to the largest finite value for the fp8 types as
    ``cvt.rn.satfinite`` does."""
    t, most = CONVERSIONS[dtype]
    if most is not None:
        x = x.clamp(-most, most)
    return x.to(t)


def conversion_input(n, gen):
    """A 64 x n f32 tile for the conversion tests: gaussians scaled by
    2^-14 .. 2^12 (subnormal fp8/f16 results, fp8 values beyond the largest
    finite, which saturate), and in row 0 exact ties of each format
    (round to nearest even decides them) and signed zeros."""
    x = torch.randn(M, n, generator=gen) * torch.exp2(
        torch.randint(-14, 13, (M, n), generator=gen).float())
    specials = [1 + 2 ** -8, 1 + 3 * 2 ** -8,           # bf16 ties (to even: 1, 1 + 2^-6)
                1 + 2 ** -11, 1 + 3 * 2 ** -11,         # f16 ties
                1 + 2 ** -4, 1 + 3 * 2 ** -4,           # e4m3 ties
                1 + 2 ** -3, 1 + 3 * 2 ** -3,           # e5m2 ties
                464.0, -1e6, 0.0, -0.0, 2 ** -10, -(2 ** -17)]
    x[0, :len(specials)] = torch.tensor(specials)
    return x
