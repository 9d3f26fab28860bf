"""Where SSA values may be used: insertion-point and region checks.

The builders emit at ``mlir.ir.InsertionPoint.current``. A value defined
inside a region (an ``scf.if`` branch, a loop body) cannot be used after that
region ends; MLIR would only report it later as a dominance error, far from
the Python line that caused it. These helpers let the builders refuse at the
call instead, with a message naming the object.
"""

import mlir.ir as ir


class ScopeError(ValueError):
    """A value, state or handle was used outside the region it belongs to."""


def current_block(what="this call"):
    """The block of the current insertion point, or a clear error."""
    try:
        return ir.InsertionPoint.current.block
    except ValueError:
        raise ScopeError(
            f"{what} emits IR and needs an insertion point: call it inside a "
            "kernel body (`with Kernel(...) as k:`) or an `ir.InsertionPoint`"
        ) from None


def defining_block(value):
    """The block that defines ``value`` (its op's block, or its own block)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return owner
    return owner.operation.block


def block_encloses(outer, inner):
    """True if ``inner`` is ``outer`` or nested (at any depth) inside it."""
    b = inner
    while b is not None:
        if b == outer:
            return True
        parent = b.owner
        if parent is None:
            return False
        op = parent.operation
        if op.parent is None:  # a top-level op: asking for its block aborts
            return False
        b = op.block
    return False


def require_visible(value, what):
    """Raise ScopeError unless ``value`` may be used at the insertion point."""
    here = current_block(what)
    home = defining_block(value)
    if not block_encloses(home, here):
        raise ScopeError(
            f"{what} was defined inside a region (an if-branch or loop body) "
            "that has ended; it cannot be used here. Carry it through the "
            "loop (`k.range(..., carry=[...])`) or create it in an enclosing "
            "scope")


def require_inside(block, what):
    """Raise ScopeError unless the insertion point is inside ``block``."""
    here = current_block(what)
    if not block_encloses(block, here):
        raise ScopeError(
            f"{what} belongs to a region that has ended (it was made inside "
            "an if-branch or loop body that the insertion point has left)")


# -- updates of objects that loops must carry ----------------------------------
#
# ``k.range`` (kernel.control.range_) traces its body once. An object made
# before the loop and updated in the body (``state.advance()``,
# ``producer.acquire_and_advance()``, ``order.arrive()``, ``total.set(...)``)
# must be listed in ``carry=[...]``: otherwise every iteration starts from the
# value it had before the loop, and after the loop it holds a value of the
# ended body. The mutators call :func:`note_update`; ``range_`` checks at the
# end of its body that every object updated there is carried.

class LoopTrace:
    """The objects updated while one ``k.range`` body was being traced."""

    def __init__(self, body):
        self.body = body
        self.updated = {}  # id(obj) -> (obj, values before its first update, verb)
        self.fresh = set()  # id(obj) of objects redefined in the body before any update


_loops = []  # bodies being traced, outermost first


def note_update(obj, verb):
    """Called by a mutator of a loop-carriable object (one with
    ``_carry_values``) before it rebinds the object; ``verb`` says how
    ("advanced", "set", ...) for the error message."""
    if not _loops:
        return
    try:
        here = ir.InsertionPoint.current.block
    except ValueError:
        return
    # The values the object holds now, read without emitting IR: a
    # Fragment's _carry_values would pack its struct here, inside the body,
    # and the object would look made inside the loop.
    sources = getattr(obj, "_carry_sources", obj._carry_values)
    for loop in _loops:
        if id(obj) not in loop.updated and id(obj) not in loop.fresh and \
                block_encloses(loop.body, here):
            loop.updated[id(obj)] = (obj, list(sources()), verb)


def note_fresh(obj):
    """Called by a mutator that gives ``obj`` a new value not computed from
    its old one (``Fragment.zero``/``fill``): in a loop body where ``obj``
    was not updated before, it is from then on an object made in the body
    (a GEMM zeroes its accumulator per tile), which needs no carry."""
    if not _loops:
        return
    try:
        here = ir.InsertionPoint.current.block
    except ValueError:
        return
    for loop in _loops:
        if id(obj) not in loop.updated and block_encloses(loop.body, here):
            loop.fresh.add(id(obj))
