"""Every simulator finding names the user's lines: each kind of bug, built
through the Python API, is reported with this file's line of the op
involved (and, for what pipeline.create declares, the create's line),
whatever location wraps it (call sites, fused, named)."""

import inspect
import re

import mlir.ir as ir
import pytest

from pipeline_mlir.kernel import Int32, Kernel, TmaDescriptor
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync, PipelineState,
                                    PipelineTmaAsync, PipelineUserType, make_pipeline_state)
from pipeline_mlir.sim import simulate
from pipeline_mlir.sim.frontend import user_loc

HERE = __file__
P, C = PipelineUserType.Producer, PipelineUserType.Consumer


def here():
    """The caller's line."""
    return inspect.currentframe().f_back.f_lineno


def ring(bug, lines):
    """A PipelineAsync ring: warp 0 produces, warps 1.. consume. ``bug``
    plants one mistake; ``lines`` receives the lines of the ops involved."""
    k = Kernel("ring", block_dim=96 if bug == "two consumers" else 64, params={"n": Int32()})
    with k:
        (n,) = k.args
        pipe = PipelineAsync.create(
            num_stages=2,
            producer_group=CooperativeGroup(Agent.Thread, 1 if bug == "arrive count" else 32),
            consumer_group=CooperativeGroup(Agent.Thread, 32),
            barrier_storage=k.alloc_barriers(4), name="ab",
            defer_sync=bug == "uninitialized"); lines["create"] = here() - 5
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(P, 2)
            for _, (s,) in k.range(n, carry=[s]):
                pipe.producer_acquire(s); lines["acquire"] = here()
                pipe.producer_commit(s); lines["commit"] = here()
                if bug == "double commit":
                    pipe.producer_commit(s); lines["commit"] = here()
                if bug == "role":
                    pipe.consumer_release(make_pipeline_state(C, 2)); lines["role"] = here()
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() >= 1):
            if bug == "initial phase":
                c = PipelineState(2, 0, 0, 1, user_type=C)  # consumers start at phase 0
            else:
                c = make_pipeline_state(C, 2)
            for _, (c,) in k.range(n, carry=[c]):
                pipe.consumer_wait(c); lines["wait"] = here()
                if bug != "no release":
                    pipe.consumer_release(c)
                c.advance()
    return k


def tma_ring(lines):
    """A TMA ring whose create arms 4096 bytes for copies of 8192."""
    k = Kernel("tma", block_dim=64, params={"a": TmaDescriptor(), "n": Int32()})
    with k:
        a, n = k.args
        lines["create"] = here() + 1
        pipe = PipelineTmaAsync.create(num_stages=2, producer_group=CooperativeGroup(Agent.Thread, 1),
                                       consumer_group=CooperativeGroup(Agent.Thread, 1),
                                       barrier_storage=k.alloc_barriers(4), name="ab", tx_count=4096)
        buf = k.smem_alloc(2 * 8192, align=1024)
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(P, 2)
            for _, (s,) in k.range(n, carry=[s]):
                pipe.producer_acquire(s)
                with k.elect_one():
                    pipe.tma_load(s, a, [0, 0], buf.stage(s.index, 8192), 8192); lines["load"] = here()
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            c = make_pipeline_state(C, 2)
            for _, (c,) in k.range(n, carry=[c]):
                pipe.consumer_wait(c)
                pipe.consumer_release(c)
                c.advance()
    return k


def finding(k, kind, schedules=30):
    result = k.simulate({"n": 4} if k.params else None, schedules=schedules, check=False)
    found = {f.kind: f for f in result.findings}
    assert kind in found, str(result)
    return found[kind]


def at(line):
    return f"at {HERE}:{line}:"


# (bug, kind, the ops whose lines the finding names)
CASES = [
    ("initial phase", "initial-phase", ["wait"]),
    ("uninitialized", "uninitialized", ["wait", "create"]),
    ("double commit", "unbalanced", ["commit"]),
    ("arrive count", "arrive-count", ["commit", "create"]),
    ("role", "role", ["role"]),
    ("no release", "deadlock", ["acquire"]),
    ("two consumers", "overwrite", ["acquire", "wait"]),
    ("two consumers", "overrun", ["acquire"]),
]


@pytest.mark.parametrize("bug,kind,ops", CASES, ids=[f"{b}-{k}" for b, k, _ in CASES])
def test_each_finding_names_the_users_lines(bug, kind, ops):
    lines = {}
    f = finding(ring(bug, lines), kind)
    notes = "\n".join(f.where)
    for op in ops:
        assert at(lines[op]) in notes, (op, lines, f)
    # The report pipeline-sim prints carries them as notes.
    assert f"note: {f.where[0]}" in "\n".join(f.lines("ring", "random"))


def test_a_finding_raised_when_a_copy_lands_names_the_copy_and_the_create():
    lines = {}
    f = finding(tma_ring(lines), "tx-count", schedules=5)
    assert f.where[0].startswith("copy.tma_load of producer warp 0 of CTA 0 into stage ")
    assert f.where[0].endswith(f", issued {at(lines['load'])}21")
    assert f"pipeline 'ab' created {at(lines['create'])}" in f.where[1]


def test_an_unsupported_op_names_its_line():
    k = Kernel("lanes", block_dim=32)
    with k:
        pipe = PipelineAsync.create(num_stages=2,
                                    producer_group=CooperativeGroup(Agent.Thread, 32),
                                    consumer_group=CooperativeGroup(Agent.Thread, 32),
                                    barrier_storage=k.alloc_barriers(4))
        s = make_pipeline_state(P, 2)
        line = here() + 1
        for _, (s,) in k.range(k.lane_idx(), carry=[s]):  # a bound per lane
            pipe.producer_acquire(s)
            pipe.producer_commit(s)
            s.advance()
    f = finding(k, "unsupported", schedules=1)
    assert "differs between the lanes of a warp" in f.message
    assert any(at(line) in w for w in f.where), f


@pytest.mark.parametrize("wrap", [
    lambda f: ir.Location.callsite(f, [ir.Location.file("caller.py", 3, 1)]),
    lambda f: ir.Location.fused([ir.Location.unknown(), f]),
    lambda f: ir.Location.name("k_tiles", childLoc=f),
])
def test_wrapped_locations_reduce_to_the_users_line(wrap):
    with ir.Context():
        f = ir.Location.file("kernel.py", 42, 7)
        assert user_loc(wrap(f)) == 'loc("kernel.py":42:7)'
        assert user_loc(ir.Location.unknown()) == "loc(unknown)"


def test_wrapped_locations_in_printed_ir_keep_the_users_line():
    # The kernel printed, its wait's location wrapped in a call site (as an
    # inliner leaves it), parsed again: the finding still names the line.
    lines = {}
    k = ring("initial phase", lines)
    text = k.mlir()
    plain = f'loc("{HERE}":{lines["wait"]}:'
    assert plain in text
    text = re.sub(re.escape(plain) + r"(\d+)\)",
                  lambda m: f'loc(callsite("{HERE}":{lines["wait"]}:{m.group(1)} '
                            f'at "caller.py":1:1))', text)
    with k.context:
        module = ir.Module.parse(text)
    result = simulate(module, args={0: 4}, schedules=5, check=False)
    (f,) = [f for f in result.findings if f.kind == "initial-phase"]
    assert at(lines["wait"]) in f.where[0]
