"""``k.if_(cond, carry=[...])`` (python/pipeline_mlir/kernel/control.py): the
``scf.if`` yields the carried objects, each branch starts from their values
before the if, and afterwards they hold the if's results -- with only a
then-branch the else yields the values unchanged. Fragments, RowVectors,
float and integer Scalars and pipeline states are carried; an if inside a
``k.range`` body yields what the loop carries; a carried value whose type
changes, or that was last updated in an inner branch that did not carry it,
is refused with the fix. The GPU checks the values (test_gpu.py -k
fragment: if_carry, if_then_only, loop_if_nested, rv_if)."""

import pytest

from pipeline_mlir.kernel import Float32, GlobalPtr, Int32, Kernel, Scalar, ScopeError, store
from pipeline_mlir.kernel.fragment import Fragment, RowVector
from pipeline_mlir.pipeline import PipelineUserType, make_pipeline_state

from _ir_utils import ops_named


def kernel():
    return Kernel("c", block_dim=128, params={"out": GlobalPtr(), "s": Float32(), "n": Int32()})


def yields(if_op, region):
    """The operands of the scf.yield ending ``region`` (0 then, 1 else)."""
    block = if_op.regions[region].blocks[0]
    ops = list(block.operations)
    assert ops[-1].operation.name == "scf.yield"
    return list(ops[-1].operands)


def test_then_only_yields_the_values_before_the_if_from_its_else():
    k = kernel()
    with k:
        out, s, n = k.args
        acc = Fragment.full(8, s)
        total = Scalar(1.5)
        before = (acc.ir_value, total.ir_value)
        with k.if_(n > 0, carry=[acc, total]):
            acc += 1.0
            total *= s
        store(total, out, 0)
        store(acc.value(0), out, 1)
    k.verify()
    (op,) = ops_named(k, "scf.if")
    assert [str(t) for t in op.results.types][1] == "f32" and len(op.results) == 2
    assert yields(op, 1) == list(before)            # else: unchanged
    assert yields(op, 0)[1].owner.name == "arith.mulf"
    assert total.ir_value.owner.name == "scf.if" and acc.ir_value.owner.name == "scf.if"


def test_then_and_else_each_start_from_the_values_before_the_if():
    k = kernel()
    with k:
        out, s, n = k.args
        m = RowVector.full(s)
        init = list(m.values)
        with k.if_(n > 0, carry=[m]) as branch:
            m.set(m * 2.0)
        with branch.else_():
            # the else-branch sees the value before the if, not the then's
            assert m.values == init
            m.set(-m)
        store(m.values[1], out, 0)
    k.verify()
    (op,) = ops_named(k, "scf.if")
    assert [v.owner.name for v in yields(op, 0)] == ["arith.mulf"] * 2
    assert [v.owner.name for v in yields(op, 1)] == ["arith.negf"] * 2
    assert all(v.owner.name == "scf.if" for v in m.values)


def test_pipeline_state_and_integer_scalar_are_carried():
    k = kernel()
    with k:
        out, s, n = k.args
        state = make_pipeline_state(PipelineUserType.Producer, 4)
        count = Scalar(0)
        with k.if_(n > 2, carry=[state, count]):
            state.advance()
            count += 1
        store(count, out, 0)
    k.verify()
    (op,) = ops_named(k, "scf.if")
    assert str(op.results.types[0]).startswith("!pipeline.state<")
    assert str(op.results.types[1]) == "i32"
    assert count.ir_value.owner.name == "scf.if"


def test_if_inside_a_loop_yields_what_the_loop_carries():
    k = kernel()
    with k:
        out, s, n = k.args
        acc = Fragment.zeros(16)
        for i, (acc,) in k.range(n, carry=[acc]):
            with k.if_(i % 2 == 0, carry=[acc]):
                acc += s
        store(acc.value(3), out, 0)
    k.verify()
    (loop,) = ops_named(k, "scf.for")
    (op,) = ops_named(k, "scf.if")
    body = list(loop.regions[0].blocks[0].operations)
    assert body[-1].operation.name == "scf.yield"
    assert body[-1].operands[0].owner.name == "scf.if"
    # the if's else yields the loop's iteration argument
    assert yields(op, 1)[0] == loop.regions[0].blocks[0].arguments[1]
    k.to_ptx()


def test_nested_ifs_carry_through_both():
    k = kernel()
    with k:
        out, s, n = k.args
        total = Scalar(0.0)
        with k.if_(n > 0, carry=[total]):
            with k.if_(n > 1, carry=[total]):
                total += s
            total += 1.0
        store(total, out, 0)
    k.verify()
    outer, inner = ops_named(k, "scf.if")
    assert yields(outer, 0)[0].owner.name == "arith.addf"
    assert yields(outer, 0)[0].owner.operands[0].owner.name == "scf.if"


def test_update_in_an_inner_branch_that_does_not_carry_it_is_refused():
    k = kernel()
    with k:
        out, s, n = k.args
        total = Scalar(0.0)
        with pytest.raises(ScopeError, match=r"last updated inside a nested region of this "
                                             r"if-branch.*Carry it through the inner `if_` too"):
            with k.if_(n > 0, carry=[total]):
                with k.if_(n > 1):
                    total += s


class _Retyped:
    """A carriable object whose value changes type in the branch."""

    def __init__(self, value):
        self.value = value

    def _carry_values(self):
        return [self.value]

    def _carry_rebind(self, values):
        (self.value,) = values


def test_type_changing_carry_is_refused():
    k = kernel()
    with k:
        out, s, n = k.args
        obj = _Retyped(s.ir_value)
        with pytest.raises(TypeError, match=r"a carried value changed type in the if-branch: "
                                            r"f32 -> i32"):
            with k.if_(n > 0, carry=[obj]):
                obj.value = n.ir_value


def test_scalar_set_refuses_another_type_in_a_branch():
    k = kernel()
    with k:
        out, s, n = k.args
        total = Scalar(0.0)
        with k.if_(n > 0, carry=[total]):
            with pytest.raises(TypeError, match="Scalar.set: expected a value of type f32, "
                                                "got i32"):
                total.set(n)


def test_bad_conditions_and_carries_are_refused():
    k = kernel()
    with k:
        out, s, n = k.args
        with pytest.raises(TypeError, match=r"If\(cond\): cond is a Python bool"):
            k.if_(True)
        with pytest.raises(TypeError, match="if condition: expected a value of type i1, got f32"):
            k.if_(s)
        with pytest.raises(TypeError, match=r"carry=\[\.\.\.\] takes pipeline states.*got float"):
            k.if_(n > 0, carry=[1.0])
        branch = k.if_(n > 0)
        with branch:
            pass
        with branch.else_():
            pass
        with pytest.raises(RuntimeError, match="this scf.if already has an else-branch"):
            branch.else_()
