"""The simulator's holds of a stage by a role whose warps all wait on it
and one thread releases it for all (a consumer group of 1).

After a named barrier over the role (every warp's reads of the stage
happen before it), one thread's release ends the hold of every warp of the
CTA that the release has seen (``verbs._end_covered_holds``): the stage is
the producer's again, no overwrite. Without the barrier the other warps
still read when the producer refills it: a buffer overwritten, at the
user's line (triton-lang/triton#10035's form)."""


import pytest

from pipeline_mlir.kernel import Int32, Kernel
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, make_pipeline_state, NamedBarrier,
                                    PipelineAsync, PipelineUserType)

from _held_out_bugs import _next_line

S = 4


def _kernel(form):
    """Warp 0 produces; warps 1-4 each wait on every stage; then ("barrier")
    they meet on named barrier 1 and thread 32 releases for all, ("none")
    thread 32 releases right after its own wait, or ("after") the barrier
    comes after the release."""
    k = Kernel(f"role_release_{form}", block_dim=160, params={"n": Int32()})
    lines = {}
    with k:
        (n,) = k.args
        pipe = PipelineAsync.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, 1),
            barrier_storage=k.alloc_barriers(2 * S), name="ring")
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(PipelineUserType.Producer, S)
            for _, (s,) in k.range(n, carry=[s]):
                lines["acquire"] = _next_line()
                pipe.producer_acquire(s)
                pipe.producer_commit(s)
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() >= 1):
            role = NamedBarrier(1, 128)
            c = make_pipeline_state(PipelineUserType.Consumer, S)
            for _, (c,) in k.range(n, carry=[c]):
                lines["wait"] = _next_line()
                pipe.consumer_wait(c)
                if form == "barrier":
                    role.sync()
                with k.if_(k.thread_idx() == 32):
                    pipe.consumer_release(c)
                if form == "after":
                    role.sync()
                c.advance()
    return k, lines


@pytest.fixture(scope="module")
def results():
    out = {}
    for form in ("barrier", "none", "after"):
        k, lines = _kernel(form)
        out[form] = (k.simulate({"n": 3 * S + 1}, schedules=12, check=False), lines)
    return out


def test_one_thread_releasing_after_a_role_barrier_passes(results):
    r, _ = results["barrier"]
    assert r.ok, str(r)


@pytest.mark.parametrize("form", ["none", "after"])
def test_one_thread_releasing_without_a_barrier_before_it_overwrites(results, form):
    r, lines = results[form]
    assert "overwrite" in {f.kind for f in r.findings}, str(r)
    text = str(r)
    assert "still holds it" in text, text
    # the producer's acquire and the waits of the warps still holding the stage
    assert f"{__file__}:{lines['acquire']}:" in text and f"{__file__}:{lines['wait']}:" in text, text
