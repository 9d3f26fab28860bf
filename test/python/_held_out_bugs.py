"""What the held-out bug tests share (test_held_out_bugs_*.py): kernels
written the way users write them (docs/authoring.md, examples/), not derived
from the checker's rules, each next to its correct twin. For every bug the
tests pin which tool finds it: ``compile()`` / ``to_ptx()`` (the protocol
checker, statically, at the user's line), ``simulate()`` (the CPU simulator,
with concrete arguments), or neither. Every twin passes both, with no checker
warning.

Here: the small rings and roles the bugs are written with (``_async``,
``_produce``, ``_consume``) and the three checks every case gets
(``check_static``, ``check_simulator``, ``check_twin``); each test file holds
one family of bugs, its table and its cases. docs/VerifyProtocol.md
("Held-out bugs") has the totals.
"""

import inspect
import warnings

import pytest

from pipeline_mlir import diagnostics
from pipeline_mlir.compiler import CompileError
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync, PipelineUserType,
                                    make_pipeline_state)

Producer, Consumer = PipelineUserType.Producer, PipelineUserType.Consumer
S = 4                                   # stages
ROWS, COLS = 16, 64                     # an int32 box per stage
TILE = ROWS * COLS * 4
A_BYTES = B_BYTES = 128 * 64 * 2        # bf16 128 x 64 operand boxes


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path, monkeypatch):
    # A cached build would skip the checker.
    monkeypatch.setenv("PIPELINE_MLIR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(diagnostics.ENV_VERBOSE, raising=False)


def _next_line():
    return inspect.currentframe().f_back.f_lineno + 1


def _async(k, consumer=CooperativeGroup(Agent.Thread, 32), producer=32, name="ring"):
    return PipelineAsync.create(
        num_stages=S, producer_group=CooperativeGroup(Agent.Thread, producer),
        consumer_group=consumer, barrier_storage=k.alloc_barriers(2 * S), name=name)


def _produce(k, pipe, n, tail=True):
    s = make_pipeline_state(Producer, S)
    for _, (s,) in k.range(n, carry=[s]):
        pipe.producer_acquire(s)
        pipe.producer_commit(s)
        s.advance()
    if tail:
        pipe.producer_tail(s)
    return s


def _consume(k, pipe, n, state=None):
    c = state if state is not None else make_pipeline_state(Consumer, S)
    for _, (c,) in k.range(n, carry=[c]):
        pipe.consumer_wait(c)
        pipe.consumer_release(c)
        c.advance()
    return c


# ---------------------------------------------------------------------------
# What the tools do with each pair.
#
# A case: (id, builder, keyword arguments, static, simulator).
# static: a phrase of compile()'s first error line (at the user's file), or
#   None when the checker lets the bug through (a run-time question).
# simulator: the finding kinds the simulator reports, or None when it passes
#   the bug (what it does not model: registers, bulk-store reads, the storage
#   behind a barrier).
SCHEDULES = 30
# The files a finding may name: the bug's test file, or this one (the create
# or loop of _async / _consume).
HERE = __file__


def _build(case, bug):
    _, builder, kwargs, _, _ = case
    return builder(bug, **kwargs)


def check_static(case, test_file, at_returned_line):
    """The checker's first error on the bug: at the user's file (the test's
    or this one's helpers), at the line the builder returned when
    ``at_returned_line``, holding the case's phrase; no error when the
    case's phrase is None."""
    _, _, _, static, _ = case
    k, line, _ = _build(case, True)
    if static is None:
        # A run-time question: the checker lets it through (no error).
        k.to_ptx()
        return
    with pytest.raises(CompileError) as err:
        k.to_ptx()
    first = str(err.value).splitlines()[0]
    assert first.startswith((f"{test_file}:", f"{HERE}:")), first
    if at_returned_line:
        assert first.startswith(f"{test_file}:{line}:"), first
    assert static in first, first


def check_simulator(case, test_file):
    """The simulator's findings on the bug include the case's kinds (or it
    passes the bug when they are None), and its report names the user's
    code."""
    _, _, _, _, kinds = case
    k, _, args = _build(case, True)
    result = k.simulate(args, schedules=SCHEDULES, check=False)
    if kinds is None:
        assert result.ok, str(result)
        return
    assert not result.ok
    assert kinds <= {f.kind for f in result.findings}, str(result)
    # The report names a line of the user's code (the test's or the helpers').
    assert f"{test_file}:" in str(result) or f"{HERE}:" in str(result)


def check_twin(case):
    """The correct twin: no checker error or warning, and the simulator
    passes it."""
    k, _, args = _build(case, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", diagnostics.CheckerWarning)
        k.to_ptx()
    result = k.simulate(args, schedules=SCHEDULES, check=False)
    assert result.ok, str(result)
