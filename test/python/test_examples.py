"""The examples build, verify, and (once pipeline-to-cubin exists) compile."""

import os
import sys

import pytest

from pipeline_mlir.kernel import has_pipeline_to_cubin

from pipeline_mlir.dialects import pipeline as pl

from _ir_utils import names, ops_named

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
sys.path.insert(0, os.path.abspath(EXAMPLES))

import async_participants  # noqa: E402
import copy_ring  # noqa: E402
import pingpong  # noqa: E402
import tma_reduction  # noqa: E402
import tma_store_epilogue  # noqa: E402
import tma_umma_mainloop  # noqa: E402

needs_lowering = pytest.mark.skipif(
    not has_pipeline_to_cubin(),
    reason="the 'pipeline-to-cubin' pass pipeline is not registered in the "
           "installed pipeline_mlir (rebuild once the lowering has landed)")

CASES = {
    "tma_umma": (lambda: tma_umma_mainloop.build(), pl.PipelineKind.TmaUmma,
                 ["pipeline.copy.tma_load", "pipeline.consumer.release",
                  "pipeline.producer.tail"]),
    "async": (lambda: async_participants.build(), pl.PipelineKind.Async,
              ["pipeline.producer.acquire", "pipeline.producer.commit",
               "pipeline.consumer.wait", "pipeline.consumer.release",
               "pipeline.producer.tail"]),
    "tma_reduction": (lambda: tma_reduction.build(), pl.PipelineKind.TmaAsync,
                      ["pipeline.init_arrive", "pipeline.copy.tma_load"]),
    "tma_reduction_cluster": (lambda: tma_reduction.build(cluster=2),
                              pl.PipelineKind.TmaAsync,
                              ["pipeline.copy.tma_load"]),
    "copy_ring_async": (lambda: copy_ring.build("async", participants=True),
                        pl.PipelineKind.Async,
                        ["pipeline.producer.acquire", "pipeline.consumer.release"]),
    "copy_ring_cpasync": (lambda: copy_ring.build("cpasync"), pl.PipelineKind.CpAsync,
                          ["nvvm.cp.async.shared.global", "pipeline.producer.commit"]),
    "copy_ring_tma": (lambda: copy_ring.build("tma", 4, 16384, consumer_warps=4,
                                              schedule="persistent", per_warp=True),
                      pl.PipelineKind.TmaAsync, ["pipeline.copy.bulk", "pipeline.producer.tail"]),
    "copy_ring_tma2d": (lambda: copy_ring.build("tma2d", 3, 65536, consumer_warps=4,
                                                schedule="persistent", per_warp=True),
                        pl.PipelineKind.TmaAsync,
                        ["pipeline.copy.tma_load", "pipeline.producer.tail"]),
    "pingpong": (lambda: pingpong.build(), pl.PipelineKind.Async,
                 ["pipeline.producer.commit", "pipeline.consumer.release"]),
    "tma_store": (lambda: tma_store_epilogue.build(), pl.PipelineKind.TmaStore,
                  ["pipeline.copy.tma_store", "pipeline.named_barrier.sync",
                   "pipeline.producer.tail"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_example_builds_and_verifies(case):
    build, kind, expected = CASES[case]
    k = build()
    k.verify()
    created = ops_named(k, "pipeline.create")
    assert [c.result.type.kind for c in created] == [kind]
    got = set(names(k, ""))
    for op in expected:
        assert op in got, op
    assert k.smem_bytes > 0


def test_cluster_example_multicasts():
    k = tma_reduction.build(cluster=2)
    (create,) = ops_named(k, "pipeline.create")
    t = create.result.type
    assert (t.cluster.m, t.cluster_size, t.multicast) == (2, 2, pl.Multicast.M)
    assert t.consumer.size == 2 * tma_reduction.CONSUMER_WARPS
    text = str(k.module)
    assert " multicast " in text  # the tma_load's mask operand
    assert "known_cluster_size = array<i32: 2, 1, 1>" in text


@needs_lowering
@pytest.mark.parametrize("case", sorted(CASES))
def test_example_compiles_to_cubin(case):
    cubin = CASES[case][0]().compile()
    assert cubin[:4] == b"\x7fELF"


def test_copy_ring_parameters():
    """The copy ring's parameters reach the IR: who arrives (the groups'
    counts and elect-one), the schedule (a grid-stride loop), and bad
    parameters are refused with the rule."""
    def create_type(k):
        (create,) = ops_named(k, "pipeline.create")
        return create.result.type

    per_lane = create_type(copy_ring.build("async", producer_warps=2, consumer_warps=2))
    per_warp = create_type(copy_ring.build("async", producer_warps=2, consumer_warps=2,
                                           per_warp=True))
    assert (per_lane.producer.size, per_lane.consumer.size) == (64, 64)
    assert (per_warp.producer.size, per_warp.consumer.size) == (2, 2)
    # cp.async.mbarrier.arrive.noinc arrives once per producer lane
    assert create_type(copy_ring.build("cpasync", producer_warps=2, per_warp=True)
                       ).producer.size == 64
    assert "nvvm.read.ptx.sreg.nctaid.x" in str(
        copy_ring.build("async", schedule="persistent").module)
    assert "nvvm.read.ptx.sreg.nctaid.x" not in str(copy_ring.build("async").module)
    assert copy_ring.build("async", producer_warps=4, consumer_warps=4).block_dim[0] == 256
    for bad, rule in ((dict(kind="tma"), "per_warp=True"),
                      (dict(kind="cpasync", participants=True), "participants"),
                      (dict(kind="async", tile=1000), "multiple of 512"),
                      (dict(kind="tma2d", tile=2560, per_warp=True), "rows of 1024 bytes"),
                      (dict(kind="tma2d", tile=257 * 1024, per_warp=True), "at most 256"),
                      (dict(kind="async", schedule="strided"), "schedule must be")):
        with pytest.raises(ValueError, match=rule):
            copy_ring.build(**bad)
