"""Raw synchronization objects: ``SyncObject``, ``MbarrierArray``, ``TmaStoreFence``.

The pipeline classes do not use these (their barriers live behind
``pipeline.create``); they exist for code that drives mbarriers by hand, as
CuTe DSL allows. ``MbarrierArray`` emits upstream NVVM ops directly, with
the sequences of CuTe DSL's ``MbarrierArray`` (``mbarrier.init`` of every
stage by one elected thread of warp 0, arrives by op type).
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm, nvvm

from ..dialects import pipeline as pl
from ..kernel.control import If, elect_one
from ..kernel.smem import SmemPtr
from ..kernel.values import Scalar, i1, i32, i64, to_value
from .agent import Agent, CooperativeGroup, PipelineOp
from .emit import MAX_STAGES, i32_value, smem_pointer, stage_count
from .errors import PipelineError

# Suspend-time hint of a blocking try_wait (CUTLASS C++ and CuTe DSL).
TRY_WAIT_SUSPEND_HINT_NS = 10000000
# mbarrier arrive counts are 20-bit.
MAX_ARRIVE_COUNT = (1 << 20) - 1


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
        nvvm.mbarrier_arrive_expect_tx(
            i64(), self.get_barrier(index).ir_value,
            i32_value(tx_count, "MbarrierArray tx_count"))

    def try_wait(self, index, phase):
        """One ``mbarrier.try_wait.parity``; an i1 Scalar."""
        return Scalar(nvvm.mbarrier_try_wait(
            i1(), self.get_barrier(index).ir_value,
            i32_value(phase, "MbarrierArray phase")))

    def wait(self, index, phase):
        """Block until phase parity ``phase`` of barrier ``index`` completed."""
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
