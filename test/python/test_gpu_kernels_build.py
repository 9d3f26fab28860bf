"""The GPU suite's builder-made kernels (examples/copy_ring.py and
examples/tile_copies.py, as test/gpu/builder_kernels.py launches them),
checked without a GPU: each builds and verifies, the CPU simulator finds no bug in
it, it compiles to an sm_90a cubin (pipeline-to-cubin runs
pipeline-verify-protocol), its PTX has the instructions its pipeline class
stands for, and its manifest entry launches it the way it was built."""

import os
import sys

import pytest

from pipeline_mlir.dialects import pipeline as pl
from pipeline_mlir.kernel import has_pipeline_to_cubin

from _ir_utils import names, ops_named

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "gpu")))
import builder_kernels as bk  # noqa: E402

KINDS = sorted(bk.SPECS)
needs_lowering = pytest.mark.skipif(not has_pipeline_to_cubin(),
                                    reason="pipeline-to-cubin is not registered")

# kind -> (pipeline kind or None, PTX instructions that must appear)
EXPECT = {
    "pipeline_async": (pl.PipelineKind.Async,
                       ["mbarrier.arrive.shared.b64", "mbarrier.try_wait.parity.shared.b64"]),
    "pipeline_cp_async": (pl.PipelineKind.CpAsync,
                          ["cp.async.cg.shared.global",
                           "cp.async.mbarrier.arrive.noinc.shared.b64"]),
    "pipeline_tma_async": (pl.PipelineKind.TmaAsync,
                           ["mbarrier.arrive.expect_tx.shared.b64",
                            "cp.async.bulk.tensor.2d.shared::cluster.global.tile"
                            ".mbarrier::complete_tx::bytes ["]),
    "pipeline_tma_async_mcast": (pl.PipelineKind.TmaAsync,
                                 ["mbarrier.arrive.expect_tx.shared.b64",
                                  ".mbarrier::complete_tx::bytes.multicast::cluster",
                                  "mapa.shared::cluster", "barrier.cluster.wait",
                                  "mbarrier.arrive.shared::cluster.b64",
                                  ".reqnctapercluster 2, 1, 1"]),
    "pipeline_tma_store": (pl.PipelineKind.TmaStore,
                           ["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group",
                            "cp.async.bulk.commit_group", "cp.async.bulk.wait_group.read 2",
                            "cp.async.bulk.wait_group.read 0", "fence.proxy.async.shared::cta"]),
    "pipeline_order": (pl.PipelineKind.Order,
                       ["mbarrier.arrive.shared.b64", "mbarrier.try_wait.parity.shared.b64"]),
    "named_barrier": (None, ["bar.arrive", "bar.sync"]),
}


def simulate(kernel, kind, trip_count, schedules=10):
    rep = bk.simulate(kernel, kind, trip_count=trip_count, schedules=schedules)
    assert rep.schedules == schedules or not rep.ok
    return rep


@pytest.mark.parametrize("kind", KINDS)
def test_builds_with_the_python_builders(kind):
    k = bk.build(kind)
    k.verify()
    want, _ = EXPECT[kind]
    created = [c.result.type.kind for c in ops_named(k, "pipeline.create")]
    assert created == ([want] if want is not None else [])
    if kind == "named_barrier":
        assert {"pipeline.named_barrier.arrive", "pipeline.named_barrier.sync"} <= set(names(k))
    if kind == "pipeline_tma_async_mcast":
        (create,) = ops_named(k, "pipeline.create")
        t = create.result.type
        assert (t.cluster_size, t.multicast, t.tx_count) == (2, pl.Multicast.M, bk.TILE)
        assert t.consumer.size == 2  # mcast_size * consumer warps
        (load,) = ops_named(k, "pipeline.copy.tma_load")
        assert " multicast " in str(load)


@pytest.mark.parametrize("kind", KINDS)
def test_simulator_finds_no_bug(kind):
    # 5 tiles: every ring (3 or 4 stages) wraps, so phases flip
    rep = simulate(bk.build(kind), kind, trip_count=5)
    assert rep.ok, {k: str(e) for k, (_, e) in rep.first.items()}


def test_simulator_catches_the_wrong_multicast_consumer_count():
    # counting consumer warps instead of mcast_size * consumer warps lets a
    # stage's empty barrier complete twice per round
    k = bk.pipeline_tma_async(cluster=2, consumer_arrivals=1)
    rep = simulate(k, "pipeline_tma_async_mcast", trip_count=5, schedules=3)
    assert not rep.ok and "overrun" in rep.counts


def test_simulator_catches_named_barrier_ring_shorter_than_its_stages():
    # the producer's final waits need a release of every stage (ntiles >= S)
    rep = simulate(bk.build("named_barrier"), "named_barrier", trip_count=2, schedules=3)
    assert rep.counts.get("deadlock") == 3


@needs_lowering
@pytest.mark.parametrize("kind", KINDS)
def test_compiles_to_sm90a(kind):
    k = bk.build(kind)
    cubin = k.compile("sm_90a")
    assert cubin[:4] == b"\x7fELF"
    ptx = " ".join(k.to_ptx("sm_90a").split())  # tabs -> spaces
    assert f".entry {k.name}(" in ptx
    for ins in EXPECT[kind][1]:
        assert ins in ptx, (kind, ins)


@pytest.mark.parametrize("kind", KINDS)
def test_manifest_entry_matches_the_kernel(kind):
    k = bk.build(kind)
    e = bk.manifest_entry(kind, k, 64)
    assert e["name"] == e["kernel"] == k.name == "builders_" + kind
    assert e["bytes"] >= 64 << 20 and e["stages"] >= 3 and e["check"] == "copy"
    assert e["smem"] == k.smem_bytes > 0
    assert e["block"][0] == k.block_dim[0]
    assert e["cluster"][0] == (k.cluster_dim or (1,))[0]
    assert e["grid"][0] % e["cluster"][0] == 0
    params = [a for a in e["args"] if a.get("param", True)]
    assert len(params) == len(e["signature"]) == len(k.entry.arguments)
    roles = {"in": "ptr", "out": "ptr", "scalar": "i32", "tma": "tma"}
    assert [roles[a["role"]] for a in params] == e["signature"]
    # every tile of src is moved exactly once per output copy
    (count,) = [a for a in e["args"] if a["role"] == "scalar"]
    ctas_sharing = e["cluster"][0]
    assert count["value"] * (e["grid"][0] // ctas_sharing) * bk.TILE == e["bytes"]
    out = e["expect"]["outputs"]["dst"]
    (dst,) = [a for a in e["args"] if a.get("name") == "dst"]
    assert dst["bytes"] == e["bytes"] * out["times"]
    for d in (a for a in e["args"] if a["role"] == "tma"):
        target = next(a for a in e["args"] if a.get("name") == d["of"])
        assert d["shape"][0] * d["shape"][1] * 4 == target["bytes"] // (
            out["times"] if d["of"] == "dst" else 1)
        # the TMA box is the bytes one CTA moves per tile
        assert d["box"][0] * d["box"][1] * 4 * e["cluster"][0] == bk.TILE
