"""The simulator's race detector for plain shared memory (sim/smemrace.py):
a tile that a consumer warpgroup writes and a producer-side warp reads with
a TMA reduce-add, handed over by two named barriers ("full": written and
fenced; "empty": read), as the attention backward's reduce warp does. The
correct hand-off is clean; each misplaced barrier, wait or fence is a
``smem-race`` finding naming both sides' ops at the user's lines.
"""

import re

import pytest

FULL, EMPTY, THREADS = 1, 2, 160
TILE_BYTES = 512  # 128 threads x 4 bytes


def _hand_off(mistake=None):
    """Warps 0-3 (a consumer warpgroup) write the tile each step and hand
    it over; warp 4 reduces it into global memory (one lane's TMA
    reduce-add, its bulk group waited until read) and gives it back."""
    import mlir.ir as ir
    from mlir.dialects import arith, llvm

    from pipeline_mlir.kernel import Int32, Kernel, TmaDescriptor, fence_view_async_shared
    from pipeline_mlir.kernels.attention_bwd.dq_reduce import tma_reduce_add
    from pipeline_mlir.pipeline import NamedBarrier, TmaStoreFence
    from pipeline_mlir.user_location import user_line

    k = Kernel("hand_off", block_dim=THREADS, params={"acc": TmaDescriptor(), "steps": Int32()})
    with k:
        acc, steps = k.args
        tile = k.smem_alloc(TILE_BYTES, align=128, name="tile")
        full = NamedBarrier(barrier_id=FULL, num_threads=THREADS)
        empty = NamedBarrier(barrier_id=EMPTY, num_threads=THREADS)
        warp, tid = k.warp_idx(), k.thread_idx()
        i32 = ir.IntegerType.get_signless(32)

        @user_line
        def write():
            one = arith.constant(i32, 1)
            llvm.store(one, (tile + tid * 4).ir_value)

        @user_line
        def reduce():
            tma_reduce_add(acc, [0], tile)

        with k.if_(warp < 4):
            for _ in k.range(steps):
                if mistake != "write_before_empty":
                    empty.arrive_and_wait()
                write()
                if mistake == "write_before_empty":
                    empty.arrive_and_wait()
                if mistake != "no_fence":
                    fence_view_async_shared()
                full.arrive()
        with k.if_(warp == 4):
            groups = TmaStoreFence(num_stages=1)
            empty.arrive()                       # the tile starts free
            for _ in k.range(steps):
                if mistake != "read_before_full":
                    full.arrive_and_wait()
                with k.if_(k.lane_idx() == 0):
                    reduce()
                    groups.arrive()
                    if mistake != "empty_before_read_done":
                        groups.wait()
                if mistake == "read_before_full":
                    full.arrive_and_wait()
                empty.arrive()
                if mistake == "empty_before_read_done":
                    with k.if_(k.lane_idx() == 0):
                        groups.wait()
    return k


# Either side may come first in a schedule: the finding is the write not
# ordered after the read, or the read not ordered after the write.
_EITHER = (r"(warp [0-3] of CTA 0 writes shared memory at byte \d+ of CTA 0 with llvm.store "
           r"at .* (while nothing orders it after the read \(its end\)|while its "
           r"asynchronous read is still in flight \(no wait retired it yet\):) by warp 4 of "
           r"CTA 0's nvvm.cp.async.bulk.tensor.reduce at |warp 4 of CTA 0 reads shared memory "
           r"at byte \d+ of CTA 0 with nvvm.cp.async.bulk.tensor.reduce at .* while nothing "
           r"orders it after the write by warp [0-3] of CTA 0's llvm.store at )")
MISTAKES = {
    "write_before_empty": _EITHER,
    "read_before_full": _EITHER,
    "empty_before_read_done": _EITHER,
    "no_fence": r"warp 4 of CTA 0 reads shared memory at byte \d+ of CTA 0 with "
                r"nvvm.cp.async.bulk.tensor.reduce at .* through the async proxy, and no "
                r"fence.proxy.async orders it after the generic write by warp [0-3]",
}


def test_the_correct_hand_off_is_clean():
    res = _hand_off().simulate({"steps": 3}, schedules=30)
    assert res.ok, res


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_each_misplaced_step_is_a_race(mistake):
    from pipeline_mlir.sim import SimulationFailed

    with pytest.raises(SimulationFailed) as e:
        _hand_off(mistake).simulate({"steps": 3}, schedules=30)
    (res,) = e.value.result
    assert set(res.counts) == {"smem-race"}, res
    finding = res.findings[0]
    assert re.search(MISTAKES[mistake], finding.message), finding.message
    # Both sides' ops at the user's lines (this file).
    assert len(finding.where) == 2 and all("test_sim_smem_race.py:" in w
                                           for w in finding.where), finding.where


def test_every_schedule_of_a_race_finds_it():
    """The detector follows happens-before, not the interleaving: a race
    is reported in every schedule, not only where the accesses overlap."""
    from pipeline_mlir.sim import SimulationFailed

    with pytest.raises(SimulationFailed) as e:
        _hand_off("write_before_empty").simulate({"steps": 3}, schedules=20)
    assert e.value.result[0].counts == {"smem-race": 20}
