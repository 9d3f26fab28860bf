"""Structured control flow for kernel bodies: loops, branches, elect_one.

- ``range_(n, carry=[...], unroll=None, unroll_full=False)``: one
  ``scf.for`` whose body the Python ``for`` statement traces once. Carried objects (pipeline states, producers,
  consumers, Scalars) are rebound *in place*: inside the body they hold the
  loop's iteration arguments, ``state.advance()`` rebinds them as usual, the
  final values are yielded, and after the loop they hold the ``scf.for``
  results. So CuTe DSL loops that mutate their states port unchanged.
- ``If(cond)``: ``scf.if`` as a context manager, with ``.else_()``.
- ``elect_one()``: ``nvvm.elect.sync`` + ``scf.if`` (one lane of the warp).
"""

import mlir.ir as ir
from mlir.dialects import nvvm, scf

from .scope import ScopeError, block_encloses, defining_block
from .values import Scalar, i1, i32, to_value


def _carriable(obj):
    if isinstance(obj, ir.Value):
        return Scalar(obj)
    if hasattr(obj, "_carry_values") and hasattr(obj, "_carry_rebind"):
        return obj
    raise TypeError(
        "carry=[...] takes pipeline states, PipelineProducer/PipelineConsumer, "
        f"PipelineOrder, Scalars or i32 values, got {type(obj).__name__}")


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


def range_(start, stop=None, step=1, *, carry=(), unroll=None, unroll_full=False):
    """``for i in range_(n)`` / ``for i, (a, b) in range_(n, carry=[a, b])``.

    Bounds are i32 (Python ints or values). Yields the induction variable as a
    Scalar, plus the tuple of carried objects when ``carry`` is given.
    ``unroll`` / ``unroll_full`` as in CuTe DSL's ``cutlass.range`` (see
    :func:`_loop_annotation`; loops carrying pipeline states default to
    ``unroll=1``).
    """
    if stop is None:
        start, stop = 0, start
    lb = to_value(start, i32(), what="range start")
    ub = to_value(stop, i32(), what="range stop")
    st = to_value(step, i32(), what="range step")
    objs = [_carriable(c) for c in carry]
    counts = []
    init = []
    for o in objs:
        vals = o._carry_values()
        counts.append(len(vals))
        init.extend(vals)

    def rebind(values):
        values = list(values)
        pos = 0
        for o, n in zip(objs, counts):
            o._carry_rebind(values[pos:pos + n])
            pos += n

    loop = scf.ForOp(lb, ub, st, init)
    annotation = _loop_annotation(unroll, unroll_full,
                                  any(_is_pipeline_state(v) for v in init))
    if annotation is not None:
        loop.operation.attributes["loop_annotation"] = annotation
    body = loop.body
    rebind(loop.inner_iter_args)
    with ir.InsertionPoint(body):
        iv = Scalar(loop.induction_variable)
        yield (iv, tuple(objs)) if objs else iv
        final = []
        for o in objs:
            final.extend(o._carry_values())
        for v, a in zip(final, init):
            if v.type != a.type:
                raise TypeError(
                    f"a carried value changed type in the loop body: {a.type} "
                    f"-> {v.type}")
            if not block_encloses(defining_block(v), body):
                raise ScopeError(
                    "a carried object was last updated inside a nested region "
                    "(an if-branch) of the loop body; its new value does not "
                    "reach the end of the iteration. Update it in the loop "
                    "body itself (e.g. advance the state outside the if)")
        scf.YieldOp(final)
    rebind(loop.results)


class If:
    """``with If(cond):`` emits ``scf.if cond`` and builds its then-branch.

    ``with branch.else_():`` (on the object returned by ``with ... as``)
    builds the else-branch afterwards.
    """

    def __init__(self, cond):
        c = cond
        if isinstance(c, bool):
            raise TypeError(
                "If(cond): cond is a Python bool; use a Python `if` for "
                "trace-time conditions")
        self.op = scf.IfOp(to_value(c, i1(), what="if condition"), [],
                           has_else=False)
        with ir.InsertionPoint(self.op.then_block):
            self._then_yield = scf.YieldOp([])
        self._ip = None

    def __enter__(self):
        self._ip = ir.InsertionPoint(self._then_yield)
        self._ip.__enter__()
        return self

    def __exit__(self, *exc):
        self._ip.__exit__(*exc)
        return False

    def else_(self):
        region = self.op.regions[1]
        if len(region.blocks):
            raise RuntimeError("this scf.if already has an else-branch")
        block = region.blocks.append()
        with ir.InsertionPoint(block):
            y = scf.YieldOp([])
        return _At(y)


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
