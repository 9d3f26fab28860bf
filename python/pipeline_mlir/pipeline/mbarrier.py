"""Raw synchronization objects: ``SyncObject``, ``MbarrierArray``, ``TmaStoreFence``.

The pipeline classes do not use these (their barriers live behind
``pipeline.create``); they exist for code that drives mbarriers by hand, as
CuTe DSL allows. ``MbarrierArray`` emits upstream NVVM ops directly, with
the sequences of CuTe DSL's ``MbarrierArray`` (``mbarrier.init`` of every
stage by one elected thread of warp 0, arrives by op type).

Neither the protocol checker nor the simulator models a barrier driven by
hand, so the first such use in a kernel (an ``MbarrierArray``, a
``producer_get_barrier`` handle) issues an ``UncheckedBarrierWarning`` at
the user's line: :func:`warn_unchecked_barrier`.
"""

import os
import warnings
import weakref

import mlir.ir as ir
from mlir.dialects import arith, llvm, nvvm

from ..dialects import pipeline as pl
from ..kernel.control import If, elect_one
from ..kernel.smem import SmemPtr
from ..kernel.values import Scalar, i1, i32, i64, to_value
from .agent import Agent, CooperativeGroup, PipelineOp
from .emit import MAX_STAGES, i32_value, smem_pointer, stage_count
from .errors import PipelineError, UncheckedBarrierWarning

# Suspend-time hint of a blocking try_wait (CUTLASS C++ and CuTe DSL).
TRY_WAIT_SUSPEND_HINT_NS = 10000000
# mbarrier arrive counts are 20-bit.
MAX_ARRIVE_COUNT = (1 << 20) - 1


# The builder packages. A warning names the first frame outside them, the
# user's line, however many builder calls lie between (a Python frame count
# would break whenever a builder gains a helper).
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BUILDER_DIRS = tuple(os.path.join(_PACKAGE, d) + os.sep
                      for d in ("pipeline", "kernel"))

# Kernels already warned (the first hand-driven barrier of a kernel says it;
# the next ones would only repeat it). Modules built without a Kernel are
# keyed by (context, function symbol).
_WARNED_KERNELS = weakref.WeakSet()
_WARNED_FUNCTIONS = set()


def _kernel_key():
    """The kernel being built: the active ``Kernel``, else the function that
    holds the insertion point, as (context id, symbol); None outside both."""
    from ..kernel.kernel import active_kernel
    k = active_kernel()
    if k is not None:
        return k
    try:
        op = ir.InsertionPoint.current.block.owner
    except ValueError:
        return None
    while op is not None:
        op = op.operation
        if "function_type" in op.attributes and "sym_name" in op.attributes:
            return (id(op.context), str(op.attributes["sym_name"]))
        op = op.parent
    return None


def warn_unchecked_barrier(what, instead):
    """Warn (``UncheckedBarrierWarning``, at the user's line) that ``what``
    drives an mbarrier by hand, once per kernel; ``instead`` says what to
    use."""
    key = _kernel_key()
    if key is not None:
        seen = _WARNED_FUNCTIONS if isinstance(key, tuple) else _WARNED_KERNELS
        if key in seen:
            return
        seen.add(key)
    warnings.warn(
        f"{what} drives an mbarrier by hand: the protocol checker "
        "(pipeline-verify-protocol) and the simulator (pipeline-sim) do not "
        "model such barriers, so their arrive counts, phases and init order "
        "go unchecked (a second arrive per phase, a wait on the wrong parity "
        "or an arrive before the barrier's init is visible to every thread "
        f"hang or corrupt silently). {instead}",
        UncheckedBarrierWarning, skip_file_prefixes=_BUILDER_DIRS)


_USE_PIPELINES = (
    "Use a pipeline class (PipelineAsync, PipelineTmaAsync, ...) and its "
    "verbs (producer_acquire / producer_commit / consumer_wait / "
    "consumer_release), PipelineOrder for turn-taking or NamedBarrier for a "
    "CTA sync: the checker and the simulator model those.")


class SyncObject:
    """Interface of CuTe DSL's synchronization objects."""

    def arrive(self, *args, **kwargs):
        raise NotImplementedError

    def wait(self, *args, **kwargs):
        raise NotImplementedError

    def arrive_and_wait(self, *args, **kwargs):
        raise NotImplementedError

    def arrive_and_drop(self, *args, **kwargs):
        raise PipelineError(f"{type(self).__name__}.arrive_and_drop is not "
                            "supported")

    def get_barrier(self, *args, **kwargs):
        raise NotImplementedError

    def max(self):
        raise NotImplementedError


def _sreg(name):
    return Scalar(getattr(nvvm, f"read_ptx_sreg_{name}")(i32()))


class MbarrierArray(SyncObject):
    """``num_stages`` mbarriers at ``barrier_storage`` signalled by ``agent``
    = ``(PipelineOp, CooperativeGroup)``; initialized on construction (warp 0,
    one elected thread), as in CuTe DSL."""

    def __init__(self, barrier_storage, num_stages, agent, tx_count=0):
        what = "MbarrierArray"
        self._base = smem_pointer(barrier_storage, f"{what}: barrier_storage")
        self.num_stages = stage_count(num_stages, f"{what}: num_stages")
        try:
            op_type, group = agent
        except (TypeError, ValueError):
            raise TypeError(f"{what}: agent must be (PipelineOp, "
                            f"CooperativeGroup), got {agent!r}") from None
        if not isinstance(op_type, PipelineOp) or not isinstance(
                group, CooperativeGroup):
            raise TypeError(f"{what}: agent must be (PipelineOp, "
                            f"CooperativeGroup), got {agent!r}")
        if op_type in (PipelineOp.TmaLoad, PipelineOp.ClcLoad) and tx_count <= 0:
            raise PipelineError(f"{what}: {op_type.name} barriers complete by "
                                "transaction bytes; tx_count must be positive")
        self.op_type, self.cg = op_type, group
        self.tx_count = tx_count
        warn_unchecked_barrier("MbarrierArray", _USE_PIPELINES)
        self.mbarrier_init()

    def recast_to_new_op_type(self, new_op_type):
        obj = object.__new__(MbarrierArray)
        obj.__dict__.update(self.__dict__)
        obj.op_type = new_op_type
        return obj

    def _arrive_count(self):
        g = self.cg
        static = g.thread_count()
        if static is not None:
            return to_value(static, i32())
        # Threadblock / cluster groups scale with the launch.
        threads = _sreg("ntid_x") * _sreg("ntid_y") * _sreg("ntid_z")
        n = threads * g.size
        if g.agent is Agent.ThreadBlockCluster:
            n = n * _sreg("cluster_nctarank")
        return n.ir_value

    def mbarrier_init(self):
        """``mbarrier.init`` of every stage by one thread of warp 0."""
        tid = _sreg("tid_x") + (_sreg("tid_y") + _sreg("tid_z") * _sreg("ntid_y")) * _sreg("ntid_x")
        with If(tid // 32 == 0):
            with elect_one():
                count = self._arrive_count()
                for i in range(self.num_stages):
                    nvvm.mbarrier_init(self.get_barrier(i).ir_value, count)

    def get_barrier(self, index):
        """Pointer to barrier ``index`` (8 bytes each)."""
        idx = i32_value(index, "MbarrierArray index")
        return SmemPtr(self._base) + Scalar(idx) * 8

    def max(self):
        return MAX_ARRIVE_COUNT

    def arrive(self, index, dst=None, cta_group=None):
        """Arrive on barrier ``index`` the way the array's op type does."""
        warn_unchecked_barrier("MbarrierArray.arrive", _USE_PIPELINES)
        bar = self.get_barrier(index).ir_value
        op = self.op_type
        if op is PipelineOp.AsyncThread:
            if dst is None:
                nvvm.mbarrier_arrive(i64(), bar)
            else:
                remote = nvvm.mapa(llvm.PointerType.get(7), bar,
                                   i32_value(dst, "MbarrierArray dst rank"))
                nvvm.mbarrier_arrive(None, remote)
        elif op is PipelineOp.TmaLoad:
            with elect_one():
                nvvm.mbarrier_arrive_expect_tx(i64(), bar, to_value(
                    self.tx_count, i32()))
        elif op is PipelineOp.AsyncLoad:
            nvvm.cp_async_mbarrier_arrive(bar, noinc=True)
        elif op is PipelineOp.TCGen05Mma:
            mask = None if dst is None else to_value(
                dst, ir.IntegerType.get_signless(16), what="multicast mask")
            group = None
            if cta_group is not None:
                group = (nvvm.CTAGroupKind.CTA_2 if cta_group == 2
                         else nvvm.CTAGroupKind.CTA_1)
            with elect_one():
                nvvm.tcgen05_commit(bar, multicast_mask=mask, group=group)
        else:
            raise PipelineError(f"MbarrierArray.arrive: {op.name} arrives are "
                                "not supported on a raw MbarrierArray")

    def arrive_and_expect_tx(self, index, tx_count):
        warn_unchecked_barrier("MbarrierArray.arrive_and_expect_tx", _USE_PIPELINES)
        nvvm.mbarrier_arrive_expect_tx(
            i64(), self.get_barrier(index).ir_value,
            i32_value(tx_count, "MbarrierArray tx_count"))

    def try_wait(self, index, phase):
        """One ``mbarrier.try_wait.parity``; an i1 Scalar."""
        warn_unchecked_barrier("MbarrierArray.try_wait", _USE_PIPELINES)
        return Scalar(nvvm.mbarrier_try_wait(
            i1(), self.get_barrier(index).ir_value,
            i32_value(phase, "MbarrierArray phase")))

    def wait(self, index, phase):
        """Block until phase parity ``phase`` of barrier ``index`` completed."""
        warn_unchecked_barrier("MbarrierArray.wait", _USE_PIPELINES)
        nvvm.mbarrier_try_wait_parity(
            self.get_barrier(index).ir_value,
            i32_value(phase, "MbarrierArray phase"),
            to_value(TRY_WAIT_SUSPEND_HINT_NS, i32()))

    def arrive_and_wait(self, index, phase, dst=None, cta_group=None):
        self.arrive(index, dst, cta_group)
        self.wait(index, phase)


class TmaStoreFence(SyncObject):
    """Bulk async-group fence of a TMA-store epilogue (no mbarriers)."""

    def __init__(self, num_stages=0):
        if (not isinstance(num_stages, int) or isinstance(num_stages, bool)
                or not 0 <= num_stages <= MAX_STAGES):
            raise PipelineError(f"TmaStoreFence: num_stages must be a "
                                f"non-negative int, got {num_stages!r}")
        self.num_stages = num_stages

    def arrive(self):
        """``cp.async.bulk.commit_group``."""
        pl.bulk_group_commit()

    def wait(self):
        """``cp.async.bulk.wait_group.read num_stages - 1``."""
        pl.bulk_group_wait(pending=max(self.num_stages - 1, 0), read=True)

    def arrive_and_wait(self):
        self.arrive()
        self.wait()

    def tail(self):
        """``cp.async.bulk.wait_group.read 0``."""
        pl.bulk_group_wait(pending=0, read=True)

    def get_barrier(self):
        raise PipelineError("TmaStoreFence owns no barrier")

    def max(self):
        return self.num_stages
