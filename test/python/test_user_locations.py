"""IR built from the builders carries the user's line (``Location.file`` of
the first frame outside ``pipeline_mlir`` and the MLIR bindings), so the
verifier, the protocol checker and the Python exception name the kernel
file's line instead of ``unknown``."""

import inspect

import mlir.ir as ir
import mlir.passmanager as passmanager
import pytest

from pipeline_mlir.compiler import CompileError
from pipeline_mlir.kernel import Int32, Kernel
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync,
                                    PipelineUserType, make_pipeline_state)

HERE = __file__


def _line():
    """The caller's next line."""
    return inspect.currentframe().f_back.f_lineno + 1


def build_without_commit():
    """A producer loop that never commits; returns the kernel and the lines
    of the loop and of the acquire, with the acquire's column."""
    k = Kernel("no_commit", block_dim=64, params={"n": Int32()})
    with k:
        (n,) = k.args
        pipeline = PipelineAsync.create(
            num_stages=2, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, 32))
        state = make_pipeline_state(PipelineUserType.Producer, 2)
        loop_line = _line()
        for _, _ in k.range(n, carry=[state]):
            acquire_line = _line()
            pipeline.producer_acquire(state)
            state.advance()
        pipeline.producer_tail(state)
    return k, loop_line, acquire_line


def _locations(module_op):
    found = {}

    def visit(op):
        found.setdefault(op.name, str(op.location))
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    return found


def test_ops_carry_the_calling_line():
    k, loop_line, acquire_line = build_without_commit()
    locs = _locations(k.module.operation)
    # Column 13: `pipeline.producer_acquire(...)` starts at the 13th column.
    assert locs["pipeline.producer.acquire"] == f'loc("{HERE}":{acquire_line}:13)'
    assert locs["scf.for"] == f'loc("{HERE}":{loop_line}:9)'
    # Built inside pipeline_mlir for the user's create call: still this file.
    assert f'"{HERE}":' in locs["pipeline.create"]
    assert "pipeline_mlir" not in "".join(locs.values())


def test_checker_error_names_the_user_line():
    k, loop_line, acquire_line = build_without_commit()
    with pytest.raises(ir.MLIRError) as info:
        passmanager.PassManager.parse("builtin.module(pipeline-verify-protocol)",
                                      context=k.context).run(k.module.operation)
    (diag,) = info.value.error_diagnostics
    assert str(diag.location) == f'loc("{HERE}":{acquire_line}:13)'
    assert "loop body acquires 1 stage but commits 0" in diag.message
    assert any(str(n.location) == f'loc("{HERE}":{loop_line}:9)' for n in diag.notes)


def test_compile_exception_names_the_user_line():
    k, _, acquire_line = build_without_commit()
    with pytest.raises(CompileError) as info:
        k.compile()
    # The first line is the user's file:line and the rule (no pass pipeline
    # name, no IR dump).
    assert str(info.value).startswith(
        f'{HERE}:{acquire_line}:13: error: PipelineAsync pipeline: loop body acquires')
    assert "see current operation" not in str(info.value)


def test_verifier_error_names_the_user_line():
    # An op verifier error (not the checker): a 3-stage state on a 2-stage
    # pipeline, built with the dialect's own builder functions.
    from pipeline_mlir.dialects import pipeline as pl
    k = Kernel("bad_state", block_dim=64)
    with k:
        pipeline = PipelineAsync.create(
            num_stages=2, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, 32))
        state = pl.state_make(pl.StateType.get(3, pl.Role.Producer))
        line = _line()
        pl.producer_acquire(pipeline.ir_value, state)
    with pytest.raises(ir.MLIRError) as info:
        k.verify()
    assert f'"{HERE}":{line}:9' in str(info.value)


def test_simulator_deadlock_names_the_user_line():
    # The producer acquires without committing: after two stages its third
    # acquire waits forever. The simulator's report names the waiting op's
    # line (Report.first's SimError.where; the CLI prints them as notes).
    from pipeline_mlir.sim.engine import explore
    from pipeline_mlir.sim.frontend import kernels
    from pipeline_mlir.sim.interp import Launch, make_world_factory
    k, _, acquire_line = build_without_commit()
    with k.context:
        (kernel,) = kernels(k.module)
        report = explore(make_world_factory(kernel, Launch((64, 1, 1), (1, 1, 1), 6)),
                         schedules=3)
    _, error = report.first["deadlock"]
    # Both warps of the CTA run the producer loop (no role split).
    assert error.where == [f"producer warp {w} of CTA 0 at {HERE}:{acquire_line}:13"
                           for w in (0, 1)]
