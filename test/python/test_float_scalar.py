"""Float Scalars (python/pipeline_mlir/kernel/values.py): arithmetic emits the
float arith op, comparisons use the ordered predicates (false on NaN) but
``!=`` the unordered one (true on NaN, as in Python), conversions by type
name, and in-place operators on values carried by ``k.range`` accumulate
(the error names the carry fix when the value is not carried). The GPU
checks the values (test_gpu.py -k fragment: scalar_math, scalar_convert,
scalar_compare)."""

import pytest

from pipeline_mlir.kernel import Float32, GlobalPtr, Int32, Kernel, Scalar, ScopeError, store
from pipeline_mlir.kernel.fragment import Fragment, RowVector

from _ir_utils import ops_named


def kernel():
    return Kernel("f", block_dim=128, params={"out": GlobalPtr(), "s": Float32(), "n": Int32()})


def test_float_parameter_and_literal_are_f32_scalars():
    k = kernel()
    with k:
        _, s, n = k.args
        assert isinstance(s, Scalar) and s.is_float and str(s.type) == "f32"
        assert Scalar(1.5).is_float and str(Scalar(1.5).type) == "f32"
        assert not n.is_float and n.width == 32


@pytest.mark.parametrize("build, op", [
    (lambda s: s + 1.0, "arith.addf"), (lambda s: 1.0 - s, "arith.subf"),
    (lambda s: s * s, "arith.mulf"), (lambda s: 2.0 / s, "arith.divf"),
    (lambda s: s % 3.0, "arith.remf"), (lambda s: -s, "arith.negf"),
    (lambda s: s.max(0.0), "arith.maxnumf"), (lambda s: s.min(1.0), "arith.minnumf")])
def test_float_arithmetic_emits_the_float_op(build, op):
    k = kernel()
    with k:
        out, s, _ = k.args
        r = build(s)
        assert r.is_float
        store(r, out, 0)
    k.verify()
    assert len(ops_named(k, op)) == 1


@pytest.mark.parametrize("build, predicate", [
    (lambda s: s == 1.0, "oeq"), (lambda s: s != 1.0, "une"), (lambda s: s < 1.0, "olt"),
    (lambda s: s <= 1.0, "ole"), (lambda s: s > 1.0, "ogt"), (lambda s: s >= 1.0, "oge")])
def test_comparisons_use_ordered_predicates_and_unordered_ne(build, predicate):
    k = kernel()
    with k:
        out, s, _ = k.args
        c = build(s)
        assert c.width == 1
        store(c.select(1.0, 0.0), out, 0)
    k.verify()
    (cmp,) = ops_named(k, "arith.cmpf")
    assert f"arith.cmpf {predicate}," in str(cmp)


@pytest.mark.parametrize("source, target, op", [
    ("i32", "f32", "arith.sitofp"), ("f32", "i32", "arith.fptosi"),
    ("f32", "bf16", "arith.truncf"), ("f32", "f16", "arith.truncf"),
    ("bf16", "f32", "arith.extf"), ("f32", "i64", "arith.fptosi"),
    ("bf16", "f16", "arith.truncf")])
def test_to_converts_by_type_name(source, target, op):
    k = kernel()
    with k:
        out, s, n = k.args
        x = {"f32": s, "i32": n, "bf16": s.to("bf16")}[source]
        # (bf16 -> f16 goes through f32, which holds both exactly)
        y = x.to(target)
        assert str(y.type) == target
        assert x.to(source) is x          # the same type: no op
        store(y.to("f32") if target != "f32" else y, out, 0)
    k.verify()
    assert ops_named(k, op)
    k.to_ptx()


def test_to_refuses_bad_names_and_widths_on_floats():
    k = kernel()
    with k:
        _, s, _ = k.args
        with pytest.raises(ValueError, match=r"to: unknown type 'float32'; one of \['bf16', "
                                             r"'f16', 'f32', 'i32', 'i64'\]"):
            s.to("float32")
        with pytest.raises(TypeError, match=r"to\(width\) converts integers; name the type of "
                                            r"a float conversion: to\('f32'\), to\('i32'\)"):
            s.to(64)


def test_integer_only_operators_are_refused_on_floats():
    k = kernel()
    with k:
        _, s, n = k.args
        for op, name in ((lambda: s // 2.0, "//"), (lambda: s & 1.0, "&"),
                         (lambda: s << 1.0, "<<")):
            with pytest.raises(TypeError, match=f"{name} is not defined on float Scalars"):
                op()
        with pytest.raises(TypeError, match="~ is not defined on float Scalars"):
            ~s
        with pytest.raises(TypeError, match="/ is not defined on integer Scalars"):
            n / 2
        with pytest.raises(TypeError, match="operand: expected a value of type f32, got i32"):
            s + n


def test_inplace_operators_on_carried_floats_accumulate():
    """``total += x`` / ``m.set(...)`` / ``acc *= ...`` inside k.range on
    carried values: the loop yields the updated values, and after the loop
    the names hold the loop's results."""
    k = kernel()
    with k:
        out, s, n = k.args
        total = Scalar(0.0)
        m = RowVector.full(float("-inf"))
        acc = Fragment.full(8, 1.0)
        for i, (total, m, acc) in k.range(n, carry=[total, m, acc]):
            total += s
            total *= 0.5
            m.set(m.max(total))
            acc *= total
            acc += 1.0
        store(total, out, 0)
        store(m.values[0], out, 1)
        store(acc.value(0), out, 2)
    k.verify()
    (loop,) = ops_named(k, "scf.for")
    body = str(loop)
    # the body computes from its iteration arguments and yields what it computed
    assert "arith.addf %arg" in body and "arith.mulf" in body and "arith.maxnumf %arg" in body
    assert len(loop.results) == 1 + 2 + 1        # total, m's two rows, acc's struct
    for v in (total.ir_value, m.values[0]):
        assert v.owner.name == "scf.for"
    assert acc.ir_value.owner.name == "scf.for"
    k.to_ptx()


@pytest.mark.parametrize("update", [
    lambda total, m, acc: total.__iadd__(1.0),
    lambda total, m, acc: m.set(m + 1.0),
    lambda total, m, acc: acc.__imul__(2.0)])
def test_inplace_update_of_an_uncarried_value_names_the_carry_fix(update):
    # A Fragment made of values (not yet packed into its struct) too: the
    # check must not take the packing, emitted in the body, for a value
    # made inside the loop.
    k = kernel()
    with k:
        _, s, n = k.args
        total, m, acc = Scalar(0.0), RowVector.full(0.0), Fragment.full(8, 0.0)
        with pytest.raises(ScopeError, match=r"is (updated in place|set|updated) in the loop "
                                             r"body but not carried by the loop.*carry=\["):
            for i, _ in k.range(n):
                update(total, m, acc)


def test_zero_or_fill_in_a_loop_body_is_a_fresh_fragment():
    """A GEMM zeroes its accumulator per tile without carrying it: zero()
    and fill() do not read the old value, so the body's later updates
    (``acc += x``) act on a value made in the body, and need no carry."""
    k = kernel()
    with k:
        out, s, n = k.args
        acc = Fragment.full(8, 1.0)
        for i, _ in k.range(n):
            acc.zero()
            acc += s
            store(acc.value(0), out, i)
        acc2 = Fragment.full(8, 1.0)
        for i, _ in k.range(n):
            acc2.fill(s)
            acc2 *= 2.0
            store(acc2.value(1), out, i)
    k.verify()
    # ...and an update before the reset still needs the carry
    k = kernel()
    with k:
        out, s, n = k.args
        acc = Fragment.full(8, 1.0)
        with pytest.raises(ScopeError, match=r"`acc` .* is updated in the loop body"):
            for i, _ in k.range(n):
                acc += s
                acc.zero()
