"""Evaluating the scalar ops of a kernel for the interpreter (interp.py):
integer arithmetic and comparisons at their bit widths, pointer
arithmetic over shared-memory offsets and pointer arguments' bases, and
``shfl.sync``. Values are as ``frontend.py`` describes them: ints,
:data:`~.frontend.UNKNOWN`, and lane vectors (:class:`~.frontend.Lanes`).
"""

from __future__ import annotations

import functools

from .frontend import UNKNOWN, Lanes

# -- evaluation ---------------------------------------------------------------

def _lanes_of(mask: int) -> list[int]:
    return [i for i in range(32) if mask >> i & 1]


def _map(f, *xs):
    """Apply f to scalars, elementwise to lane vectors; UNKNOWN propagates."""
    if any(isinstance(x, Lanes) for x in xs):
        cols = [x if isinstance(x, Lanes) else (x,) * 32 for x in xs]
        # One lane at a time, inline (the lanes of a vector are scalars):
        # the causal attention's mask evaluates millions of them.
        r = Lanes(UNKNOWN if any(v is UNKNOWN or not isinstance(v, int) for v in vals)
                  else f(*vals) for vals in zip(*cols))
        # The same value in every lane (a warp index, a shared-memory
        # address or descriptor computed from one) is a scalar: what is
        # computed from it then costs one evaluation, not 32.
        return r[0] if r.count(r[0]) == 32 else r
    if any(x is UNKNOWN or not isinstance(x, int) for x in xs):
        return UNKNOWN
    return f(*xs)


def _gep(p, i, size: int, iw: int):
    """``getelementptr p[i]`` over elements of ``size`` bytes (``i`` an
    ``iw``-bit index): the shared-memory addresses of plain stores, so a
    lane-wise loop without _map's per-lane checks (UNKNOWN raises)."""
    half, full = 1 << (iw - 1), 1 << iw
    try:
        if type(p) is int and type(i) is int:
            return p + size * (i - full if i >= half else i)
        ps = p if isinstance(p, Lanes) else (p,) * 32
        ins = i if isinstance(i, Lanes) else (i,) * 32
        r = Lanes([x + size * (y - full if y >= half else y) for x, y in zip(ps, ins)])
        return r[0] if r.count(r[0]) == 32 else r
    except TypeError:
        return _map(lambda x, y: x + size * _signed(y, iw), p, i)


def _signed(x: int, w: int) -> int:
    return x - (1 << w) if x >> (w - 1) & 1 else x


@functools.lru_cache(maxsize=None)
def _cmp(pred: int, w: int):
    s = lambda x: _signed(x, w)  # noqa: E731
    return [lambda x, y: x == y, lambda x, y: x != y,
            lambda x, y: s(x) < s(y), lambda x, y: s(x) <= s(y),
            lambda x, y: s(x) > s(y), lambda x, y: s(x) >= s(y),
            lambda x, y: x < y, lambda x, y: x <= y, lambda x, y: x > y, lambda x, y: x >= y][pred]


@functools.lru_cache(maxsize=None)
def _binop(name: str, w: int, iw: int):
    m = (1 << w) - 1
    s = lambda x: _signed(x, iw)  # noqa: E731

    def sdiv(x, y):
        q = abs(s(x)) // abs(s(y))
        return q if (s(x) < 0) == (s(y) < 0) else -q

    def by_nonzero(f):
        # An integer division by zero does not trap on the GPU: PTX leaves
        # its result unspecified. The simulator does not guess one: the
        # value is unknown (a branch or bound on it is then "cannot
        # evaluate", and the CLI tries other argument values).
        return lambda x, y: UNKNOWN if y == 0 else f(x, y)
    return {
        "arith.addi": lambda x, y: (x + y) & m, "arith.subi": lambda x, y: (x - y) & m,
        "arith.muli": lambda x, y: (x * y) & m, "arith.divui": by_nonzero(lambda x, y: x // y),
        "arith.remui": by_nonzero(lambda x, y: x % y), "arith.andi": lambda x, y: x & y,
        "arith.ori": lambda x, y: x | y, "arith.xori": lambda x, y: x ^ y,
        "arith.shli": lambda x, y: (x << y) & m, "arith.shrui": lambda x, y: x >> y,
        "arith.shrsi": lambda x, y: (s(x) >> y) & m,
        "arith.divsi": by_nonzero(lambda x, y: sdiv(x, y) & m),
        "arith.remsi": by_nonzero(lambda x, y: (s(x) - sdiv(x, y) * s(y)) & m),
        "arith.minui": min, "arith.maxui": max,
        "arith.minsi": lambda x, y: x if s(x) <= s(y) else y,
        "arith.maxsi": lambda x, y: x if s(x) >= s(y) else y,
        "arith.ceildivui": by_nonzero(lambda x, y: -(-x // y)),
    }.get(name)


def _shuffle(kind: str, val, b, c):
    """``shfl.sync`` by the PTX rule (source lane from b and the clamp/segment
    operand c); kernels use it to make the warp index warp-uniform, so a
    result that is the same in every lane comes back as a scalar."""
    if any(x is UNKNOWN for x in (b, c)) or isinstance(c, Lanes):
        return UNKNOWN
    bs = b if isinstance(b, Lanes) else (b,) * 32
    vs = val if isinstance(val, Lanes) else (val,) * 32
    seg, clamp = (c >> 8) & 31, c & 31
    out = []
    for lane in range(32):
        bv = bs[lane]
        if bv is UNKNOWN:
            return UNKNOWN
        top = (lane & seg) | (clamp & ~seg)
        j, ok = {"up": (lane - bv, lane - bv >= top),
                 "down": (lane + bv, lane + bv <= top),
                 "bfly": (lane ^ bv, (lane ^ bv) <= top),
                 "idx": ((lane & seg) | (bv & 31 & ~seg), ((lane & seg) | (bv & 31 & ~seg)) <= top),
                 }[kind]
        out.append(vs[j] if ok else vs[lane])
    if all(x == out[0] and type(x) is type(out[0]) for x in out):
        return out[0]
    return Lanes(out)

