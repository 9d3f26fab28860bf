"""Two checker rules next to the simulator (lit
test/Dialect/Pipeline/VerifyProtocol/named-barrier-arrive-only.mlir and
release-by-other-role-peeled.mlir): a role that only arrives on a named
barrier in a loop while another syncs on it, and a release left to another
role whose loop differs from the reader's by a peel. The checker's verdicts
are the lit files' expected-* lines; here each chunk also runs in the
simulator, which must agree: the correct chunks run clean, the bugs are
found (the arrive-only role's extra arrivals, the wgmma read in flight at
the release of the peeled loop, also where the releasing role has the
tail, the missing peel's deadlock). The peels the checker only warns
about (a tail met inside a loop after the loop) and the
roles set by a count that may differ between warps are correct: the
simulator runs them clean."""

import os
import re
import shutil
import subprocess
import sys

import pytest

import pipeline_mlir
from mlir import ir
from pipeline_mlir.sim import simulate

HERE = os.path.dirname(__file__)
LIT = os.path.join(HERE, "..", "Dialect", "Pipeline", "VerifyProtocol")
FILES = ("named-barrier-arrive-only.mlir", "release-by-other-role-peeled.mlir")

# kernel -> (the checker's verdict in the lit file, the simulator's finding
# kinds; None: runs clean)
EXPECTED = {
    "reader_arrives_only": ("error", {"unbalanced"}),
    "reader_arrives_then_syncs_on_a_second_barrier": (None, None),
    "consumer_arrives_producer_syncs": (None, None),
    "producer_arrives_two_stage_ring": ("error", {"deadlock"}),
    "producer_arrives_one_stage_ring": (None, None),
    "front_peel_explicit": (None, None),
    "front_peel_explicit_wgmma_in_flight": ("error", {"async-read"}),
    "back_peel_explicit": (None, None),
    "back_peel_wgmma_in_flight": ("error", {"async-read"}),
    "back_peel_in_branch": ("warning", None),
    "front_peel_missing": ("error", {"deadlock"}),
    "release_tail_explicit": (None, None),
    "release_tail_wgmma_in_flight": ("error", {"async-read"}),
    "release_tail_in_loop": ("warning", None),
    "producer_warps_loaded_two_stage_ring": ("error", {"deadlock"}),
    "producer_warps_loaded_one_stage_ring": (None, None),
    "producer_warps_loaded_per_thread": ("warning", None),
}


def _chunks():
    out = {}
    for name in FILES:
        with open(os.path.join(LIT, name)) as f:
            text = f.read()
        for chunk in text.split("// -----"):
            kernel = re.search(r"gpu\.func @(\w+)", chunk).group(1)
            kinds = set(re.findall(r"// expected-(error|warning)", chunk))
            verdict = ("error" if "error" in kinds else
                       "warning" if kinds else None)
            out[kernel] = (verdict, re.sub(r"// expected-.*\n", "", chunk))
    return out


CHUNKS = _chunks()


def test_every_lit_chunk_has_a_verdict_here():
    assert set(CHUNKS) == set(EXPECTED)


def _tool():
    near = os.path.join(os.path.dirname(sys.executable), "pipeline-opt")
    return near if os.path.exists(near) else shutil.which("pipeline-opt")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_checker_verdict(name, tmp_path):
    """The lit file's verdict, and the checker's on the chunk: an error, a
    warning and no error, or nothing."""
    verdict, text = CHUNKS[name]
    assert verdict == EXPECTED[name][0]
    path = tmp_path / "k.mlir"
    path.write_text(text)
    tool = _tool()
    assert tool, "pipeline-opt is not on PATH"
    err = subprocess.run([tool, "--pipeline-verify-protocol", str(path)],
                         capture_output=True, text=True).stderr
    got = ("error" if " error: " in err else
           "warning" if " warning: " in err else None)
    assert got == verdict, err


# The simulator does not branch on loaded values: the chunks whose roles
# are set by a loaded count run with it as the value the checker decided
# on (the one at which the barrier's threads add up).
LOADED_COUNT = re.compile(r"%np = llvm\.load .*\n")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_simulator_agrees(name):
    text = LOADED_COUNT.sub("%np = arith.constant 1 : i32\n", CHUNKS[name][1])
    with pipeline_mlir.make_context():
        module = ir.Module.parse(text)
        result = simulate(module, args={0: 4}, schedules=10, check=False)
    kinds = EXPECTED[name][1]
    if kinds is None:
        assert result.ok, str(result)
    else:
        assert kinds <= {f.kind for f in result.findings}, str(result)
