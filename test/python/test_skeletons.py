"""Ported kernels check clean: the synchronization skeletons of
FlashAttention-3's Hopper forward kernel and of CuTe DSL's Hopper and
Blackwell dense GEMMs (test/python/skeletons; the Blackwell one also as a
2-CTA pair, whose accumulator barrier the simulator must count twice as the
lowering does) get no finding -- no error, no
warning -- from pipeline-verify-protocol, and the simulator runs them to the
end on every explored schedule.

A planted bug in each shows that the clean result is not the checker looking
away: the same kernel with one verb dropped is rejected.
"""

import re

import pytest

from _example_checks import protocol_warnings, simulate, verify_protocol
from skeletons import cute_blackwell_gemm, cute_hopper_gemm, fa3_hopper_fwd

SKELETONS = {
    "fa3_hopper_fwd": fa3_hopper_fwd.build,
    "cute_hopper_gemm": cute_hopper_gemm.build,
    "cute_blackwell_gemm": cute_blackwell_gemm.build,
    "cute_blackwell_gemm_2cta": lambda: cute_blackwell_gemm.build(cta_pair=True),
}


# Integer kernel arguments the simulator runs with (by position): the
# FlashAttention consumer's mainloop starts at block 1, so its trip count
# comes from n_blocks, not from the simulator's fallback count.
SIM_ARGS = {"fa3_hopper_fwd": {4: 3}}


@pytest.fixture(scope="module", params=sorted(SKELETONS))
def skeleton(request):
    kernel = SKELETONS[request.param]()
    kernel.verify()
    return request.param, str(kernel.module)


def test_checker_finds_nothing(skeleton):
    _, text = skeleton
    assert verify_protocol(text) == []
    assert protocol_warnings(text) == []


def test_simulator_finds_nothing(skeleton):
    name, text = skeleton
    reports = simulate(text, schedules=20, args=SIM_ARGS.get(name))
    assert list(reports) == [name]
    report = reports[name]
    assert report.ok, report


def _drop_first(text, needle):
    lines = text.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if re.search(needle, line)]
    assert hits, needle
    del lines[hits[0]]
    return "".join(lines)


@pytest.mark.parametrize("name, needle, message", [
    # The Q release of FlashAttention's tile loop (Q is the one-stage pipeline).
    ("fa3_hopper_fwd", r"pipeline\.consumer\.release .*<tma_async, stages = 1,",
     "pipeline 'q': loop body waits on 1 stage but releases 0"),
    ("cute_hopper_gemm", "pipeline.consumer.release", "pipeline 'ab': loop body waits on 1 stage but releases 0"),
    ("cute_blackwell_gemm", "pipeline.consumer.release", "pipeline 'ab': loop body waits on 1 stage but releases 0"),
])
def test_a_planted_bug_is_caught(name, needle, message):
    text = _drop_first(str(SKELETONS[name]().module), needle)
    errors = verify_protocol(text)
    assert any(e.startswith(message) for e in errors), errors
