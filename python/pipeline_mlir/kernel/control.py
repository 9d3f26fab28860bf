"""Structured control flow for kernel bodies: loops, branches, elect_one.

- ``range_(n, carry=[...], unroll=None, unroll_full=False)``: one
  ``scf.for`` whose body the Python ``for`` statement traces once. Carried objects (pipeline states, producers,
  consumers, Scalars) are rebound *in place*: inside the body they hold the
  loop's iteration arguments, ``state.advance()`` rebinds them as usual, the
  final values are yielded, and after the loop they hold the ``scf.for``
  results. So CuTe DSL loops that mutate their states port unchanged. An
  object made before the loop that the body advances or sets without
  carrying it raises ScopeError naming the variable and the ``carry=`` fix
  (``for i, _ in k.range(n)`` traces the body so that it can).
- ``while_(valid, carry=[valid, ...])``: one ``scf.while``, its body traced
  the same way: carried objects are rebound in place, and an object the body
  updates without carrying it raises the same ScopeError.
- ``If(cond)``: ``scf.if`` as a context manager, with ``.else_()``.
- ``elect_one()``: ``nvvm.elect.sync`` + ``scf.if`` (one lane of the warp).
"""

import linecache
import re
import sys

import mlir.ir as ir
from mlir.dialects import nvvm, scf

from ..user_location import UserLine, _is_library_file
from .scope import LoopTrace, ScopeError, _loops, block_encloses, defining_block
from .values import Scalar, i1, i32, to_value


def _carriable(obj):
    if isinstance(obj, ir.Value):
        return Scalar(obj)
    if hasattr(obj, "_carry_values") and hasattr(obj, "_carry_rebind"):
        return obj
    raise TypeError(
        "carry=[...] takes pipeline states, PipelineProducer/PipelineConsumer, "
        f"PipelineOrder, Scalars or i32 values, got {type(obj).__name__}")


class _Carried:
    """The objects a loop or a branch carries: their SSA values, flattened
    in order (what the ``scf`` op takes and yields), and how to rebind the
    objects to a list of such values."""

    def __init__(self, carry):
        self.objs = [_carriable(c) for c in carry]
        self.counts, self.init = [], []
        for o in self.objs:
            vals = o._carry_values()
            self.counts.append(len(vals))
            self.init.extend(vals)

    def values(self):
        """The objects' current values (read where they are to be yielded:
        a Fragment packs its struct at the insertion point)."""
        return [v for o in self.objs for v in o._carry_values()]

    def rebind(self, values):
        values, pos = list(values), 0
        for o, n in zip(self.objs, self.counts):
            o._carry_rebind(values[pos:pos + n])
            pos += n

    def check_yield(self, final, block, where, nested_fix):
        """``final`` (to be yielded at the end of ``block``) keeps the
        types of ``init`` and is defined in ``block`` itself."""
        for v, a in zip(final, self.init):
            if v.type != a.type:
                raise TypeError(
                    f"a carried value changed type in {where}: {a.type} -> {v.type}; "
                    "an scf op yields the types it was given, so keep the object's "
                    "type (or make a new object after it)")
            if not block_encloses(defining_block(v), block):
                raise ScopeError(nested_fix)

    def end_loop_body(self, trace, body, caller, loop_name, carry_fix):
        """The values a loop body yields, read at its end (the insertion
        point still in ``body``), after checking that every object made
        before the loop and updated in ``trace`` is carried (ScopeError
        naming the caller's variable and ``carry_fix(name)``) and that
        the values keep their types and reach the body's end.

        The one check of ``range_`` and ``while_``: the body is traced
        once, so an uncarried update would leave the uses emitted before it
        reading the value from before the loop, and the object bound after
        the loop to a value of the ended body (a dominance error, later and
        at no line)."""
        final = self.values()
        for obj, before, verb in trace.updated.values():
            made_inside = all(block_encloses(body, defining_block(v)) for v in before)
            now = obj._carry_values()
            is_carried = all(any(v == f for f in final) for v in now)
            changed = any(block_encloses(body, defining_block(v)) for v in now)
            if not made_inside and changed and not is_carried:
                raise _uncarried_update_error(obj, verb, caller, loop_name, carry_fix)
        self.check_yield(
            final, body, "the loop body",
            "a carried object was last updated inside a nested region "
            "(an if-branch) of the loop body; its new value does not "
            "reach the end of the iteration. Update it in the loop "
            "body itself (e.g. advance the state outside the if), or carry "
            "it through the if too (`k.if_(cond, carry=[...])`)")
        return final


class _LoopTraced:
    """``with _LoopTraced(body) as trace:`` -- the updates that mutators
    note (scope.note_update) while a loop body is traced, for
    :meth:`_Carried.end_loop_body`."""

    def __init__(self, body):
        self.trace = LoopTrace(body)

    def __enter__(self):
        _loops.append(self.trace)
        return self.trace

    def __exit__(self, *exc):
        _loops.remove(self.trace)
        return False


class _NoCarry:
    """What ``for i, _ in k.range(n)`` binds to ``_`` when nothing is
    carried: unpacking it further fails with the fix."""

    def __iter__(self):
        raise TypeError(
            "k.range(...) was given no carry=[...], so there are no carried "
            "objects to unpack: list them, `for i, (state,) in "
            "k.range(n, carry=[state]):`")

    def __len__(self):
        return 0

    def __repr__(self):
        return "<nothing carried>"


class _LoopIndex(Scalar):
    """The induction variable of a loop without ``carry``. It also unpacks as
    ``(i, <nothing carried>)``, so that ``for i, _ in k.range(n):`` (the
    shape of a carrying loop) traces its body; a state the body advances
    without carrying it is then reported by name when the body ends."""

    def __iter__(self):
        return iter((self, _NoCarry()))


def _names_of(obj, frame):
    """[(name, text)] for the caller's variables bound to ``obj`` or to an
    object holding it as its state (a producer/consumer's PipelineState).
    The frames outward from ``frame`` are searched until one binds it: a
    loop written in a helper generator (a persistent kernel's ``work()``)
    is named in the frame that made the object."""
    found = []
    while frame is not None and not found:
        for scope in (frame.f_locals, frame.f_globals):
            for name, value in list(scope.items()):
                if name.startswith("__") or name in (n for n, _ in found):
                    continue
                if value is obj:
                    found.append((name, f"`{name}` ({obj!r})"))
                elif getattr(value, "_state", None) is obj:
                    found.append((name, f"`{name}` (a {type(value).__name__}; its state)"))
            if found:
                break
        frame = frame.f_back
    return found


def _uncarried_update_error(obj, verb, frame, loop_name, carry_fix):
    found = _names_of(obj, frame)
    if found:
        what = " / ".join(text for _, text in found)
        name = found[0][0]
    else:
        what = f"a {obj!r} made before the loop"
        name = "state"
    return ScopeError(
        f"{loop_name}: {what} is {verb} in the loop body but not carried by the "
        "loop, so each iteration would restart from its value before the "
        "loop (and after the loop it would hold a value of the ended body). "
        f"Carry it: `{carry_fix(name)}` (list "
        "every state, producer, consumer, PipelineOrder, Scalar, Fragment or "
        "RowVector that the body advances or sets; they are not carried "
        "automatically)")


def _range_fix(name):
    return f"for i, ({name},) in k.range(n, carry=[{name}]):"


def _is_pipeline_state(value):
    return str(value.type).startswith("!pipeline.state<")


def _loop_annotation(unroll, unroll_full, carries_states):
    """The ``llvm.loop_annotation`` for CuTe DSL's ``unroll``/``unroll_full``
    (None when LLVM may decide).

    ``unroll=1`` is ``llvm.loop.unroll.disable``, ``unroll=k`` a count,
    ``unroll_full=True`` a full unroll. By default a loop that carries a
    pipeline state is not unrolled: LLVM fully unrolls short constant-trip
    loops, which multiplies every verb's synchronization code by the trip
    count (a CuTe DSL kernel's 8-trip loop: 72 against 57 sync
    instructions) for no gain, the waits dominating each iteration.
    """
    if unroll is not None and unroll_full:
        raise ValueError("range: give unroll or unroll_full, not both")
    if unroll is not None and (isinstance(unroll, bool) or not isinstance(unroll, int)
                               or unroll < 1):
        raise ValueError(f"range: unroll must be an int >= 1, got {unroll!r}")
    if unroll_full:
        text = "full = true"
    elif unroll is None:
        if not carries_states:
            return None
        text = "disable = true"
    elif unroll == 1:
        text = "disable = true"
    else:
        text = f"count = {unroll}"
    # The Python bindings have no builder for LLVM loop attributes.
    return ir.Attribute.parse(f"#llvm.loop_annotation<unroll = <{text}>>")


# `for kt, (s,) in k.range(...)`: the first name the statement binds.
_FOR_TARGET = re.compile(r"\s*(?:async\s+)?for\s+\(?\s*([A-Za-z_][A-Za-z0-9_]*)")


def _induction_name():
    """The name the user's ``for`` statement gives the loop's induction
    variable (``for kt, (s,) in k.range(n)``: "kt"), or None (``_``, a
    loop built by library code, no source). The checker prints it for the
    loop's variable in its counts (``[kt ne 0]``, not ``[%iv ne 0]``)."""
    frame = sys._getframe(2)
    while frame is not None and _is_library_file(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    m = _FOR_TARGET.match(linecache.getline(frame.f_code.co_filename, frame.f_lineno))
    return m.group(1) if m and not m.group(1).startswith("_") else None


def range_(start, stop=None, step=1, *, carry=(), unroll=None, unroll_full=False):
    """``for i in range_(n)`` / ``for i, (a, b) in range_(n, carry=[a, b])``.

    Bounds are i32 (Python ints or values). Yields the induction variable as a
    Scalar, plus the tuple of carried objects when ``carry`` is given.

    Every object made before the loop that the body updates (a state it
    advances, a producer/consumer, a PipelineOrder, a Scalar it sets) must be
    in ``carry``; one that is not raises ScopeError naming it when the body
    ends. It is not carried automatically: the body is traced once, so the
    uses already emitted before the update would keep reading the value from
    before the loop.

    ``unroll`` / ``unroll_full`` as in CuTe DSL's ``cutlass.range`` (see
    :func:`_loop_annotation`; loops carrying pipeline states default to
    ``unroll=1``).
    """
    if stop is None:
        start, stop = 0, start
    lb = to_value(start, i32(), what="range start")
    ub = to_value(stop, i32(), what="range stop")
    st = to_value(step, i32(), what="range step")
    carried = _Carried(carry)
    objs, init, rebind = carried.objs, carried.init, carried.rebind

    with UserLine():  # diagnostics on the loop name the user's `for` line
        loop = scf.ForOp(lb, ub, st, init)
    annotation = _loop_annotation(unroll, unroll_full,
                                  any(_is_pipeline_state(v) for v in init))
    if annotation is not None:
        loop.operation.attributes["loop_annotation"] = annotation
    name = _induction_name()
    if name is not None:  # for messages only: scf-to-cf drops it
        loop.operation.attributes["pipeline.iv_name"] = ir.StringAttr.get(name)
    body = loop.body
    rebind(loop.inner_iter_args)
    with _LoopTraced(body) as trace, ir.InsertionPoint(body):
        if objs:
            yield Scalar(loop.induction_variable), tuple(objs)
        else:
            yield _LoopIndex(loop.induction_variable)
        # The body has been traced (the caller's `for` resumed us).
        final = carried.end_loop_body(trace, body, sys._getframe(1), "k.range",
                                      _range_fix)
        # At the user's `for` line: notes on the loop's yield point there.
        scf.YieldOp(final, loc=loop.location)
    rebind(loop.results)


class If:
    """``with If(cond):`` emits ``scf.if cond`` and builds its then-branch.

    ``with branch.else_():`` (on the object returned by ``with ... as``)
    builds the else-branch afterwards.

    ``If(cond, carry=[a, b])`` makes the ``scf.if`` yield values, the way
    ``k.range(carry=)`` carries them through a loop: each branch starts from
    the objects' values before the ``if``, may update them (``a += 1``,
    ``acc.set(...)``, ``row_max.set(...)``, a state's ``advance()``), and after
    the ``with`` blocks the objects hold the ``scf.if`` results (the then
    values where ``cond`` held, else the else-branch's, or the unchanged
    values when there is no else-branch). Causal masking and tails are
    written this way. An object updated in a branch without being carried
    holds the branch's value afterwards, usable only inside that branch (a
    role's state advanced inside its role branch needs no carry).
    """

    def __init__(self, cond, carry=()):
        c = cond
        if isinstance(c, bool):
            raise TypeError(
                "If(cond): cond is a Python bool; use a Python `if` for "
                "trace-time conditions")
        self._carried = _Carried(carry)
        self._objs, self._init = self._carried.objs, self._carried.init
        types = [v.type for v in self._init]
        with UserLine():  # role-region notes name the user's `with` line
            self.op = scf.IfOp(to_value(c, i1(), what="if condition"), types,
                               has_else=bool(self._objs))
        with ir.InsertionPoint(self.op.then_block):
            self._then_yield = scf.YieldOp(list(self._init))
        self._else_yield = None
        if self._objs:
            with ir.InsertionPoint(self.op.else_block):
                self._else_yield = scf.YieldOp(list(self._init))
        self._ip = None
        self._trace = None
        self._else_used = False

    def _open(self, yield_op):
        self._carried.rebind(self._init)
        self._trace = LoopTrace(yield_op.operation.block)
        _loops.append(self._trace)
        self._ip = ir.InsertionPoint(yield_op)
        self._ip.__enter__()

    def _close(self, yield_op, exc_type):
        # The branch's final values are read (and, for a Fragment, packed)
        # while the insertion point is still inside the branch.
        final = self._carried.values() if exc_type is None else []
        self._ip.__exit__(None, None, None)
        _loops.remove(self._trace)
        if exc_type is not None:
            return yield_op
        self._carried.check_yield(
            final, yield_op.operation.block, "the if-branch",
            "a carried object was last updated inside a nested region of "
            "this if-branch; its new value does not reach the branch's end. "
            "Carry it through the inner `if_` too (carry=[...])")
        if not self._objs:
            return yield_op
        with ir.InsertionPoint(yield_op):
            new = scf.YieldOp(final)
        yield_op.operation.erase()
        self._carried.rebind(self.op.results)
        return new

    def __enter__(self):
        self._open(self._then_yield)
        return self

    def __exit__(self, exc_type, *exc):
        self._then_yield = self._close(self._then_yield, exc_type)
        return False

    def else_(self):
        if self._else_used or (not self._objs and len(self.op.regions[1].blocks)):
            raise RuntimeError("this scf.if already has an else-branch")
        self._else_used = True
        if self._else_yield is None:
            block = self.op.regions[1].blocks.append()
            with ir.InsertionPoint(block):
                self._else_yield = scf.YieldOp([])
        return _ElseBranch(self)


class _ElseBranch:
    """The ``with branch.else_():`` context of an :class:`If`."""

    def __init__(self, branch):
        self._if = branch

    def __enter__(self):
        self._if._open(self._if._else_yield)
        return self

    def __exit__(self, exc_type, *exc):
        self._if._else_yield = self._if._close(self._if._else_yield, exc_type)
        return False


class _At:
    """Context manager: insert before ``op``."""

    def __init__(self, op):
        self._ip = ir.InsertionPoint(op)

    def __enter__(self):
        self._ip.__enter__()
        return self

    def __exit__(self, *exc):
        self._ip.__exit__(*exc)
        return False


def elect_one():
    """``with elect_one():`` -- the body runs in one lane of the warp."""
    return If(Scalar(nvvm.elect_sync(i1())))


def while_(cond, *, carry=()):
    """``for _ in while_(valid, carry=[valid, state, ...])``: an ``scf.while``
    that runs the body as long as the carried i1 Scalar ``valid`` is true
    (checked before each iteration, so possibly never). The body updates
    ``valid`` with ``valid.set(...)``. For loops whose trip count is known
    only at run time (cluster launch control hands out work until the grid
    is exhausted).

    Carried objects are rebound as in :func:`range_`, and checked the same
    way (``_Carried.end_loop_body``): every object made before the loop
    that the body updates must be in ``carry`` (ScopeError naming it at the
    caller's ``for`` line otherwise), and a carried value may not change
    type."""
    carried = _Carried(carry)
    objs, init, rebind = carried.objs, carried.init, carried.rebind
    if not any(o is cond for o in objs):
        raise ValueError("while_: the condition must be one of the carried "
                         "objects (carry=[valid, ...]), so the body can update it")
    if cond.ir_value.type != i1():
        raise TypeError(f"while_: the condition must be an i1, got {cond.ir_value.type}")
    # Where the condition sits among the flattened carried values.
    pos = sum(carried.counts[:next(i for i, o in enumerate(objs) if o is cond)])

    types = [v.type for v in init]
    with UserLine():  # diagnostics on the loop name the user's `for` line
        loop = scf.WhileOp(types, init)
    before = loop.before.blocks.append(*types)
    after = loop.after.blocks.append(*types)
    with ir.InsertionPoint(before):
        rebind(before.arguments)
        scf.ConditionOp(cond.ir_value, list(before.arguments), loc=loop.location)
    rebind(after.arguments)
    with _LoopTraced(after) as trace, ir.InsertionPoint(after):
        yield None
        # The body has been traced (the caller's `for` resumed us).
        caller = sys._getframe(1)

        def cond_name():
            found = _names_of(cond, caller)
            return found[0][0] if found else "valid"

        def carry_fix(name):
            c = cond_name()
            return f"for _ in k.while_({c}, carry=[{c}, ..., {name}]):"

        final = carried.end_loop_body(trace, after, caller, "k.while_", carry_fix)
        if final[pos] == after.arguments[pos]:
            # scf.while tests the value the body yields: the same one that
            # let the body run would let it run again, forever.
            c = cond_name()
            raise ValueError(
                f"k.while_: the body never sets the condition `{c}`, so a loop "
                "that runs once never ends. Set it in the body, e.g. "
                f"`{c}.set(more_work)` (k.if_(..., carry=[{c}]) carries it "
                "through a branch)")
        scf.YieldOp(final, loc=loop.location)
    rebind(loop.results)
