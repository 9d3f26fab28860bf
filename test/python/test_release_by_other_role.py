"""A stage release left to another role (lit
test/Dialect/Pipeline/VerifyProtocol/release-by-other-role.mlir): one role
waits on a stage and reads it asynchronously, another releases it after a
named barrier both meet (branches of one warp-role split inside the loop,
or roles with a loop each over the same range). The checker's verdicts are the lit file's
expected-* lines; here each chunk also runs in the simulator, which must
agree: the twins run clean, the bugs are found (the read still in flight
at the release, the release by a warp that never waited, the hand-over
without a barrier as a stage overwritten while held)."""

import os
import re

import pytest

import pipeline_mlir
from mlir import ir
from pipeline_mlir.sim import simulate

HERE = os.path.dirname(__file__)
LIT = os.path.join(HERE, "..", "Dialect", "Pipeline", "VerifyProtocol",
                   "release-by-other-role.mlir")

# kernel -> the simulator's finding kinds (None: runs clean)
EXPECTED = {
    "wgmma_retired_after_the_barrier": {"async-read"},
    "wgmma_retired_before_the_barrier": None,
    "releaser_without_wait_wgmma_in_flight": {"unbalanced"},
    "tma_store_unwaited_before_the_barrier": {"async-read"},
    "tma_store_waited_before_the_barrier": None,
    "hand_over_without_a_barrier": {"overwrite"},
    "own_loops_wgmma_retired_after_the_barrier": {"async-read"},
    "own_loops_wgmma_retired_before_the_barrier": None,
    "own_loops_releaser_without_wait": {"unbalanced"},
    "own_loops_without_a_barrier": {"overwrite"},
}


def _chunks():
    with open(LIT) as f:
        text = f.read()
    out = {}
    for chunk in text.split("// -----"):
        name = re.search(r"gpu\.func @(\w+)", chunk).group(1)
        out[name] = re.sub(r"// expected-.*\n", "", chunk)
    return out


CHUNKS = _chunks()


def test_every_lit_chunk_has_a_verdict_here():
    assert set(CHUNKS) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_simulator_agrees(name):
    with pipeline_mlir.make_context():
        module = ir.Module.parse(CHUNKS[name])
        result = simulate(module, args={0: 4}, schedules=10, check=False)
    kinds = EXPECTED[name]
    if kinds is None:
        assert result.ok, str(result)
    else:
        assert kinds <= {f.kind for f in result.findings}, str(result)
