"""Randomized misuse of the Python builders and of the simulator CLI
(found by fuzzing): seeded, bounded, every case in a child process so that an abort
shows up as a return code. Only the project's own errors, or TypeError /
ValueError with a message of ours, may come out."""

import random
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_builders_random_misuse(seed):
    cases = 60
    p = subprocess.run([sys.executable, str(HERE / "_misuse_child.py"), str(seed), str(cases)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"child died (rc {p.returncode}): {p.stderr[-3000:]}"
    lines = p.stdout.splitlines()
    assert len(lines) == cases, p.stdout[-2000:]
    unexpected = [ln for ln in lines if "UNEXPECTED" in ln]
    assert not unexpected, unexpected
    # Both kinds of outcome were exercised.
    assert any(ln.endswith(": ok") for ln in lines)
    assert any(not ln.endswith(": ok") for ln in lines)


SIM_KERNEL = """
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<warp, 1>,
                        consumer = #pipeline.group<warp, 1>>
!PS = !pipeline.state<2, producer>
!CS = !pipeline.state<2, consumer>
gpu.module @m {
  gpu.func @k(%n: i32) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %p = pipeline.create : !P
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %n step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        pipeline.producer.acquire %p, %st : !P, !PS
        pipeline.producer.commit %p, %st : !P, !PS
        %next = pipeline.state.advance %st : !PS
        scf.yield %next : !PS
      }
      pipeline.producer.tail %p, %s : !P, !PS
    } else {
      %c = pipeline.state.make : !CS
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%st = %c) -> (!CS) : i32 {
        pipeline.consumer.wait %p, %st : !P, !CS
        pipeline.consumer.release %p, %st : !P, !CS
        %next = pipeline.state.advance %st : !CS
        scf.yield %next : !CS
      }
    }
    gpu.return
  }
}
"""

_VALUES = ["-5", "-1", "0", "1", "2", "3", "64", "1025", "63295", "99999999999999999999",
           "abc", "1.5", "", "2,2", "0,1,1", "1,1,1,1", "-3,1", "32,32,1"]
_OPTIONS = ["--block-dim", "--cluster", "--trip-count", "--seed", "--schedules",
            "--max-steps", "--exhaustive-bound", "--kernel"]


def test_sim_cli_random_misuse(tmp_path):
    f = tmp_path / "k.mlir"
    f.write_text(SIM_KERNEL)
    rng = random.Random(15)
    for _ in range(25):
        args = []
        for _ in range(rng.randint(1, 3)):
            args += [rng.choice(_OPTIONS), rng.choice(_VALUES)]
        args += ["--schedules", "3"]  # bounded: the last one wins
        p = subprocess.run([sys.executable, "-m", "pipeline_mlir.sim", str(f), *args],
                           capture_output=True, text=True, timeout=120)
        # 0 OK, 1 a bug found, 2 a usage error with a message; never a traceback.
        assert p.returncode in (0, 1, 2), (args, p.returncode, p.stderr[-2000:])
        assert "Traceback" not in p.stderr, (args, p.stderr[-2000:])
        if p.returncode == 2:
            assert "error:" in p.stderr, (args, p.stderr)
