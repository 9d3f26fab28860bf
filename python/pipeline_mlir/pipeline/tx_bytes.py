"""Transaction bytes derived from the copies: ``tx_count`` left out of a TMA
pipeline's ``create``.

The protocol checker (``pipeline-verify-protocol``, TxArriveChecks.cpp)
compares tx_count with the copies of every stage in the IR, whichever way
it was set; this module only picks the number when the user gave none.

Why not simply "the bytes of the copies"? The type ``!pipeline.pipeline<
tma_async, ..., tx_count = N>`` is fixed by ``pipeline.create``, and the
copies (``tma_load``, ``bulk_copy``) are built after it. A pipeline created
without ``tx_count`` therefore keeps a :class:`TxLedger` that learns the
number from the copies and patches it into the type of the create's result
(``Value.set_type``: every op that uses the pipeline takes its type from that
value, so the whole kernel sees the derived number).

The unit of learning is one *production*: the copies built between a
``producer_acquire`` and the matching ``producer_commit`` (or the next
``producer_acquire``). The first production defines ``tx_count``; every later
production built in the same kernel must deliver the same bytes, or the
builder raises at the Python line of the mismatching commit (a peeled first
iteration or a second producer branch that forgets a copy is caught here,
not as a hang). Bytes a stage *receives* per copy (what expect_tx must
cover):

- a plain copy: its ``bytes``;
- a multicast copy: ``bytes * popcount(mask)``: the CTAs of the mask are
  assumed to issue the same copy (SPMD; each loads its slice and multicasts
  it), so each receives one slice from every one of them. The mask must be
  a Python int or an ``arith.constant``; a run-time mask cannot be derived
  from and raises (pass ``tx_count=``);
- a 2-CTA pipeline (``cta_group = 2``): the pair's copies complete on the
  leader's barrier, so times V (2).

Limits, stated so that nothing is guessed: a copy built under a run-time
condition other than the elected lane (``k.elect_one()``) counts as issued
in every production; kernels whose productions differ on purpose pass
``tx_count`` explicitly. A pipeline whose tx_count was never derived (no
copy was built) is refused by :func:`check_module` (``Kernel.verify`` and
``Kernel.compile`` call it): its type still holds a placeholder.
"""

import mlir.ir as ir

from ..dialects import pipeline as pl
from .emit import MAX_TX_COUNT
from .errors import PipelineError

PENDING_ATTR = "pipeline.tx_count_pending"
# A positive placeholder: the type verifier requires tx_count > 0 for TMA
# kinds, and PENDING_ATTR marks it as not derived yet.
PLACEHOLDER = 1


def _popcount(x):
    return bin(x & 0xFFFF).count("1")


def constant_int(x):
    """A Python int from an int, a Scalar or a value defined by
    ``arith.constant``; None when it is only known at run time."""
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x
    v = getattr(x, "ir_value", x)
    try:
        owner = v.owner
        op = owner.operation if not isinstance(owner, ir.Block) else None
    except AttributeError:
        return None
    if op is None or op.name != "arith.constant":
        return None
    try:
        return ir.IntegerAttr(op.attributes["value"]).value
    except (ValueError, KeyError):
        return None


class TxLedger:
    """What one pipeline's productions deliver, per stage (see the module
    docstring). ``derive`` is True when ``create`` got no ``tx_count``."""

    def __init__(self, pipeline, derive, type_args, what):
        self.pipeline = pipeline
        self.derive = derive
        self.type_args = type_args  # PipelineType.get arguments but tx_count
        self.what = what
        self.derived = None  # bytes per stage, once a production closed
        self.window = None  # [(label, received bytes)] of the open production
        self.extra = 0

    # -- events from the builders ---------------------------------------------
    def acquire(self, extra_tx):
        self.close()
        self.window = []
        self.extra = 0
        if self.derive and extra_tx is not None:
            extra = constant_int(extra_tx)
            if extra is None:
                raise PipelineError(
                    f"{self.what}: producer_acquire with a run-time extra_tx_count on a "
                    "pipeline created without tx_count: the bytes to arm cannot be derived "
                    "from the copies (pass tx_count= to create)")
            self.extra = extra

    def copy(self, label, nbytes, mcast_mask, cta_group):
        """A copy into the open production: ``nbytes`` per issue, times the
        CTAs of ``mcast_mask``, times the 2-CTA pair."""
        if not self.derive:
            return
        factor = 1
        if mcast_mask is not None:
            mask = constant_int(mcast_mask)
            if mask is None:
                raise PipelineError(
                    f"{self.what}: {label} has a run-time multicast mask, so the bytes each "
                    "stage receives cannot be derived (pass tx_count= to create)")
            factor = _popcount(mask)
        factor *= cta_group
        got = nbytes * factor
        desc = f"{label} {nbytes} B" + (f" x {factor} receivers" if factor > 1 else "")
        if self.window is None:
            self.window = []
        self.window.append((desc, got))
        if self.derived is None:
            # Running sum while the first production is being built, so the
            # type is right even if the kernel never calls producer_commit.
            running = sum(b for _, b in self.window) - self.extra
            if running > 0:
                self._patch(running)

    def commit(self):
        self.close()

    # -- bookkeeping ------------------------------------------------------------
    def close(self):
        """End the open production: the first defines tx_count, later ones
        must deliver the same bytes."""
        window, self.window = self.window, None
        if not self.derive or not window:
            return
        total = sum(b for _, b in window) - self.extra
        parts = " + ".join(d for d, _ in window)
        if self.derived is None:
            self.derived = total
            self._patch(total)
            del self.pipeline._value.owner.attributes[PENDING_ATTR]
            return
        if total != self.derived:
            raise PipelineError(
                f"{self.what}: this production's copies deliver {total} bytes per stage "
                f"({parts}) but the first production delivered {self.derived}, which became "
                "the derived tx_count: every production must deliver the same bytes (pass "
                "tx_count= explicitly if they differ on purpose)")

    def _patch(self, total):
        if total <= 0:
            raise PipelineError(
                f"{self.what}: the copies deliver {total} bytes per stage after "
                "extra_tx_count is taken out: a derived tx_count must be positive")
        if total > MAX_TX_COUNT:
            raise PipelineError(
                f"{self.what}: the copies of one stage deliver {total} bytes, over the "
                f"mbarrier limit of {MAX_TX_COUNT} bytes per phase")
        t = pl.PipelineType.get(*self.type_args[0], tx_count=total, **self.type_args[1])
        self.pipeline._value.set_type(t)  # the pipeline's .type reads it


def check_module(module):
    """Raise PipelineError if a pipeline of ``module`` was created without
    tx_count and no copy ever told its bytes (its type holds a placeholder)."""
    found = []

    def visit(op):
        if op.name == "pipeline.create" and PENDING_ATTR in op.attributes:
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if found:
        op = found[0]
        name = (f" '{ir.StringAttr(op.attributes['name']).value}'"
                if "name" in op.attributes else "")
        raise PipelineError(
            f"pipeline{name} was created without tx_count and no tma_load/bulk_copy was "
            "built between a producer_acquire and producer_commit of it, so its tx_count "
            "could not be derived (pass tx_count= to create)")


__all__ = ["TxLedger", "check_module", "constant_int", "PENDING_ATTR", "PLACEHOLDER"]
