"""``k.while_`` (python/pipeline_mlir/kernel/control.py) checks what its body
carries the way ``k.range`` does, through the same ``_Carried.end_loop_body``:
a pipeline state, producer, Scalar, Fragment or RowVector made before the
loop and updated in the body without being carried raises ScopeError at the
user's ``for`` line, naming the variable and the ``carry=`` fix (it used to
reach MLIR as a dominance error at an unknown location); a carried value
whose type changes is refused; carried values are rebound to the
``scf.while`` results, verify and lower to PTX; ``while_`` nests in
``range_`` and ``range_`` in ``while_``; the protocol checker and the
simulator accept a ring written with ``while_`` (and the simulator still
finds its deadlock twin)."""

import inspect
import traceback

import pytest

from pipeline_mlir.kernel import Float32, GlobalPtr, Int32, Kernel, Scalar, ScopeError, store
from pipeline_mlir.kernel.fragment import Fragment, RowVector
from pipeline_mlir.kernel.scope import _loops
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync, PipelineUserType,
                                    make_pipeline_state)
from pipeline_mlir.sim import SimulationFailed

from _example_checks import verify_protocol
from _ir_utils import ops_named

HERE = __file__
Producer, Consumer = PipelineUserType.Producer, PipelineUserType.Consumer
T32 = CooperativeGroup(Agent.Thread, 32)


def _line():
    """The caller's next line."""
    return inspect.currentframe().f_back.f_lineno + 1


def kernel():
    return Kernel("w", block_dim=128, params={"out": GlobalPtr(), "s": Float32(), "n": Int32()})


def raised_at(info):
    """The line of this file that the exception in ``info`` went through
    last (the user's line of the raise)."""
    lines = [f.lineno for f in traceback.extract_tb(info.tb) if f.filename == HERE]
    return lines[-1]


# --- an update the loop does not carry ----------------------------------------

def test_uncarried_state_is_named_at_the_users_for_line():
    k = kernel()
    with k:
        _, s, n = k.args
        state = make_pipeline_state(Producer, 2)
        count = Scalar(0)
        valid = count < n
        with pytest.raises(ScopeError) as info:
            for_line = _line()
            for _ in k.while_(valid, carry=[valid, count]):
                state.advance()
                count += 1
                valid.set(count < n)
    assert raised_at(info) == for_line
    assert str(info.value).startswith(
        "k.while_: `state` (PipelineState(") and (
        ") is advanced in the loop body but not carried by the loop, so each "
        "iteration would restart from its value before the loop") in str(info.value)
    assert ("Carry it: `for _ in k.while_(valid, carry=[valid, ..., state]):`"
            in str(info.value))
    assert _loops == []


@pytest.mark.parametrize("name,update,verb", [
    ("total", lambda v: v["total"].__iadd__(1.0), "updated in place"),
    ("count", lambda v: v["count"].set(v["count"] + 1), "set"),
    ("m", lambda v: v["m"].set(v["m"] + 1.0), "set"),
    ("acc", lambda v: v["acc"].__imul__(2.0), "updated"),
    ("acc", lambda v: v["acc"].set(v["acc"] * 2.0), "set"),
    ("state", lambda v: v["state"].advance(), "advanced"),
    ("producer", lambda v: v["producer"].commit(v["producer"].acquire_and_advance()),
     "advanced"),
])
def test_uncarried_update_of_each_kind_names_the_variable(name, update, verb):
    k = kernel()
    with k:
        _, s, n = k.args
        total, count = Scalar(0.0), Scalar(0)
        m, acc = RowVector.full(0.0), Fragment.full(8, 0.0)
        state = make_pipeline_state(Producer, 2)
        producer, _ = PipelineAsync.create(num_stages=2, producer_group=T32,
                                           consumer_group=T32).make_participants()
        valid = n > 0
        with pytest.raises(ScopeError, match=rf"k.while_: `{name}` .* is {verb}.* in the loop "
                                             rf"body but not carried by the loop.*carry="
                                             rf"\[valid, \.\.\., {name}\]") as info:
            for_line = _line()
            for _ in k.while_(valid, carry=[valid]):
                update(locals())
                valid.set(n > 1)
    assert raised_at(info) == for_line
    assert _loops == []


def test_a_loop_in_a_helper_generator_names_the_callers_variable():
    """A persistent kernel's ``work()`` generator wraps the while_: the
    variable is named from the frame that made it."""
    k = kernel()
    with k:
        _, s, n = k.args

        def work():
            valid = n > 0
            for _ in k.while_(valid, carry=[valid]):
                yield
                valid.set(n > 1)

        state = make_pipeline_state(Consumer, 2)
        with pytest.raises(ScopeError, match=r"`state` \(PipelineState.*is advanced"):
            for _ in work():
                state.advance()


def test_objects_made_in_the_body_or_zeroed_there_need_no_carry():
    k = kernel()
    with k:
        out, s, n = k.args
        acc = Fragment.full(8, 1.0)
        count = Scalar(0)
        valid = count < n
        for _ in k.while_(valid, carry=[valid, count]):
            local = make_pipeline_state(Consumer, 2)
            local.advance()
            acc.zero()              # a fresh tile, as a GEMM's per-tile accumulator
            acc += s
            store(acc.value(0), out, count)
            count += 1
            valid.set(count < n)
    k.verify()


# --- what the loop carries -----------------------------------------------------

def test_carried_values_are_rebound_to_the_loop_results_and_compile():
    k = kernel()
    with k:
        out, s, n = k.args
        state = make_pipeline_state(Producer, 4)
        count, total = Scalar(0), Scalar(0.0)
        m, acc = RowVector.full(0.0), Fragment.full(8, 0.0)
        valid = count < n
        for _ in k.while_(valid, carry=[valid, state, count, total, m, acc]):
            state.advance()
            count += 1
            total += s
            m.set(m.max(total))
            acc *= total
            acc += 1.0
            valid.set(count < n)
        store(total, out, 0)
        store(m.values[1], out, 1)
        store(acc.value(0), out, 2)
        store(count, out, 3)
    k.verify()
    (loop,) = ops_named(k, "scf.while")
    # valid, state, count, total, m's two rows, acc's struct
    assert len(loop.results) == 7
    for v in (valid.ir_value, count.ir_value, total.ir_value, *m.values, acc.ir_value):
        assert v.owner.name == "scf.while"
    assert str(loop.results.types[1]).startswith("!pipeline.state<")
    body = str(loop)
    assert "arith.addf %arg" in body and "arith.maxnumf %arg" in body
    k.to_ptx()


def test_the_loop_and_its_yield_carry_the_users_line():
    k = kernel()
    with k:
        _, s, n = k.args
        count = Scalar(0)
        valid = count < n
        for_line = _line()
        for _ in k.while_(valid, carry=[valid, count]):
            count += 1
            valid.set(count < n)
    (loop,) = ops_named(k, "scf.while")
    assert str(loop.location) == f'loc("{HERE}":{for_line}:9)'
    for region in loop.regions:
        terminator = list(region.blocks[0].operations)[-1]
        assert str(terminator.location) == f'loc("{HERE}":{for_line}:9)'


class _Retyped:
    """A carriable object whose value changes type in the body."""

    def __init__(self, value):
        self.value = value

    def _carry_values(self):
        return [self.value]

    def _carry_rebind(self, values):
        (self.value,) = values


def test_type_changing_carry_is_refused():
    k = kernel()
    with k:
        _, s, n = k.args
        obj = _Retyped(s.ir_value)
        valid = n > 0
        with pytest.raises(TypeError, match=r"a carried value changed type in the loop body: "
                                            r"f32 -> i32; an scf op yields the types it was "
                                            r"given"):
            for _ in k.while_(valid, carry=[valid, obj]):
                obj.value = n.ir_value
                valid.set(n > 1)
        total, valid = Scalar(0.0), n > 0
        for _ in k.while_(valid, carry=[valid, total]):
            with pytest.raises(TypeError, match="Scalar.set: expected a value of type f32, "
                                                "got i32"):
                total.set(n)
            valid.set(n > 1)
    assert _loops == []


def test_update_in_an_if_that_does_not_carry_it_is_refused():
    k = kernel()
    with k:
        _, s, n = k.args
        total = Scalar(0.0)
        valid = n > 0
        with pytest.raises(ScopeError, match=r"last updated inside a nested region.*carry it "
                                             r"through the if too"):
            for _ in k.while_(valid, carry=[valid, total]):
                with k.if_(n > 1):
                    total += s
                valid.set(n > 1)
    # ... and carried through the if, it reaches the end of the body.
    k = kernel()
    with k:
        _, s, n = k.args
        total = Scalar(0.0)
        valid = n > 0
        for _ in k.while_(valid, carry=[valid, total]):
            with k.if_(n > 1, carry=[total]):
                total += s
            valid.set(total < 10.0)
    k.verify()


def test_a_body_that_never_sets_the_condition_is_refused():
    k = kernel()
    with k:
        _, s, n = k.args
        count = Scalar(0)
        more = n > 0
        with pytest.raises(ValueError, match=r"k.while_: the body never sets the condition "
                                             r"`more`, so a loop that runs once never ends.*"
                                             r"more.set\(more_work\)"):
            for _ in k.while_(more, carry=[more, count]):
                count += 1
    assert _loops == []


# --- nesting -------------------------------------------------------------------

def test_while_inside_range():
    k = kernel()
    with k:
        out, s, n = k.args
        state = make_pipeline_state(Producer, 2)
        for i, (state,) in k.range(n, carry=[state]):
            valid = i < n
            for _ in k.while_(valid, carry=[valid, state]):
                state.advance()
                valid.set(state.count < i)
            store(state.count, out, i)
    k.verify()
    (loop,) = ops_named(k, "scf.for")
    assert "scf.while" in str(loop)
    assert state.ir_value.owner.name == "scf.for"
    k.to_ptx()

    k = kernel()
    with k:
        out, s, n = k.args
        state = make_pipeline_state(Producer, 2)
        with pytest.raises(ScopeError, match=r"k.while_: `state` .* is advanced.*carry="
                                             r"\[valid, \.\.\., state\]") as info:
            for i, (state,) in k.range(n, carry=[state]):
                valid = i < n
                for_line = _line()
                for _ in k.while_(valid, carry=[valid]):
                    state.advance()
                    valid.set(state.count < i)
        assert raised_at(info) == for_line
    assert _loops == []


def test_range_inside_while():
    k = kernel()
    with k:
        out, s, n = k.args
        acc = Fragment.zeros(16)
        count = Scalar(0)
        valid = count < n
        for _ in k.while_(valid, carry=[valid, count, acc]):
            for j, (acc,) in k.range(4, carry=[acc]):
                acc += s
            count += 1
            valid.set(count < n)
        store(acc.value(3), out, 0)
    k.verify()
    (loop,) = ops_named(k, "scf.while")
    assert "scf.for" in str(loop)
    assert acc.ir_value.owner.name == "scf.while"
    k.to_ptx()



@pytest.mark.parametrize("outer", ["while", "range"])
def test_inner_range_must_carry_a_fragment_the_outer_loop_carries(outer):
    """The outer loop's carried fragment is a struct (its block argument);
    the inner body's first ``acc += s`` unpacks it there, which must not
    make the fragment look made in the inner body."""
    k = kernel()
    with k:
        out, s, n = k.args
        acc = Fragment.zeros(16)
        count = Scalar(0)
        valid = count < n
        with pytest.raises(ScopeError, match=r"k.range: `acc` .* is updated in the loop body "
                                             r"but not carried.*carry=\[acc\]") as info:
            if outer == "while":
                for _ in k.while_(valid, carry=[valid, count, acc]):
                    for_line = _line()
                    for j in k.range(4):
                        acc += s
                    count += 1
                    valid.set(count < n)
            else:
                for i, (acc,) in k.range(n, carry=[acc]):
                    for_line = _line()
                    for j in k.range(4):
                        acc += s
        assert raised_at(info) == for_line
    assert _loops == []


# --- the protocol checker and the simulator --------------------------------------

def while_ring(release=True):
    """A two-warp PipelineAsync ring, each side a k.while_ over ``n``
    iterations (the twin without ``release`` deadlocks)."""
    k = Kernel("wring", block_dim=64, params={"out": GlobalPtr(), "n": Int32()})
    with k:
        _, n = k.args
        pipe = PipelineAsync.create(num_stages=2, producer_group=T32, consumer_group=T32)
        with k.if_(k.warp_idx() == 0):
            state = make_pipeline_state(Producer, 2)
            count = Scalar(0)
            valid = count < n
            for _ in k.while_(valid, carry=[valid, count, state]):
                pipe.producer_acquire(state)
                pipe.producer_commit(state)
                state.advance()
                count += 1
                valid.set(count < n)
            pipe.producer_tail(state)
        with k.if_(k.warp_idx() == 1):
            state = make_pipeline_state(Consumer, 2)
            count = Scalar(0)
            valid = count < n
            for _ in k.while_(valid, carry=[valid, count, state]):
                pipe.consumer_wait(state)
                if release:
                    pipe.consumer_release(state)
                state.advance()
                count += 1
                valid.set(count < n)
    return k


def test_checker_and_simulator_accept_a_while_ring():
    k = while_ring()
    k.verify()
    assert verify_protocol(str(k.module)) == []
    result = k.simulate({"n": 6}, schedules=10, seed=3)
    assert result.ok and result[0].deadlocks == 0


def test_simulator_finds_the_while_rings_deadlock():
    with pytest.raises(SimulationFailed, match="deadlock"):
        while_ring(release=False).simulate({"n": 6}, schedules=3)
