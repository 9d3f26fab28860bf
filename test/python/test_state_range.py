"""Pipeline state values out of range (a class of bugs found by fuzzing).
A ``PipelineState`` (or a ``*_w_index[_phase]`` verb) with a stage index at
or past the stage count, or a phase other than 0 / 1, is refused at the
Python call with the rule and the fix; a constant that reaches the IR
another way (an i32 value) is refused by the op verifier, at the op
(``test/Dialect/Pipeline/invalid-state-range.mlir``). Each bug has its
correct twin. The lowering computes barrier addresses from the index with no
bound (index 5 of a 2-stage pipeline arrives on shared memory past its
barrier array) and ptxas refuses ``try_wait.parity`` with phase 2.
"""

import mlir.ir as ir
import pytest
from mlir.dialects import arith

from pipeline_mlir.kernel import Kernel
from pipeline_mlir.kernel.values import Scalar, i32
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync,
                                    PipelineError, PipelineState, PipelineUserType,
                                    make_pipeline_state)

from test_stage_balance import check

T32 = CooperativeGroup(Agent.Thread, 32)
Producer, Consumer = PipelineUserType.Producer, PipelineUserType.Consumer


def ring(k, stages=2):
    return PipelineAsync.create(num_stages=stages, producer_group=T32, consumer_group=T32,
                                barrier_storage=k.alloc_barriers(2 * stages), name="ab")


def _resumed_consumer(index, phase):
    """Warp 0 produces 4 stages from the start; warp 1 consumes them from a
    state given as PipelineState(2, 0, index, phase)."""
    k = Kernel("resumed", block_dim=64)
    with k:
        p = ring(k)
        warp = k.warp_idx()
        with k.if_(warp == 0):
            s = make_pipeline_state(Producer, 2)
            for _, (s,) in k.range(4, carry=[s]):
                p.producer_acquire(s)
                p.producer_commit(s)
                s.advance()
            p.producer_tail(s)
        with k.if_(warp == 1):
            c = PipelineState(2, 0, index, phase, user_type=Consumer)
            for _, (c,) in k.range(4, carry=[c]):
                p.consumer_wait(c)
                p.consumer_release(c)
                c.advance()
    return k


@pytest.mark.parametrize("index,phase,message", [
    (2, 0, "PipelineState: index 2 is out of range for a 2-stage pipeline (0..1): the "
           "barrier it names would lie past the pipeline's barrier array"),
    (-1, 0, "PipelineState: index -1 is out of range for a 2-stage pipeline (0..1)"),
    (0, 2, "PipelineState: phase 2 is not a parity: a state's phase is the parity its "
           "waits use, 0 or 1 (give phase % 2"),
])
def test_state_out_of_range_is_refused_at_the_call(index, phase, message):
    with pytest.raises(PipelineError) as e:  # a ValueError
        _resumed_consumer(index, phase)
    assert isinstance(e.value, ValueError)
    assert message in str(e.value)


def test_state_in_range_twin_is_accepted():
    k = _resumed_consumer(0, 0)
    k.verify()
    assert check(None, module=k.module) == ([], [])


@pytest.mark.parametrize("verb,args,message", [
    ("consumer_wait_w_index_phase", (5, 0),
     "PipelineAsync.consumer_wait_w_index_phase: index 5 is out of range for a 2-stage "
     "pipeline (0..1)"),
    ("consumer_wait_w_index_phase", (1, 2),
     "PipelineAsync.consumer_wait_w_index_phase: phase 2 is not a parity"),
    ("consumer_release_w_index", (2,),
     "PipelineAsync.consumer_release_w_index: index 2 is out of range"),
    ("producer_acquire_w_index_phase", (4, 1),
     "PipelineAsync.producer_acquire_w_index_phase: index 4 is out of range"),
    ("producer_commit_w_index", (3,),
     "PipelineAsync.producer_commit_w_index: index 3 is out of range"),
])
def test_w_index_verbs_check_against_the_pipelines_stages(verb, args, message):
    k = Kernel("w_index", block_dim=64)
    with k:
        p = ring(k)
        with pytest.raises(PipelineError) as e:
            getattr(p, verb)(*args)
    assert message in str(e.value)


def test_w_index_verbs_in_range_twin():
    k = Kernel("w_index", block_dim=64)
    with k:
        p = ring(k)
        p.consumer_wait_w_index_phase(1, 1)
        p.consumer_release_w_index(1)
    k.verify()


def test_constant_operand_past_the_stages_is_a_verifier_error():
    """A constant the Python check cannot see (an i32 value, not an int)
    reaches the op verifier, which names the op and the rule."""
    k = Kernel("const_index", block_dim=64)
    with k:
        ring(k)
        PipelineState(2, 0, Scalar(arith.constant(i32(), 3)), 0, user_type=Consumer)
    with pytest.raises(ir.MLIRError) as e:
        k.verify()
    assert ("'pipeline.state.make' op index 3 is out of range: the state has 2 stages "
            "(index 0..1)") in str(e.value)
