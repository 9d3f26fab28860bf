"""Runtime scalar values with Python operators.

A :class:`Scalar` wraps one ``i1``/``i32``/``i64`` or ``f32``/``f16``/``bf16``
SSA value so that kernel code reads like CuTe DSL code (``warp_idx == 0``,
``state.index * stage_bytes``, ``row_max * scale_log2``): each operator emits
one ``arith`` op at the current insertion point (``addi`` or ``addf`` by the
value's type). Python ints and floats on either side become
``arith.constant`` of the other side's type.

In-place operators (``x += y``, ``x *= y``, ...) rebind the Scalar itself, as
:meth:`Scalar.set` does: a Scalar carried by ``k.range(carry=[x])`` or
``k.if_(..., carry=[x])`` is updated the way a CuTe DSL user expects (the name
keeps denoting the carried value). Like a torch tensor and unlike a Python
int, every name bound to the same Scalar object sees the update.

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


def f32():
    return ir.F32Type.get()


def is_float_type(t):
    return isinstance(t, (ir.F32Type, ir.F16Type, ir.BF16Type, ir.F64Type))


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
    if isinstance(x, int) and not (type is not None and is_float_type(type)):
        return constant(x, type if type is not None else i32(), what)
    if isinstance(x, (int, float)):
        if type is None:
            type = f32()
        if not is_float_type(type):
            raise TypeError(f"{what}: a Python float ({x!r}) where an integer of "
                            f"type {type} is needed")
        return arith.constant(type, float(x))
    v = _as_value(x)
    if v is None:
        raise TypeError(
            f"{what}: expected a Python int or float or an MLIR value, got "
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
    """An integer or float SSA value with arithmetic and comparison
    operators. ``Scalar(1.5)`` is an f32 constant, ``Scalar(3)`` an i32."""

    # Comparisons return Scalars, so keep identity hashing.
    __hash__ = object.__hash__

    def __init__(self, value):
        v = to_value(value, what="Scalar")
        if _int_width(v.type) is None and not is_float_type(v.type):
            raise TypeError(f"Scalar wraps integer or float values, got {v.type}")
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

    @property
    def is_float(self):
        return is_float_type(self._value.type)

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

    def _other(self, o):
        return to_value(o, self.type, what="operand")

    def _bin(self, int_fn, float_fn, o, swap=False, name="operator"):
        if getattr(o, "_broadcasts_scalars", False):
            # A Fragment or RowVector: its reflected operator applies this
            # Scalar to each of its values (``scale * acc``).
            return NotImplemented
        a, b = self._value, self._other(o)
        if swap:
            a, b = b, a
        fn = float_fn if self.is_float else int_fn
        if fn is None:
            kind = "float" if self.is_float else "integer"
            raise TypeError(f"{name} is not defined on {kind} Scalars ({self.type})")
        return Scalar(fn(a, b))

    def _inplace(self, result):
        if not isinstance(result, Scalar):
            raise TypeError(f"a Scalar cannot hold a {type_name(result)}: write "
                            f"`y = x op y` with the {type_name(result)} on the left")
        note_update(self, "updated in place")
        self._value = result._value
        return self

    def __add__(self, o): return self._bin(arith.addi, arith.addf, o)
    def __radd__(self, o): return self._bin(arith.addi, arith.addf, o, True)
    def __sub__(self, o): return self._bin(arith.subi, arith.subf, o)
    def __rsub__(self, o): return self._bin(arith.subi, arith.subf, o, True)
    def __mul__(self, o): return self._bin(arith.muli, arith.mulf, o)
    def __rmul__(self, o): return self._bin(arith.muli, arith.mulf, o, True)
    def __truediv__(self, o): return self._bin(None, arith.divf, o, name="/")
    def __rtruediv__(self, o): return self._bin(None, arith.divf, o, True, name="/")
    def __floordiv__(self, o): return self._bin(arith.divsi, None, o, name="//")
    def __rfloordiv__(self, o): return self._bin(arith.divsi, None, o, True, name="//")
    def __mod__(self, o): return self._bin(arith.remsi, arith.remf, o)
    def __rmod__(self, o): return self._bin(arith.remsi, arith.remf, o, True)
    def __and__(self, o): return self._bin(arith.andi, None, o, name="&")
    def __rand__(self, o): return self._bin(arith.andi, None, o, True, name="&")
    def __or__(self, o): return self._bin(arith.ori, None, o, name="|")
    def __ror__(self, o): return self._bin(arith.ori, None, o, True, name="|")
    def __xor__(self, o): return self._bin(arith.xori, None, o, name="^")
    def __rxor__(self, o): return self._bin(arith.xori, None, o, True, name="^")
    def __lshift__(self, o): return self._bin(arith.shli, None, o, name="<<")
    def __rshift__(self, o): return self._bin(arith.shrsi, None, o, name=">>")

    def __iadd__(self, o): return self._inplace(self + o)
    def __isub__(self, o): return self._inplace(self - o)
    def __imul__(self, o): return self._inplace(self * o)
    def __itruediv__(self, o): return self._inplace(self / o)
    def __ifloordiv__(self, o): return self._inplace(self // o)
    def __imod__(self, o): return self._inplace(self % o)
    def __iand__(self, o): return self._inplace(self & o)
    def __ior__(self, o): return self._inplace(self | o)
    def __ixor__(self, o): return self._inplace(self ^ o)
    def __ilshift__(self, o): return self._inplace(self << o)
    def __irshift__(self, o): return self._inplace(self >> o)

    def __neg__(self):
        if self.is_float:
            return Scalar(arith.negf(self._value))
        return Scalar(arith.subi(constant(0, self.type), self._value))

    def __invert__(self):
        if self.is_float:
            raise TypeError("~ is not defined on float Scalars")
        # Logical not for i1, bitwise not otherwise.
        return Scalar(arith.xori(self._value, constant(-1, self.type)))

    _FLOAT_PREDICATES = {"eq": "OEQ", "ne": "UNE", "slt": "OLT", "sle": "OLE",
                         "sgt": "OGT", "sge": "OGE"}

    def _cmp(self, pred, o):
        if self.is_float:
            fpred = getattr(arith.CmpFPredicate, self._FLOAT_PREDICATES[pred])
            return Scalar(arith.cmpf(fpred, self._value, self._other(o)))
        return Scalar(arith.cmpi(getattr(arith.CmpIPredicate, pred), self._value,
                                 self._other(o)))

    def __eq__(self, o): return self._cmp("eq", o)
    def __ne__(self, o): return self._cmp("ne", o)
    def __lt__(self, o): return self._cmp("slt", o)
    def __le__(self, o): return self._cmp("sle", o)
    def __gt__(self, o): return self._cmp("sgt", o)
    def __ge__(self, o): return self._cmp("sge", o)

    def max(self, o):
        """The larger of the two (float: ``arith.maxnumf``, NaN-ignoring)."""
        return self._bin(arith.maxsi, arith.maxnumf, o)

    def min(self, o):
        return self._bin(arith.minsi, arith.minnumf, o)

    def select(self, if_true, if_false):
        """``arith.select`` on this i1 Scalar."""
        if self.width != 1:
            raise TypeError("select needs an i1 condition")
        t = to_value(if_true, what="select")
        f = to_value(if_false, t.type, what="select")
        return Scalar(arith.select(self._value, t, f))

    def to(self, width):
        """``to(64)``: sign-extend or truncate an integer to ``width`` bits.
        ``to("f32")`` (or "f16", "bf16", "i32", "i64"): convert by type name
        (``sitofp``, ``fptosi``, ``extf``/``truncf``)."""
        if isinstance(width, str):
            return self._to_named(width)
        if self.is_float:
            raise TypeError("to(width) converts integers; name the type of a float "
                            "conversion: to('f32'), to('i32')")
        t = ir.IntegerType.get_signless(width)
        if width == self.width:
            return self
        fn = arith.extsi if width > self.width else arith.trunci
        return Scalar(fn(t, self._value))

    def _to_named(self, name):
        types = {"f32": ir.F32Type.get, "f16": ir.F16Type.get, "bf16": ir.BF16Type.get,
                 "i32": i32, "i64": i64}
        if name not in types:
            raise ValueError(f"to: unknown type {name!r}; one of {sorted(types)}")
        t = types[name]()
        if t == self.type:
            return self
        if is_float_type(t):
            if not self.is_float:
                return Scalar(arith.sitofp(t, self._value))
            bits = {ir.F32Type: 32, ir.F16Type: 16, ir.BF16Type: 16, ir.F64Type: 64}
            if bits[type(t)] == bits[type(self.type)]:
                # bf16 <-> f16: no single op converts between two types of
                # one width; f32 holds both exactly.
                return self.to("f32").to(name)
            wider = bits[type(t)] > bits[type(self.type)]
            return Scalar((arith.extf if wider else arith.truncf)(t, self._value))
        if self.is_float:
            return Scalar(arith.fptosi(t, self._value))
        return self.to(t.width)
