"""The simulator on what the roles of a CTA share besides a stage: the
register file that setmaxnreg divides, the shared memory behind a
pipeline's mbarriers, and the buffers of another ring.

- registers: every warp starts with the launch's count (the register file
  over the block's threads, in steps of 8, at most 256); a
  ``setmaxnreg.dec`` gives registers back to the CTA's pool, a
  ``setmaxnreg.inc`` waits until the pool holds what it adds (a check, not
  a scheduling point: the warp runs on owing them). A role that never
  decreases, or decreases only after work the increasing warps hold up,
  leaves their increases waiting: a deadlock at the CTA's exit or at that
  decrease;
- barrier storage: a pipeline created on the bytes of another's barriers
  uses those mbarriers (both rings arrive on and wait for them): phases
  complete early (a read before the data, a phase overrun, an overwrite),
  with a note naming both pipelines;
- another ring's buffer: the producer's writes into its acquired stage go
  into the plain-shared-memory shadow, so a read of that stage through
  another ring's hold, ordered by none of its barriers, is a race;
- an aligned named barrier (bar.sync) whose blocking participants of one
  generation run distinct barrier instructions (each role its own site):
  undefined in PTX, a ``divergent-barrier`` finding.
"""

import pytest

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, load, store
from pipeline_mlir.kernel.values import i32
from pipeline_mlir.kernel.warpgroup import set_max_registers
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, make_pipeline_state,
                                    NamedBarrier, PipelineAsync, PipelineUserType)

from _held_out_bugs import _next_line

Producer, Consumer = PipelineUserType.Producer, PipelineUserType.Consumer
S, N = 2, 5
BYTES = 128  # one int32 per lane


def _ring(k, bars, name, consumers=32):
    return PipelineAsync.create(
        num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 32),
        consumer_group=CooperativeGroup(Agent.Thread, consumers), barrier_storage=bars,
        name=name)


def _produce(k, pipe, n):
    s = make_pipeline_state(Producer, S)
    for _, (s,) in k.range(n, carry=[s]):
        pipe.producer_acquire(s)
        pipe.producer_commit(s)
        s.advance()
    pipe.producer_tail(s)


def _consume(k, pipe, n):
    c = make_pipeline_state(Consumer, S)
    for _, (c,) in k.range(n, carry=[c]):
        pipe.consumer_wait(c)
        pipe.consumer_release(c)
        c.advance()


def _registers(form):
    """Four warpgroups (512 threads: 128 registers each at launch, the whole
    file): warpgroups 1-3 consume at 152 after warpgroup 0 (the producer)
    ("dec") gives its registers back with setmaxnreg.dec 40, ("late") does
    so only after its loop (the checker's budget, which counts what each
    warpgroup asks for at the most, lets it through), or ("none") never
    does."""
    k = Kernel("regs_" + form, chip="sm_90a", block_dim=512, params={"n": Int32()})
    lines = {}
    with k:
        (n,) = k.args
        pipe = _ring(k, k.alloc_barriers(2 * S), "ring", consumers=384)
        with k.if_(k.warp_idx() // 4 == 0) as producer:
            if form == "dec":
                set_max_registers(40, increase=False)
            with k.if_(k.warp_idx() == 0):
                _produce(k, pipe, n)
            if form == "late":
                lines["dec"] = _next_line()
                set_max_registers(40, increase=False)
        with producer.else_():
            lines["inc"] = _next_line()
            set_max_registers(152, increase=True)
            _consume(k, pipe, n)
    return k, lines


def _shared_storage(bug):
    """Rings a and b, each with its producer and consumer warp; ``bug``: b
    is created on a's barrier array."""
    k = Kernel("storage_" + ("bug" if bug else "twin"), block_dim=128, params={"n": Int32()})
    with k:
        (n,) = k.args
        bars_a = k.alloc_barriers(2 * S)
        bars_b = bars_a if bug else k.alloc_barriers(2 * S)
        a = _ring(k, bars_a, "a")
        b = _ring(k, bars_b, "b")
        for w, (pipe, role) in enumerate([(a, _produce), (b, _produce), (a, _consume),
                                          (b, _consume)]):
            with k.if_(k.warp_idx() == w):
                role(k, pipe, n)
    return k


def _other_ring(bug):
    """Warps 0 and 1 fill rings A and B (a value per lane); warp 2 waits on
    both and reads each; ``bug``: it reads B's buffer with A's state, before
    its wait on B."""
    k = Kernel("other_ring_" + ("bug" if bug else "twin"), block_dim=96,
               params={"out": GlobalPtr(), "n": Int32()})
    lines = {}
    with k:
        out, n = k.args
        bufs = [k.smem_alloc(S * BYTES, align=128, name=x) for x in "AB"]
        rings = [_ring(k, k.alloc_barriers(2 * S), x) for x in "ab"]
        lane = k.lane_idx()
        for w in range(2):
            with k.if_(k.warp_idx() == w):
                s = make_pipeline_state(Producer, S)
                for t, (s,) in k.range(n, carry=[s]):
                    rings[w].producer_acquire(s)
                    if w == 1:
                        lines["store"] = _next_line()
                    store(t, bufs[w].stage(s.index, BYTES), lane)
                    rings[w].producer_commit(s)
                    s.advance()
                rings[w].producer_tail(s)
        with k.if_(k.warp_idx() == 2):
            ca, cb = make_pipeline_state(Consumer, S), make_pipeline_state(Consumer, S)
            a, b = rings
            for t, (ca, cb) in k.range(n, carry=[ca, cb]):
                a.consumer_wait(ca)
                x = load(bufs[0].stage(ca.index, BYTES), i32(), lane)
                if bug:
                    lines["load"] = _next_line()
                    y = load(bufs[1].stage(ca.index, BYTES), i32(), lane)
                a.consumer_release(ca)
                b.consumer_wait(cb)
                if not bug:
                    lines["load"] = _next_line()
                    y = load(bufs[1].stage(cb.index, BYTES), i32(), lane)
                b.consumer_release(cb)
                store(x + y, out, t * 32 + lane)
                ca.advance()
                cb.advance()
    return k, lines


def _handover(form):
    """Warp 4 produces, warps 0-3 consume, then all five meet on named
    barrier 3: ("sites") each role at its own aligned bar.sync, ("one") at
    one bar.sync after the roles join, ("unaligned") each at its own
    barrier.sync."""
    k = Kernel("handover_" + form, block_dim=160, params={"n": Int32()})
    lines = {}
    with k:
        (n,) = k.args
        pipe = _ring(k, k.alloc_barriers(2 * S), "ring", consumers=128)
        bar = NamedBarrier(barrier_id=3, num_threads=160)
        for warps, role in ((k.warp_idx() == 4, _produce), (k.warp_idx() < 4, _consume)):
            with k.if_(warps):
                role(k, pipe, n)
                if form == "sites":
                    lines[role.__name__] = _next_line()
                    bar.sync()
                elif form == "unaligned":
                    bar.wait_unaligned()
        if form == "one":
            bar.sync()
    return k, lines


@pytest.mark.parametrize("form", ["sites", "one", "unaligned"])
def test_aligned_barrier_sites(form):
    k, lines = _handover(form)
    r = k.simulate({"n": N}, schedules=6, check=False)
    if form != "sites":
        assert r.ok, str(r)
        return
    assert r[0].counts == {"divergent-barrier": 6}, str(r)
    text = str(r)
    # Both roles' syncs are built from one line here (the loop over roles).
    assert "synced at another barrier instruction built from the same line" in text, text
    assert all(f"{__file__}:{line}:" in text for line in lines.values()), text


@pytest.mark.parametrize("form", ["dec", "late", "none"])
def test_registers(form):
    k, lines = _registers(form)
    r = k.simulate({"n": N}, schedules=10, check=False)
    if form == "dec":
        assert r.ok, str(r)
        return
    # Every schedule: the increase is a check, not a scheduling point.
    assert r[0].counts == {"deadlock": 10}, str(r)
    text = str(r)
    assert f"waits in setmaxnreg.inc 152 at {__file__}:{lines['inc']}:" in text, text
    if form == "none":
        assert ("registers no warp gives back: every warp starts at 128 per thread (65536 "
                "over 512 threads)") in text, text
    else:
        # The producer's decrease comes after a loop that needs the
        # consumers, which wait for its registers.
        assert (f"that only warp 0 of CTA 0's setmaxnreg.dec 40 at {__file__}:"
                f"{lines['dec']}:") in text and "the two wait for each other" in text, text


@pytest.mark.parametrize("bug", [True, False])
def test_shared_barrier_storage(bug):
    k = _shared_storage(bug)
    r = k.simulate({"n": N}, schedules=20, check=False)
    if not bug:
        assert r.ok, str(r)
        return
    assert r[0].counts and set(r[0].counts) <= {"early-read", "overrun", "overwrite",
                                                  "deadlock"}, str(r)
    # The create's line is the helper's (_ring), where the op is built.
    assert (f"pipeline 'b' (created at {__file__}:" in str(r)
            and "is created on the barrier storage of pipeline 'a'" in str(r)), str(r)


@pytest.mark.parametrize("bug", [True, False])
def test_read_other_ring(bug):
    k, lines = _other_ring(bug)
    r = k.simulate({"n": N}, schedules=10, check=False)
    if not bug:
        assert r.ok, str(r)
        return
    assert r[0].counts == {"smem-race": 10}, str(r)
    text = str(r)
    assert f"llvm.store at {__file__}:{lines['store']}:" in text, text
    assert f"llvm.load at {__file__}:{lines['load']}:" in text, text
