"""The simulator follows ``st.async`` into another CTA's shared memory and
the hand-driven mbarriers it completes on (sim/rawbar.py), on the row
softmax split over a cluster (examples/row_softmax.py on
kernel/row_ring.py): per reduction of a row, thread 0 of each CTA arms its
barrier for the other CTAs' 4 bytes and sends its value to every other
CTA's slot (``st.async ... mbarrier::complete_tx::bytes``); every thread
waits on its barrier's phase and reads the slots. Clean on clusters of 2
and 4 (before, the hand-driven barriers were not modelled and the slots'
reuse read as a race); the wait dropped, or the barrier armed for 4 bytes
less than the peers send, is a race between a peer's st.async and the
read of the slot; armed for 4 bytes more, a deadlock naming the barrier
and the bytes it still expects. The wait as a loop of one-try waits
(``mbarrier.try_wait``, an i1) is clean, one try whose result is ignored
races, and the loop on a barrier armed for more bytes is a deadlock naming
the loop."""

import sys
from pathlib import Path

import pytest

from pipeline_mlir.pipeline import mbarrier

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import row_softmax  # noqa: E402

ROWS = {"m": 3}     # row parities 0, 1, 0: each barrier and slot reused


def _sim(n, schedules=2):
    return row_softmax.build(n).simulate(ROWS, schedules=schedules, check=False)


@pytest.mark.parametrize("n", [32768, 65536], ids=["cluster2", "cluster4"])
def test_the_cluster_exchange_simulates_clean(n):
    res = _sim(n)
    assert res.ok, str(res)


def test_the_exchange_is_followed():
    """Every CTA's slots are written by the other CTAs' st.async, and the
    barriers of row parity 0 complete two phases, those of parity 1 one."""
    import random

    from pipeline_mlir.sim.engine import run_one
    from pipeline_mlir.sim.frontend import kernels
    from pipeline_mlir.sim.interp import Launch, make_world_factory

    k = row_softmax.build(32768)
    with k.module.context:
        sk, = kernels(k.module)
    assert sk.st_async
    make = make_world_factory(sk, Launch(sk.block_dim, k.cluster_dim, None, {2: 3}))
    rng = random.Random(0)
    w = run_one(make, lambda n, cont: rng.randrange(n), 0)
    for cta, shadow in w.smem.items():
        senders = {w.agents[s.w].cta for s in shadow.values()
                   if s.w >= 0 and s.op == "st.async"}
        assert senders == {1 - cta}
    phases = sorted(b.phase for b in w.rawbars.values())
    assert phases == [1, 1, 1, 1, 2, 2, 2, 2]
    assert all(b.tx == 0 for b in w.rawbars.values())


def _race(res, writer="st.async"):
    assert "smem-race" in res[0].counts, str(res)
    assert set(res[0].counts) <= {"smem-race", "deadlock"}, str(res)
    f = next(f for f in res.findings if f.kind == "smem-race")
    assert "llvm.load" in f.message, f.message
    assert any(w in f.message for w in writer.split("|")), f.message
    return f


def test_a_read_of_the_slots_without_the_wait_races(monkeypatch):
    """Without the wait nothing orders the slots' reads after their writes:
    the peer's st.async, or this CTA's own slot stored by thread 0 (which
    the arrive before the wait released)."""
    monkeypatch.setattr(mbarrier.MbarrierArray, "wait", lambda self, index, phase: None)
    _race(_sim(32768), "st.async|llvm.store")


def test_a_barrier_armed_for_fewer_bytes_races(monkeypatch):
    """Four CTAs: each barrier expects 8 bytes, the three peers send 12;
    the phase may complete before the last one lands."""
    real = mbarrier.MbarrierArray.arrive_and_expect_tx
    monkeypatch.setattr(mbarrier.MbarrierArray, "arrive_and_expect_tx",
                        lambda self, index, tx: real(self, index, tx - 4))
    _race(_sim(65536, schedules=4))


def test_a_barrier_armed_for_more_bytes_than_sent_is_a_deadlock(monkeypatch):
    real = mbarrier.MbarrierArray.arrive_and_expect_tx
    monkeypatch.setattr(mbarrier.MbarrierArray, "arrive_and_expect_tx",
                        lambda self, index, tx: real(self, index, tx + 4))
    res = _sim(32768)
    assert set(res[0].counts) == {"deadlock"}, str(res)
    msg = res.findings[0].message
    assert "waits on the mbarrier at byte" in msg and "row_softmax.py" in msg, msg
    assert "for phase parity 0 (phase 0 still expects 0 arrival(s) and 4 tx byte(s))" in msg


# -- the one-try wait (mbarrier.try_wait: an i1, no blocking) ----------------

def _spin(self, index, phase):
    """The wait as a loop of one-try waits (MbarrierArray.try_wait)."""
    from pipeline_mlir.kernel.control import while_
    waiting = ~self.try_wait(index, phase)
    for _ in while_(waiting, carry=[waiting]):
        waiting.set(~self.try_wait(index, phase))


def test_a_loop_of_one_try_waits_is_the_wait(monkeypatch):
    """The exchange's wait as a loop around mbarrier.try_wait: clean, and
    the loop does not run a try per step (each failed try waits for the
    barrier's phase to move)."""
    monkeypatch.setattr(mbarrier.MbarrierArray, "wait", _spin)
    k = row_softmax.build(32768)
    assert "nvvm.mbarrier.try_wait " in str(k.module)
    res = k.simulate(ROWS, schedules=4, check=False)
    assert res.ok, str(res)


def test_one_try_whose_result_is_ignored_races(monkeypatch):
    """One try and on: where the phase has not completed yet the try says
    so and acquires nothing, and the read of the slots races their writes
    (the peer's st.async, or thread 0's store of this CTA's own slot, which
    the arrive the try did not wait for released)."""
    monkeypatch.setattr(mbarrier.MbarrierArray, "wait",
                        lambda self, index, phase: self.try_wait(index, phase))
    _race(_sim(32768, schedules=6), "st.async|llvm.store")


def test_a_loop_of_one_try_waits_that_never_passes_is_a_deadlock(monkeypatch):
    """Armed for 4 bytes more than the peers send: the loop is a deadlock
    naming the barrier, the loop's line and what the phase still expects."""
    monkeypatch.setattr(mbarrier.MbarrierArray, "wait", _spin)
    real = mbarrier.MbarrierArray.arrive_and_expect_tx
    monkeypatch.setattr(mbarrier.MbarrierArray, "arrive_and_expect_tx",
                        lambda self, index, tx: real(self, index, tx + 4))
    res = _sim(32768)
    assert set(res[0].counts) == {"deadlock"}, str(res)
    msg = res.findings[0].message
    assert "with a one-try wait for phase parity 0 in the loop at" in msg, msg
    assert "test_sim_st_async.py:" in msg, msg
    assert "(phase 0 still expects 0 arrival(s) and 4 tx byte(s))" in msg, msg
