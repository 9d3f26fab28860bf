"""Each bug class, planted in a copy of an example, is caught with a precise message.

A bug is planted by a precise edit of the example's printed IR (the examples
themselves stay correct: test_examples_protocol.py). Each test asserts what
pipeline-verify-protocol and/or pipeline_mlir.sim report, on the message text:
the op, the pipeline (the examples' pipelines are unnamed: the verifier calls
them by class, "PipelineAsync pipeline", the simulator by the SSA name of the
pipeline.create, '%5'), the barrier, stage and phase, and what to fix.

| bug class                               | example              | verifier | simulator |
|-----------------------------------------|----------------------|----------|-----------|
| wrong arrive count (consumer group)     | async_participants   |   yes    | deadlock  |
| wrong arrive count (tma_async consumers)| tma_reduction (2 CTA)|   yes    | deadlock  |
| wrong arrive count (tcgen05 consumer)   | tma_umma_mainloop    |   yes    | deadlock  |
| wrong arrive count (TMA producer group) | tma_umma_mainloop    |   yes    | deadlock  |
| wrong initial phase                     | async_participants   |   yes    | deadlock  |
| missing producer tail                   | tma_reduction (2 CTA)|   yes    | exited-cta|
| missing producer tail, one CTA (warning)| async_participants   | warning  |    -     |
| unbalanced acquire/commit               | async_participants   |   yes    | deadlock  |
| unbalanced wait/release                 | async_participants   |   yes    | deadlock  |
| consumer verb from the producer role    | async_participants   |   yes    | role      |
| state advanced twice                    | async_participants   |   yes    | deadlock  |
| state not advanced                      | async_participants   |   yes    | deadlock  |
| cross-CTA arrive without cluster scope  | tma_reduction (2 CTA)| rejected | overwrite (model) |
| expect_tx above the copies' bytes       | tma_umma_mainloop    |   yes    | deadlock  |
| expect_tx below the copies' bytes       | tma_umma_mainloop    |   yes    | early-read/tx-count |
| store after producer.commit            | async_participants   |   yes    | commit-before-write |
"""

import dataclasses

import mlir.ir as ir
import pytest

import pipeline_mlir

from _example_checks import example_ir, messages, protocol_warnings, simulate, verify_protocol

ASYNC = "async_participants"
UMMA = "tma_umma_mainloop"
CLUSTER = "tma_reduction_cluster"
P_ASYNC = "<async, stages = 4, producer = <thread, 32>, consumer = <thread, 32>>"


def edit(text: str, old: str, new: str, count: int = 1) -> str:
    """Replace ``old`` by ``new``; ``old`` must occur exactly ``count`` times
    (0: at least once, every occurrence), so that an edit never silently
    misses when an example changes."""
    n = text.count(old)
    assert n == count if count else n > 0, f"{old!r} occurs {n} times"
    return text.replace(old, new)


def drop_line(text: str, needle: str) -> str:
    lines = text.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if needle in line]
    assert len(hits) == 1, f"{needle!r} is on {len(hits)} lines"
    del lines[hits[0]]
    return "".join(lines)


def planted(case: str, mutate) -> str:
    text = mutate(example_ir(case))
    assert text != example_ir(case)
    return text


def one_error(diags: list[str]) -> str:
    """The error of a failing verify_protocol run (there must be exactly one)."""
    assert len(diags) == 1, diags
    return diags[0]


def sim_findings(text: str, kernel: str, **kw) -> dict:
    rep = simulate(text, **kw)[kernel]
    assert not rep.ok
    return messages(rep)


# -- wrong arrive counts ------------------------------------------------------

def test_consumer_group_counting_more_threads_than_release():
    # consumer = <thread, 64> but the consumer role is one warp: every empty
    # barrier phase gets 32 of 64 arrivals.
    text = planted(ASYNC, lambda t: edit(t, "consumer = <thread, 32>>", "consumer = <thread, 64>>",
                                         count=0))
    err = one_error(verify_protocol(text))
    assert err.startswith(
        "PipelineAsync pipeline: the consumer group #pipeline.group<thread, 64> expects 64 "
        "arrivals per phase, but the consumer role (one warp, whole-warp consumer.release) gives "
        "32: the empty barrier never completes and the producers wait forever; use "
        "#pipeline.group<thread, 32>")
    assert "note: the consumer role releases here" in err
    found = sim_findings(text, ASYNC)
    assert list(found) == ["deadlock"]
    assert found["deadlock"].startswith(
        "producer warp 0 of CTA 0 waits on pipeline '%5' empty barrier stage 0 phase 0 in "
        "producer.acquire (phase 0 (#0) has 32 of 64 arrivals)")


@pytest.mark.parametrize("group", ["<thread, 128>", "<warp, 4>"])
def test_tma_async_consumer_group_counting_threads(group):
    # tma_async consumers release from signalling lanes: one arrive per
    # consumer warp (4) on each of the 2 multicast CTAs, 8 per phase.
    text = planted(CLUSTER, lambda t: edit(t, "consumer = <thread, 8>", f"consumer = {group}",
                                           count=0))
    err = one_error(verify_protocol(text))
    assert err.startswith(
        f"PipelineTmaAsync pipeline: the consumer group #pipeline.group{group} expects 128 "
        "arrivals per phase, but the consumer role (4 warps, whole-warp consumer.release: one "
        "signalling-lane arrive per warp from each of the 2 multicast CTAs) gives 8: the empty "
        "barrier never completes and the producers wait forever; use #pipeline.group<thread, 8>")
    found = sim_findings(text, CLUSTER)
    assert found["deadlock"].startswith(
        "producer warp 0 of CTA 0 waits on pipeline '%5' empty barrier stage 0 phase 0 in "
        "producer.acquire (phase 0 (#0) has 8 of 128 arrivals)")


def test_tcgen05_consumer_group_counting_a_warp():
    # The MMA warp releases with one elected tcgen05.commit: 1 arrival, not 32.
    text = planted(UMMA, lambda t: edit(t, "producer = <thread, 1>, consumer = <thread, 1>",
                                        "producer = <thread, 1>, consumer = <thread, 32>",
                                        count=0))
    err = one_error(verify_protocol(text))
    assert err.startswith(
        "PipelineTmaUmma pipeline: the consumer group #pipeline.group<thread, 32> expects 32 "
        "arrivals per phase, but the consumer role (one warp, one elected tcgen05.commit per "
        "warp) gives 1: the empty barrier never completes and the producers wait forever; use "
        "#pipeline.group<thread, 1>")
    found = sim_findings(text, UMMA)
    assert found["deadlock"].startswith(
        "producer warp 0 of CTA 0 waits on pipeline '%6' empty barrier stage 0 phase 0 in "
        "producer.acquire (phase 0 (#0) has 1 of 32 arrivals)")


def test_tma_producer_group_counting_two_arrivals():
    text = planted(UMMA, lambda t: edit(t, "producer = <thread, 1>", "producer = <thread, 2>",
                                        count=0))
    assert one_error(verify_protocol(text)).startswith(
        "PipelineTmaUmma pipeline: the producer group #pipeline.group<thread, 2> makes each full "
        "barrier expect 2 arrivals, but producer.acquire arrives once (one elected "
        "arrive.expect_tx) from 1 single-warp producer role: the stage never completes and "
        "consumers wait forever (a TMA producer group is #pipeline.group<thread, 1>)")
    found = sim_findings(text, UMMA)
    assert "consumer warp 1 of CTA 0 waits on pipeline '%6' full barrier stage 0 phase 0 in " \
           "consumer.wait (phase 0 (#0) has 1 of 2 arrivals" in found["deadlock"]


# -- wrong initial phase ------------------------------------------------------

def test_producer_state_made_at_phase_0():
    text = planted(ASYNC, lambda t: edit(
        t, "%6 = pipeline.state.make : <4, producer>",
        "%6 = pipeline.state.make index %c0_i32 phase %c0_i32 : <4, producer>"))
    err = one_error(verify_protocol(text))
    assert err.startswith(
        "producer state starts at phase 0: producer states start at phase 1 because buffers "
        "start empty; with phase 0 the first producer.acquire waits forever (use phase 1, or "
        "pipeline.state.make without operands; a state resumed mid-stream gives its count)")
    assert "note: phase given here" in err
    assert ("note: first pipeline.producer.acquire of this side on PipelineAsync pipeline "
            "reads it") in err
    found = sim_findings(text, ASYNC)
    assert found["deadlock"].startswith(
        "producer warp 0 of CTA 0 waits on pipeline '%5' empty barrier stage 0 phase 0 in "
        "producer.acquire (phase 0 (#0) has 0 of 32 arrivals)")


# -- missing producer tail ----------------------------------------------------

def test_missing_producer_tail_in_a_cluster():
    text = planted(CLUSTER, lambda t: drop_line(t, "pipeline.producer.tail"))
    err = one_error(verify_protocol(text))
    assert err.startswith(
        "PipelineTmaAsync pipeline: producer role exits without pipeline.producer.tail: consumers "
        "in peer CTAs may still arrive on this CTA's barriers (add pipeline.producer.tail with "
        "the state the producer ends with, after the loop)")
    assert "note: last pipeline.producer.acquire of this role" in err
    found = sim_findings(text, CLUSTER)
    assert list(found) == ["exited-cta"]
    assert found["exited-cta"].endswith(
        "has already exited (missing producer_tail: a CTA must not exit while peers still "
        "signal its barriers)")
    assert "arrives on pipeline '%5' empty barrier stage" in found["exited-cta"]


def test_missing_producer_tail_in_one_cta_is_a_warning():
    # With one CTA and consumers arriving with mbarrier.arrive nothing can
    # arrive after the CTA exits: the verifier warns (CuTe DSL's convention),
    # the simulator finds nothing.
    text = planted(ASYNC, lambda t: drop_line(t, "pipeline.producer.tail"))
    assert verify_protocol(text) == []
    (warning,) = protocol_warnings(text)
    assert warning.startswith(
        "PipelineAsync pipeline: producer role exits without pipeline.producer.tail: not needed "
        "here (one CTA, consumers arrive synchronously: nothing can arrive after the CTA exits)")
    assert simulate(text)[ASYNC].ok


# -- unbalanced acquire/commit, wait/release ----------------------------------

def test_dropped_producer_commit():
    text = planted(ASYNC, lambda t: drop_line(t, "pipeline.producer.commit"))
    assert one_error(verify_protocol(text)).startswith(
        "PipelineAsync pipeline: loop body acquires 1 stage but commits 0; every "
        "pipeline.producer.acquire needs a pipeline.producer.commit on the same state (add the "
        "missing pipeline.producer.commit before the state advances)")
    found = sim_findings(text, ASYNC)
    assert found["deadlock"].endswith(
        "consumer warp 1 of CTA 0 waits on pipeline '%5' full barrier stage 0 phase 0 in "
        "consumer.wait (phase 0 (#0) has 0 of 32 arrivals)")


def test_dropped_consumer_release():
    text = planted(ASYNC, lambda t: drop_line(t, "pipeline.consumer.release"))
    assert one_error(verify_protocol(text)).startswith(
        "PipelineAsync pipeline: loop body waits on 1 stage but releases 0; every "
        "pipeline.consumer.wait needs a pipeline.consumer.release on the same state (add the "
        "missing pipeline.consumer.release before the state advances)")
    found = sim_findings(text, ASYNC)
    assert found["deadlock"].startswith(
        "producer warp 0 of CTA 0 waits on pipeline '%5' empty barrier stage 0 phase 0 in "
        "producer.acquire (phase 0 (#0) has 0 of 32 arrivals)")


# -- consumer verb from the producer role -------------------------------------

def test_consumer_release_in_the_producer_branch():
    text = planted(ASYNC, lambda t: edit(
        t, "          pipeline.producer.commit %5, %arg3",
        f"          pipeline.consumer.release %5, %7 : {P_ASYNC}, <4, consumer>\n"
        "          pipeline.producer.commit %5, %arg3"))
    diags = verify_protocol(text)
    role = [d for d in diags if "issued from the producer role" in d]
    assert len(role) == 1, diags
    assert role[0].startswith(
        "PipelineAsync pipeline: pipeline.consumer.release issued from the producer role while "
        "another role consumes this pipeline: the producer threads' consumer arrives are not in "
        "the consumer group's count and the stages go out of step (NVIDIA/cutlass#2126); move "
        "the consumer verbs to the consumer role, or make a role that does both use "
        "producer_consumer states")
    assert "note: this role produces here" in role[0]
    found = sim_findings(text, ASYNC)
    assert found["role"] == (
        "producer warp 0 of CTA 0 issues consumer.release on pipeline '%5': a consumer verb "
        "from the producer role (it used producer verbs of that pipeline before)")


# -- a state advanced twice or not at all --------------------------------------

YIELD = "          scf.yield %14 : !pipeline.state<4, producer>"


def test_state_advanced_twice():
    text = planted(ASYNC, lambda t: edit(
        t, YIELD, "          %twice = pipeline.state.advance %14 : <4, producer>\n"
                  "          scf.yield %twice : !pipeline.state<4, producer>"))
    err = one_error(verify_protocol(text))
    assert err.startswith(
        "PipelineAsync pipeline: state advanced twice per iteration but the loop body acquires "
        "1 stage: the skipped stages are never filled or released and the pipeline deadlocks "
        "(advance once per stage used)")
    assert "note: the state also advances here" in err
    found = sim_findings(text, ASYNC)
    # Stage 1 is skipped: the consumer waits there while the producer moves on.
    assert "consumer warp 1 of CTA 0 waits on pipeline '%5' full barrier stage 1 phase 0 in " \
           "consumer.wait (phase 0 (#0) has 0 of 32 arrivals)" in found["deadlock"]


def test_state_not_advanced():
    text = planted(ASYNC, lambda t: edit(
        t, YIELD, "          scf.yield %arg3 : !pipeline.state<4, producer>"))
    err = one_error(verify_protocol(text))
    assert err.startswith(
        "PipelineAsync pipeline: the state carried by this loop never advances: the loop waits "
        "on the same stage forever (yield `pipeline.state.advance` of the state once per stage "
        "used)")
    assert "note: the loop yields the state unchanged" in err
    found = sim_findings(text, ASYNC)
    assert found["deadlock"].startswith(
        "producer warp 0 of CTA 0 waits on pipeline '%5' empty barrier stage 0 phase 1 in "
        "producer.acquire (phase 1 (#1) has 0 of 32 arrivals)")


# -- cross-CTA arrives without cluster scope -----------------------------------

CLUSTER_TYPE = ", cluster = <1, 2, 1, 1>, multicast = m>"


def test_multicast_into_a_pipeline_without_a_cluster_is_rejected():
    # The copies still multicast to both CTAs (mask 0b11) but the type has no
    # cluster: consumers would release only locally.
    text = planted(CLUSTER, lambda t: edit(t, CLUSTER_TYPE, ">", count=0))
    err = one_error(verify_protocol(text))
    assert err == ("'pipeline.copy.tma_load' op multicast needs a pipeline with a cluster of "
                   "more than one CTA")


def test_multicast_without_declared_multicast_is_rejected():
    text = planted(CLUSTER, lambda t: edit(t, CLUSTER_TYPE, ", cluster = <1, 2, 1, 1>>",
                                           count=0))
    assert "'pipeline.copy.tma_load' op multicast needs a pipeline declared with multicast = "\
           "m, n or mn, so that consumers release the stage to the CTAs that write into it" \
           in one_error(verify_protocol(text))


def test_cta_scope_release_under_multicast_overwrites_in_the_simulator():
    # The dialect cannot express the bug, so plant it in the simulator's model
    # of the example: the same IR (multicast loads, mask 0b11, 2 CTAs) with a
    # pipeline spec of CTA scope (no cluster; one arrival per consumer warp,
    # as for a single CTA). The peer's copy then writes a stage that this
    # CTA's consumers still hold (NVIDIA/cutlass#3643).
    from pipeline_mlir.sim.engine import explore
    from pipeline_mlir.sim.frontend import kernels
    from pipeline_mlir.sim.interp import Launch, make_world_factory
    from pipeline_mlir.sim.verbs import Group
    with pipeline_mlir.make_context():
        (k,) = kernels(ir.Module.parse(example_ir(CLUSTER)))
        k.pipes[0] = dataclasses.replace(k.pipes[0], cluster=None, multicast="none",
                                         consumer=Group("thread", 4))
        rep = explore(make_world_factory(k, Launch(k.block_dim, (2, 1, 1), 6)), seed=0,
                      schedules=50)
    assert set(rep.counts) == {"overwrite"}
    msg = messages(rep)["overwrite"]
    assert msg.startswith("copy.tma_load of producer warp 0 of CTA ")
    assert msg.endswith("still holds it (between its wait and its release): buffer "
                        "overwritten before its release")
    # The write crosses CTAs: the copy's CTA and the stage's CTA differ.
    src, dst = msg.split(" of CTA ")[1][0], msg.split(" of CTA ")[2][0]
    assert src != dst, msg


# -- expect_tx bytes that differ from what the copies deliver ------------------

def test_tx_count_above_the_copies():
    text = planted(UMMA, lambda t: edit(t, "tx_count = 32768", "tx_count = 49152", count=0))
    err = one_error(verify_protocol(text))
    assert err.startswith(
        "PipelineTmaUmma pipeline: producer.acquire expects 49152 bytes (tx_count 49152) but the "
        "2 copies bound to this stage deliver 32768: the full barrier never completes and "
        "consumers wait forever (make tx_count the bytes of one stage's copies)")
    assert err.count("note: copy of 16384 bytes") == 2
    found = sim_findings(text, UMMA)
    # The root cause leads the report (then who waits where).
    assert found["deadlock"].startswith(
        "root cause: 16384 tx bytes outstanding on pipeline '%6' full barrier stage 0 of CTA 0 (armed "
        "49152, delivered 32768): the copies deliver fewer bytes than expect_tx armed")
    assert found["deadlock"].endswith(
        "consumer warp 1 of CTA 0 waits on pipeline '%6' full barrier stage 0 phase 0 in "
        "consumer.wait (phase 0 (#0) has 1 of 1 arrivals, 16384 tx bytes outstanding (armed "
        "49152, delivered 32768))")


def test_tx_count_below_the_copies():
    text = planted(UMMA, lambda t: edit(t, "tx_count = 32768", "tx_count = 16384", count=0))
    assert one_error(verify_protocol(text)).startswith(
        "PipelineTmaUmma pipeline: producer.acquire expects 16384 bytes (tx_count 16384) but the "
        "2 copies bound to this stage deliver 32768: the phase completes before every byte "
        "landed and consumers read a partly filled stage")
    found = sim_findings(text, UMMA)
    assert found.get("tx-count", "").endswith(
        "completes 16384 tx bytes on pipeline '%6' full barrier stage 0 of CTA 0 after phase 0 "
        "(#0) had already completed: the copies deliver more bytes than expect_tx armed for "
        "that phase")
    assert found.get("early-read", "").startswith(
        "consumer warp 1 of CTA 0 reads pipeline '%6' stage 0 of CTA 0 while copy.tma_load of "
        "producer warp 0 of CTA 0 into stage 0 still writes it")


# -- a commit that precedes the writes it publishes ----------------------------

def test_store_after_producer_commit():
    # The producer's store into the stage moved below producer.commit: the
    # consumer may read the stage before the value lands.
    store = "          llvm.store %16, %20 : i32, !llvm.ptr<3>\n"
    commit = f"          pipeline.producer.commit %5, %arg3 : {P_ASYNC}, <4, producer>\n"
    text = planted(ASYNC, lambda t: edit(t, store + commit, commit + store))
    err = one_error(verify_protocol(text))
    assert err.startswith(
        "PipelineAsync pipeline: llvm.store writes the stage that producer.commit already "
        "published (its address comes from the committed state's index), before the next "
        "producer.acquire: the consumers may read the stage before this write lands (silent "
        "corruption); move the write before producer.commit")
    assert "note: the stage is committed here" in err
    assert "note: the write's address is computed from this stage index" in err
    found = sim_findings(text, ASYNC)
    assert list(found) == ["commit-before-write"]
    assert found["commit-before-write"].startswith(
        "producer warp 0 of CTA 0 writes pipeline '%5' stage 0 of CTA 0 with llvm.store")


@pytest.mark.parametrize("case", [ASYNC, UMMA, CLUSTER])
def test_the_edits_apply_to_unmodified_examples(case):
    # Sanity of the harness: the unedited IR passes both tools.
    assert verify_protocol(example_ir(case)) == []
    assert simulate(example_ir(case), schedules=5)[case].ok
