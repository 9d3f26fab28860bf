"""Runtime integer values with Python operators.

A :class:`Scalar` wraps one ``i1``/``i32``/``i64`` SSA value so that kernel code
reads like CuTe DSL code (``warp_idx == 0``, ``state.index * stage_bytes``):
each operator emits one ``arith`` op at the current insertion point. Python
ints on either side become ``arith.constant`` of the other side's type.

A Scalar is a runtime value, so ``bool(s)`` raises: branch on it with
``k.if_(s)`` instead of ``if s:``.
"""

import mlir.ir as ir
from mlir.dialects import arith

from .scope import note_update


def i1():
    return ir.IntegerType.get_signless(1)


def i32():
    return ir.IntegerType.get_signless(32)


def i64():
    return ir.IntegerType.get_signless(64)


def _as_value(x):
    """The ir.Value behind ``x`` (a Value, a one-result op, or a wrapper)."""
    if isinstance(x, ir.Value):
        return x
    inner = getattr(x, "ir_value", None)
    if isinstance(inner, ir.Value):
        return inner
    if isinstance(x, (ir.OpView, ir.Operation)) and len(x.results) == 1:
        return x.results[0]
    return None


def constant(value, type, what="value"):
    """``arith.constant`` of ``type`` (bools become i1 0/1).

    A Python int that does not fit the integer type raises ValueError here,
    naming ``what``, instead of a native-layer error about C++ signatures.
    """
    width = _int_width(type)
    value = int(value)
    if width is not None and width > 1 and not (
            -(1 << (width - 1)) <= value < (1 << width)):
        raise ValueError(f"{what}: {value} does not fit in i{width}")
    return arith.constant(type, value)


def to_value(x, type=None, what="value"):
    """Convert ``x`` (int, bool, Value, Scalar, one-result op) to an ir.Value.

    Python ints/bools become ``arith.constant`` of ``type`` (default i32, i1
    for bools). An SSA value must already have ``type`` when one is given.
    """
    if isinstance(x, bool):
        return constant(x, type if type is not None else i1(), what)
    if isinstance(x, int):
        return constant(x, type if type is not None else i32(), what)
    v = _as_value(x)
    if v is None:
        raise TypeError(
            f"{what}: expected a Python int or an MLIR value, got "
            f"{type_name(x)}")
    if type is not None and v.type != type:
        raise TypeError(f"{what}: expected a value of type {type}, got {v.type}")
    return v


def type_name(x):
    return type(x).__name__


def _int_width(t):
    if not isinstance(t, ir.IntegerType):
        return None
    return t.width


class Scalar:
    """An integer SSA value with arithmetic and comparison operators."""

    # Comparisons return Scalars, so keep identity hashing.
    __hash__ = object.__hash__

    def __init__(self, value):
        v = to_value(value, what="Scalar")
        if _int_width(v.type) is None:
            raise TypeError(f"Scalar wraps integer values, got {v.type}")
        self._value = v

    @property
    def ir_value(self):
        """The wrapped ``mlir.ir.Value``."""
        return self._value

    value = ir_value

    @property
    def type(self):
        return self._value.type

    @property
    def width(self):
        return _int_width(self._value.type)

    # Loop-carried protocol (see kernel.control.range_): a carried Scalar is
    # rebound in place to the loop's block argument, then to its result.
    def _carry_values(self):
        return [self._value]

    def _carry_rebind(self, values):
        (self._value,) = values

    def set(self, value):
        """Rebind this Scalar to ``value`` (of the same type): how a
        loop-carried accumulator is updated (``total.set(total + x)``)."""
        v = to_value(value, self.type, what="Scalar.set")
        note_update(self, "set")
        self._value = v

    def __repr__(self):
        return f"Scalar({self._value})"

    def __bool__(self):
        raise TypeError(
            "a Scalar is a runtime value and has no Python truth value; "
            "branch with `with k.if_(cond):` instead of `if cond:`")

    def __index__(self):
        # Python's range(n), list indexing, ... land here.
        raise TypeError(
            "a Scalar is a runtime value, not a Python int: for a loop over a "
            "run-time bound use `for i in k.range(n):` (an scf.for), not "
            "Python's range(n)")

    # `total += v` updates this Scalar in place (through `set`), as CuTe DSL
    # users expect of a loop-carried accumulator: a carried Scalar yields the
    # new value, and one the loop does not carry is reported by k.range with
    # the carry= fix. (Without these, Python would rebind the name to a value
    # of the loop body, which is invalid after the loop.)
    def _update(self, result):
        self.set(result)
        return self

    def __iadd__(self, o): return self._update(self + o)
    def __isub__(self, o): return self._update(self - o)
    def __imul__(self, o): return self._update(self * o)
    def __ifloordiv__(self, o): return self._update(self // o)
    def __imod__(self, o): return self._update(self % o)
    def __iand__(self, o): return self._update(self & o)
    def __ior__(self, o): return self._update(self | o)
    def __ixor__(self, o): return self._update(self ^ o)
    def __ilshift__(self, o): return self._update(self << o)
    def __irshift__(self, o): return self._update(self >> o)

    def _other(self, o):
        return to_value(o, self.type, what="operand")

    def _bin(self, fn, o, swap=False):
        a, b = self._value, self._other(o)
        if swap:
            a, b = b, a
        return Scalar(fn(a, b))

    def __add__(self, o): return self._bin(arith.addi, o)
    def __radd__(self, o): return self._bin(arith.addi, o, True)
    def __sub__(self, o): return self._bin(arith.subi, o)
    def __rsub__(self, o): return self._bin(arith.subi, o, True)
    def __mul__(self, o): return self._bin(arith.muli, o)
    def __rmul__(self, o): return self._bin(arith.muli, o, True)
    def __floordiv__(self, o): return self._bin(arith.divsi, o)
    def __rfloordiv__(self, o): return self._bin(arith.divsi, o, True)
    def __mod__(self, o): return self._bin(arith.remsi, o)
    def __rmod__(self, o): return self._bin(arith.remsi, o, True)
    def __and__(self, o): return self._bin(arith.andi, o)
    def __rand__(self, o): return self._bin(arith.andi, o, True)
    def __or__(self, o): return self._bin(arith.ori, o)
    def __ror__(self, o): return self._bin(arith.ori, o, True)
    def __xor__(self, o): return self._bin(arith.xori, o)
    def __rxor__(self, o): return self._bin(arith.xori, o, True)
    def __lshift__(self, o): return self._bin(arith.shli, o)
    def __rshift__(self, o): return self._bin(arith.shrsi, o)

    def __neg__(self):
        return Scalar(arith.subi(constant(0, self.type), self._value))

    def __invert__(self):
        # Logical not for i1, bitwise not otherwise.
        return Scalar(arith.xori(self._value, constant(-1, self.type)))

    def _cmp(self, pred, o):
        return Scalar(arith.cmpi(pred, self._value, self._other(o)))

    def __eq__(self, o): return self._cmp(arith.CmpIPredicate.eq, o)
    def __ne__(self, o): return self._cmp(arith.CmpIPredicate.ne, o)
    def __lt__(self, o): return self._cmp(arith.CmpIPredicate.slt, o)
    def __le__(self, o): return self._cmp(arith.CmpIPredicate.sle, o)
    def __gt__(self, o): return self._cmp(arith.CmpIPredicate.sgt, o)
    def __ge__(self, o): return self._cmp(arith.CmpIPredicate.sge, o)

    def select(self, if_true, if_false):
        """``arith.select`` on this i1 Scalar."""
        if self.width != 1:
            raise TypeError("select needs an i1 condition")
        t = to_value(if_true, what="select")
        f = to_value(if_false, t.type, what="select")
        return Scalar(arith.select(self._value, t, f))

    def to(self, width):
        """Sign-extend or truncate to ``width`` bits."""
        t = ir.IntegerType.get_signless(width)
        if width == self.width:
            return self
        fn = arith.extsi if width > self.width else arith.trunci
        return Scalar(fn(t, self._value))
