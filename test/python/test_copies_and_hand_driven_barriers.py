"""Two blind spots of the checker users reported, through the Python API, each bug with its
correct twin.

Class 2 (and 14): copies onto a stage never acquired. A ``tma_load`` /
``bulk_copy`` runs between ``producer_acquire`` and ``producer_commit`` of
the state it names (pipeline-verify-protocol check 12,
``CopyInsideAcquire.cpp``). Before the acquire -- an acquire swapped after
its tma_load -- it may overwrite a stage the consumers still read, and its
bytes land before the full barrier is armed; with no acquire at all, on a
barrier nobody armed; after the commit, the stage already belongs to the
consumers. Every count adds up in these kernels (bytes = tx_count, one
commit per acquire), which is why the other checks let them through.

Class 6: barriers driven by hand next to pipelines. ``MbarrierArray`` and
the handle of ``producer_get_barrier`` escape the protocol checker and the
simulator, so the builders issue an ``UncheckedBarrierWarning`` at the
user's line, once per kernel, and never for the pipeline verbs. What the
checker can decide, it does (check 13, ``BarrierHandleChecks.cpp``): an
arrive of one's own on the handle is one arrival too many per phase
(cutlass#2364).
"""

import inspect
import re
import warnings

import pytest

import mlir.ir as ir
from mlir.dialects import arith, nvvm

from pipeline_mlir import compiler
from pipeline_mlir.diagnostics import CompileError
from pipeline_mlir.kernel import Kernel, TmaDescriptor
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, MbarrierArray,
                                    PipelineAsync, PipelineOp,
                                    PipelineTmaAsync, PipelineUserType,
                                    UncheckedBarrierWarning,
                                    make_pipeline_state, pipeline_init_arrive,
                                    pipeline_init_wait)

T1 = CooperativeGroup(Agent.Thread, 1)
T32 = CooperativeGroup(Agent.Thread, 32)
Producer, Consumer = PipelineUserType.Producer, PipelineUserType.Consumer
STAGE = 8192


def here():
    """The caller's line number."""
    return inspect.currentframe().f_back.f_lineno


def check(k):
    """Run the checker (and the lowering to NVVM) on the kernel; the
    CompileError's text, or None when it is accepted."""
    try:
        compiler.to_nvvm(k.module, chip=k.chip)
    except CompileError as err:
        return str(err)
    return None


def tma_kernel(producer_body):
    """Warp 4 produces into a 2-stage PipelineTmaAsync 'ab' with
    ``producer_body(k, p, s, buf)`` per k-tile; warps 0-3 consume."""
    k = Kernel("k", block_dim=160, params={"a": TmaDescriptor()})
    with k:
        p = PipelineTmaAsync.create(num_stages=2, producer_group=T1,
                                    consumer_group=CooperativeGroup(Agent.Thread, 4),
                                    barrier_storage=k.alloc_barriers(4),
                                    tx_count=STAGE, name="ab")
        buf = k.smem_alloc(2 * STAGE, align=1024)
        warp = k.warp_idx()
        with k.if_(warp == 4):
            s = make_pipeline_state(Producer, 2)
            for _, (s,) in k.range(8, carry=[s]):
                producer_body(k, p, s, buf)
                s.advance()
            p.producer_tail(s)
        with k.if_(warp < 4):
            c = make_pipeline_state(Consumer, 2)
            for _, (c,) in k.range(8, carry=[c]):
                p.consumer_wait(c)
                p.consumer_release(c)
                c.advance()
    return k


def load(k, p, s, buf, nbytes=STAGE):
    with k.elect_one():
        p.tma_load(s, k.args.a, [0, 0], buf.stage(s.index, STAGE), nbytes)


# -- class 2 / 14: copies outside producer_acquire ... producer_commit ---------

def test_acquire_swapped_after_its_tma_load_is_reported():
    lines = {}

    def body(k, p, s, buf):
        lines["copy"] = here() + 2
        with k.elect_one():
            p.tma_load(s, k.args.a, [0, 0], buf.stage(s.index, STAGE), STAGE)
        p.producer_acquire(s); lines["acquire"] = here()
        p.producer_commit(s)

    err = check(tma_kernel(body))
    assert err is not None
    first, *notes = err.splitlines()
    assert first == (
        f"{__file__}:{lines['copy']}:13: error: pipeline 'ab': tma_load runs before the "
        "producer_acquire of its state (a stage's copies go between producer_acquire and "
        "producer_commit of the state they name): the copy may overwrite the buffer while "
        "consumers of the previous lap still read it, and its bytes land before "
        "producer_acquire arms the full barrier for them (move producer_acquire before "
        "the copy)")
    assert any(n.strip().startswith(f"{__file__}:{lines['acquire']}:")
               and "producer_acquire of this state, after the copy" in n for n in notes)


def test_acquire_before_its_tma_load_is_accepted():
    def body(k, p, s, buf):
        p.producer_acquire(s)
        load(k, p, s, buf)
        p.producer_commit(s)

    assert check(tma_kernel(body)) is None


def test_copy_with_no_acquire_is_reported():
    # A prologue that fills the first stage before the main loop and
    # forgets its acquire: the loop's own stages are acquired.
    lines = {}
    k = Kernel("k", block_dim=160, params={"a": TmaDescriptor()})
    with k:
        p = PipelineTmaAsync.create(num_stages=2, producer_group=T1,
                                    consumer_group=CooperativeGroup(Agent.Thread, 4),
                                    barrier_storage=k.alloc_barriers(4),
                                    tx_count=STAGE, name="ab")
        buf = k.smem_alloc(2 * STAGE, align=1024)
        warp = k.warp_idx()
        with k.if_(warp == 4):
            s = make_pipeline_state(Producer, 2)
            with k.elect_one():
                p.tma_load(s, k.args.a, [0, 0], buf.stage(s.index, STAGE), STAGE)
                lines["copy"] = here() - 1
            p.producer_commit(s)
            s.advance()
            for _, (s,) in k.range(1, 8, carry=[s]):
                p.producer_acquire(s)
                load(k, p, s, buf)
                p.producer_commit(s)
                s.advance()
            p.producer_tail(s)
        with k.if_(warp < 4):
            c = make_pipeline_state(Consumer, 2)
            for _, (c,) in k.range(8, carry=[c]):
                p.consumer_wait(c)
                p.consumer_release(c)
                c.advance()
    err = check(k)
    assert err is not None
    # The stage-balance check (11) also counts 7 acquires against 8
    # releases; this one names the copy and the fix.
    (line,) = [ln for ln in err.splitlines() if "tma_load fills a stage" in ln]
    assert line.startswith(
        f"{__file__}:{lines['copy']}:17: error: pipeline 'ab': tma_load fills a stage that no "
        "producer_acquire of its state acquired (a stage's copies go between producer_acquire "
        "and producer_commit of the state they name)")
    assert "(call producer_acquire with this state before the copy)" in line


def test_copy_after_commit_is_reported_and_before_commit_accepted():
    lines = {}

    def late(k, p, s, buf):
        p.producer_acquire(s)
        load(k, p, s, buf, STAGE // 2)
        p.producer_commit(s); lines["commit"] = here()
        with k.elect_one():
            p.tma_load(s, k.args.a, [0, 1], buf.stage(s.index, STAGE), STAGE // 2)
            lines["copy"] = here() - 1

    def on_time(k, p, s, buf):
        p.producer_acquire(s)
        load(k, p, s, buf, STAGE // 2)
        with k.elect_one():
            p.tma_load(s, k.args.a, [0, 1], buf.stage(s.index, STAGE), STAGE // 2)
        p.producer_commit(s)

    err = check(tma_kernel(late))
    assert err is not None
    first, *notes = err.splitlines()
    assert first.startswith(f"{__file__}:{lines['copy']}:")
    assert ("tma_load runs after the producer_commit of its state (a stage's copies go "
            "between producer_acquire and producer_commit of the state they name)") in first
    assert "(move the copy before producer_commit)" in first
    assert any(n.strip().startswith(f"{__file__}:{lines['commit']}:") for n in notes)
    assert check(tma_kernel(on_time)) is None


# -- class 6: barriers driven by hand ------------------------------------------

def unchecked(record):
    return [w for w in record if issubclass(w.category, UncheckedBarrierWarning)]


def test_mbarrier_array_warns_once_per_kernel_at_the_users_line():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        k = Kernel("k", block_dim=64)
        with k:
            bars = k.alloc_barriers(4)
            line = here() + 1
            m = MbarrierArray(bars, 4, (PipelineOp.AsyncThread, CooperativeGroup(Agent.Warp, 2)))
            m.arrive(1)
            m.arrive(1)
            m.wait(1, 0)
        # A second kernel is warned again, at its own first use.
        k2 = Kernel("k2", block_dim=64)
        with k2:
            bars = k2.alloc_barriers(2)
            line2 = here() + 1
            m2 = MbarrierArray(bars, 2, (PipelineOp.AsyncThread, CooperativeGroup(Agent.Warp, 2)))
            m2.arrive(0)
            m2.wait(0, 0)
    found = unchecked(record)
    assert [(w.filename, w.lineno) for w in found] == [(__file__, line), (__file__, line2)]
    msg = str(found[0].message)
    assert msg.startswith(
        "MbarrierArray drives an mbarrier by hand: the protocol checker "
        "(pipeline-verify-protocol) and the simulator (pipeline-sim) do not model such "
        "barriers, so their arrive counts, phases and init order go unchecked")
    assert "Use a pipeline class (PipelineAsync, PipelineTmaAsync, ...) and its verbs" in msg
    assert str(found[1].message) == msg


def test_producer_get_barrier_warns_at_the_users_line():
    def body(k, p, s, buf):
        p.producer_acquire(s)
        load(k, p, s, buf)
        body.line = here() + 1
        p.producer_get_barrier(s)
        p.producer_get_barrier(s)  # the same kernel: no second warning
        p.producer_commit(s)

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        tma_kernel(body)
    found = unchecked(record)
    assert [(w.filename, w.lineno) for w in found] == [(__file__, body.line)]
    assert str(found[0].message).startswith("producer_get_barrier(state) drives an mbarrier by hand")
    assert "Issue the stage's copies with tma_load(state, ...)" in str(found[0].message)


def test_the_pipeline_verbs_do_not_warn():
    # Every example, GEMM, attention kernel, skeleton and GPU-suite kernel
    # (the CLC scheduler of the persistent Blackwell GEMM included: its
    # request names the barrier inside the library) builds without one.
    from test_stage_balance import KERNELS

    built = 0
    for case, build in sorted(KERNELS.items()):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            try:
                build()
            except Exception:  # noqa: BLE001 -- test_stage_balance reports it
                continue
        built += 1
        assert not unchecked(record), (case, [str(w.message) for w in unchecked(record)])
    assert built >= 40, built


def raw_arrive_kernel(arrive):
    """A PipelineAsync producer that takes the stage's barrier handle and,
    with ``arrive``, arrives on it by hand besides producer_commit."""
    k = Kernel("k", block_dim=64)
    with k:
        p = PipelineAsync.create(num_stages=2, producer_group=T32, consumer_group=T32,
                                 barrier_storage=k.alloc_barriers(4), name="ring")
        warp = k.warp_idx()
        with k.if_(warp == 0):
            s = make_pipeline_state(Producer, 2)
            for _, (s,) in k.range(4, carry=[s]):
                p.producer_acquire(s)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UncheckedBarrierWarning)
                    bar = p.producer_get_barrier(s); k.handle_line = here()
                if arrive:
                    # A raw op built from Python has no location: the error
                    # is at the handle's line.
                    i64 = ir.IntegerType.get_signless(64)
                    nvvm.mbarrier_arrive(i64, bar.ir_value)
                p.producer_commit(s)
                s.advance()
            p.producer_tail(s)
        with k.if_(warp == 1):
            c = make_pipeline_state(Consumer, 2)
            for _, (c,) in k.range(4, carry=[c]):
                p.consumer_wait(c)
                p.consumer_release(c)
                c.advance()
    return k


def test_a_second_arrive_per_phase_on_the_barrier_handle_is_reported():
    # cutlass#2364: producer_commit already arrives on the full barrier; an
    # arrive of one's own on producer_get_barrier's handle is one too many.
    k = raw_arrive_kernel(arrive=True)
    err = check(k)
    assert err is not None
    first = err.splitlines()[0]
    assert first.startswith(f"{__file__}:{k.handle_line}:")
    assert ("error: pipeline 'ring': nvvm.mbarrier.arrive on the stage's full barrier from "
            "producer_get_barrier(state) (rule: a pipeline's barriers are driven only by its "
            "verbs): producer_commit already gives each phase its arrivals, so this is one "
            "arrival too many per phase") in first
    assert "(drop the arrive and publish the stage with producer_commit)" in first
    # The twin: the handle taken, nothing arrives on it by hand.
    assert check(raw_arrive_kernel(arrive=False)) is None


def test_the_simulator_counts_a_raw_arrive_on_the_barrier_handle():
    # The same kernels in the simulator: the raw arrive is an arrival on
    # the stage's full barrier (before it was modelled, the bug ran clean).
    # The warp's 32 arrivals complete each phase before producer_commit,
    # whose 32 complete the next one: the consumers read the stage early or
    # find its phase overrun, by schedule. (A TMA producer's raw arrive is
    # an arrive-count finding: test/Sim/bug_raw_arrive.mlir.)
    rep = raw_arrive_kernel(arrive=True).simulate(check=False, schedules=30)
    assert not rep.ok
    summary = str(rep).splitlines()[-1]
    assert summary.startswith("pipeline-sim: FAILED: 30 schedules, "), summary
    assert set(re.findall(r"\d+ ([a-z-]+)", summary.split("(")[0])) <= {
        "schedules", "early-read", "overrun", "arrive-count"}, summary
    assert raw_arrive_kernel(arrive=False).simulate(check=False, schedules=30).ok


def deferred_kernel(sync):
    """A PipelineAsync created with defer_sync=True; ``sync``: call
    pipeline_init_arrive / pipeline_init_wait before the roles run."""
    k = Kernel("k", block_dim=64)
    with k:
        p = PipelineAsync.create(num_stages=2, producer_group=T32, consumer_group=T32,
                                 barrier_storage=k.alloc_barriers(4), name="ring",
                                 defer_sync=True)
        if sync:
            pipeline_init_arrive()
            pipeline_init_wait()
        warp = k.warp_idx()
        with k.if_(warp == 0):
            s = make_pipeline_state(Producer, 2)
            for _, (s,) in k.range(4, carry=[s]):
                p.producer_acquire(s); k.acquire_line = here()
                p.producer_commit(s)
                s.advance()
            p.producer_tail(s)
        with k.if_(warp == 1):
            c = make_pipeline_state(Consumer, 2)
            for _, (c,) in k.range(4, carry=[c]):
                p.consumer_wait(c)
                p.consumer_release(c)
                c.advance()
    return k


def test_a_deferred_create_used_before_its_init_sync_is_reported():
    # defer_sync=True leaves the fence and CTA sync after mbarrier.init to
    # pipeline_init_arrive / pipeline_init_wait; without them the producer
    # may arm a barrier whose init it has not seen.
    k = deferred_kernel(sync=False)
    err = check(k)
    assert err is not None
    first = err.splitlines()[0]
    assert first.startswith(f"{__file__}:{k.acquire_line}:")
    assert ("error: pipeline 'ring': producer_acquire uses a pipeline created with defer_sync "
            "before any pipeline_init_wait() (rule: a deferred create's barriers are "
            "initialized by one thread and become visible to the others only through the "
            "post-init sync)") in first
    assert ("(call pipeline_init_arrive() and pipeline_init_wait() after the creates and "
            "before the first use, or drop defer_sync)") in first
    assert check(deferred_kernel(sync=True)) is None


# -- check 12 generalizes: mutants of every kernel of the project --------------

_ACQUIRE = re.compile(r"^(\s*)pipeline\.producer\.acquire (%[\w#]+), (%[\w#]+)")


def _order_mutants(text):
    """(kind, mutated text) for the first producer_acquire ... producer_commit
    pair with copies of each pipeline of ``text``: the acquire moved after
    the copies, the commit moved before them, the acquire dropped."""
    lines = text.splitlines(keepends=True)
    seen = set()
    for i, line in enumerate(lines):
        m = _ACQUIRE.match(line)
        if not m or m.group(2) in seen:
            continue
        ind, p, s = m.groups()
        commit = re.compile(rf"^{re.escape(ind)}pipeline\.producer\.commit {re.escape(p)}, "
                            rf"{re.escape(s)}\b")
        j = next((j for j in range(i + 1, len(lines)) if commit.match(lines[j])), None)
        if j is None:
            continue
        body = "".join(lines[i + 1:j])
        if f"copy.tma_load {p}, {s}" not in body and f"copy.bulk {p}, {s}" not in body:
            continue
        seen.add(p)
        yield "acquire after the copies", "".join(lines[:i] + lines[i + 1:j] + [lines[i]] + lines[j:])
        yield "commit before the copies", "".join(lines[:i + 1] + [lines[j]] + lines[i + 1:j]
                                                  + lines[j + 1:])
        yield "acquire dropped", "".join(lines[:i] + lines[i + 1:])


def test_moved_or_dropped_acquires_of_every_kernel_are_reported():
    # Every TMA producer of the examples, GEMMs, attention kernels,
    # skeletons and GPU-suite kernels, with its acquire moved after its
    # copies, its commit moved before them, or its acquire dropped: each
    # mutant is rejected by check 12, naming the rule.
    from test_stage_balance import KERNELS, check as run_checker

    mutants = 0
    for case, build in sorted(KERNELS.items()):
        try:
            text = build()
        except Exception:  # noqa: BLE001 -- test_stage_balance reports it
            continue
        for kind, mutant in _order_mutants(text):
            errors, _ = run_checker(mutant)
            assert any("a stage's copies go between producer.acquire and producer.commit"
                       in e for e in errors), (case, kind, errors)
            mutants += 1
    assert mutants >= 60, mutants
