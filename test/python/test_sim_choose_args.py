"""pipeline-sim without --arg: values chosen for the integer kernel arguments.

A kernel whose loops are bounded by its arguments runs with small values the
simulator picks (every argument 4, then distinct ones, then 1; an i1 flag
both ways), so ``pipeline-sim FILE`` alone finds a producer that runs ``n``
stages against a consumer that runs ``n - 1``; arguments given with --arg
keep their values. test/Sim/bug_stage_balance.mlir is the same on the
command line.
"""

import mlir.ir as ir

import pipeline_mlir
from pipeline_mlir.sim import cli
from pipeline_mlir.sim.frontend import choose_args, kernels

from test_stage_balance import _pingpong


def _kernel(text):
    with pipeline_mlir.make_context():
        (k,) = kernels(ir.Module.parse(text))
    return k


def test_choices_cover_the_unset_integer_arguments():
    k, _ = _pingpong(lambda k, n, s: k.range(n - 1, carry=[s]))
    sk = _kernel(str(k.module))
    assert sk.int_args == {0: 32, 1: 32}           # n, flag: i32
    assert choose_args(sk, {}) == [{0: 4, 1: 4}, {0: 5, 1: 3}, {0: 1, 1: 1}]
    assert choose_args(sk, {1: 0}) == [{0: 4}, {0: 5}, {0: 1}]
    assert choose_args(sk, {0: 2, 1: 0}) == []


def test_i1_arguments_take_both_values():
    text = """
    gpu.module @m {
      gpu.func @f(%flag: i1, %n: index, %p: !llvm.ptr<1>) kernel {
        %q = pipeline.create : !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<warp, 1>, consumer = #pipeline.group<warp, 1>>
        gpu.return
      }
    }"""
    sk = _kernel(text)
    assert sk.int_args == {0: 1, 1: 64}
    assert choose_args(sk, {}) == [{0: 1, 1: 4}, {0: 0, 1: 3}, {0: 1, 1: 1}]


def test_the_off_by_one_hang_is_found_without_arguments(tmp_path, capsys):
    bad, _ = _pingpong(lambda k, n, s: k.range(n - 1, carry=[s]))
    path = tmp_path / "bad.mlir"
    path.write_text(str(bad.module))
    assert cli.main([str(path), "--schedules", "5"]) == 1
    out = capsys.readouterr().out
    assert "pipeline-sim: note: @pingpong_balance: chose argument 0 = 4, argument 1 = 4" in out
    assert "pipeline-sim: deadlock: producer warp 0 of CTA 0 waits on pipeline 'ab'" in out

    good, _ = _pingpong(lambda k, n, s: k.range(1, n + 1, carry=[s]))
    path.write_text(str(good.module))
    assert cli.main([str(path), "--schedules", "5"]) == 0
    out = capsys.readouterr().out
    assert out.count("chose argument") == 3 and "pipeline-sim: OK: 5 schedules" in out
