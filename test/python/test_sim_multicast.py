"""pipeline-sim follows a stage's TMA copies as bytes (sim/async_verbs.py):
a copy of ``bytes`` into ``dst`` lands at that offset in every CTA of its
multicast mask and completes its tx bytes on each CTA's full barrier; two
copies landing on the same bytes of one CTA in one phase of the stage's
full barrier are an smem-race naming both.

The multicast GEMMs of the library (ops/gemm_variants.py): 128x128c2n (a
pair along N, each CTA loads half of A's rows into both) and 128x96c2x2
(A along the tile row, B along the tile column). Clean as built; planted:
every CTA of the pair loading the first half (its rank read as 0), the 2x2
masks swapped (A to the tile column, B to the tile row: every barrier still
gets its bytes, so only the data shows it), and the multicast box's bytes
doubled (the barriers get more bytes than they expect).

Arguments: 4 m, 5 n, 6 k."""

import inspect
import random
from dataclasses import replace

import pytest

from pipeline_mlir.kernels import gemm_mainloop as gm
from pipeline_mlir.kernels import hopper_gemm as hg
from pipeline_mlir.ops import gemm_configs as gc
from pipeline_mlir.pipeline import tma_pipelines as tp
from pipeline_mlir.sim import simulate
from pipeline_mlir.sim.engine import run_one
from pipeline_mlir.sim.frontend import kernels as sim_kernels
from pipeline_mlir.sim.interp import Launch, make_world_factory

PAIR, QUAD = "128x128c2n", "128x96c2x2"
# One tile per CTA, 8 K blocks: every stage of the ring is filled more than
# once.
PAIR_ARGS = {4: 128, 5: 256, 6: 512}
QUAD_ARGS = {4: 256, 5: 192, 6: 512}


def _build(variant):
    cfg = replace(hg.GemmConfig(), **gc.overrides(variant))
    return hg.build(cfg), cfg.cluster_size


def _sim(k, ctas, args, schedules=3):
    return simulate(k.module, args=args, cluster=(ctas, 1, 1), schedules=schedules,
                    check=False)


def _line():
    return inspect.currentframe().f_back.f_lineno + 1


@pytest.fixture(scope="module")
def pair():
    return _build(PAIR)


def test_the_pair_simulates_clean_with_both_halves_in_each_cta(pair):
    """Not clean by doing nothing: in each CTA a phase of a stage holds
    three copies, A's two halves (one from each CTA, side by side) and its
    own B."""
    k, ctas = pair
    assert ctas == 2
    res = _sim(k, ctas, PAIR_ARGS)
    assert res.ok, str(res)
    with k.module.context:
        sk, = sim_kernels(k.module)
    make = make_world_factory(sk, Launch(sk.block_dim, (2, 1, 1), None, PAIR_ARGS))
    rng = random.Random(0)
    w = run_one(make, lambda n, cont: rng.randrange(n), 0)
    fills = {key: ranges for key, (_, ranges) in w.stage_fills.items()}
    assert {cta for cta, _, _ in fills} == {0, 1}
    for (cta, _, _), ranges in fills.items():
        assert len(ranges) == 3, ranges
        froms = sorted((lo, hi, who.split(" of ")[1]) for lo, hi, who, _, _ in ranges)
        (a0, a1, c0), (b0, b1, c1) = froms[:2]
        assert a1 == b0 and {c0, c1} == {"CTA 0", "CTA 1"}, froms


def test_both_ctas_loading_the_first_half_is_found(monkeypatch):
    """Each CTA reads its rank as 0: both send the first half of A's rows
    to offset 0 of both CTAs (the barriers still get every byte)."""
    real = gm.producer
    lines = {}

    def producer(k, cfg, ring, sched, units, rank, *args, **kw):
        lines["rank"] = _line()
        return real(k, cfg, ring, sched, units, rank * 0, *args, **kw)
    monkeypatch.setattr(hg, "producer", producer)
    k, ctas = _build(PAIR)
    res = _sim(k, ctas, PAIR_ARGS)
    assert res[0].counts == {"smem-race": 3}, str(res)   # every schedule
    for f in res.findings:
        assert "two copies land on the same bytes" in f.message
        assert "producer warp 0 of CTA 0's copy.tma_load" in f.message
        assert "producer warp 0 of CTA 1's copy.tma_load" in f.message
        assert f"test_sim_multicast.py:{lines['rank']}:" in f.message   # the planted call


@pytest.fixture(scope="module")
def quad():
    return _build(QUAD)


def test_the_2x2_cluster_simulates_clean(quad):
    k, ctas = quad
    assert ctas == 4
    res = _sim(k, ctas, QUAD_ARGS, schedules=2)
    assert res.ok, str(res)


def test_the_2x2_masks_swapped_are_found(monkeypatch):
    """A's mask sent along the tile column, B's along the row: each CTA
    gets two halves of A at the same offset (and two of B), its full
    barrier every byte it expects."""
    real = gm.cluster_2x2_masks

    def swapped(rank):
        a, b = real(rank)
        return b, a
    monkeypatch.setattr(gm, "cluster_2x2_masks", swapped)
    k, ctas = _build(QUAD)
    res = _sim(k, ctas, QUAD_ARGS)
    assert res[0].counts == {"smem-race": 3}, str(res)   # every schedule
    assert "which producer warp 0 of CTA" in res.findings[0].message


def test_the_multicast_box_bytes_doubled_are_found(monkeypatch):
    """The multicast loads say twice their box's bytes: the full barriers
    get more than they expect (a phase completes early or the bytes land
    after it, or a copy runs past its slot into words another CTA's wgmma
    still reads), found in every schedule."""
    real = tp.PipelineTmaAsync.tma_load

    def tma_load(self, state, desc, coords, dst, nbytes, mcast_mask=None):
        if mcast_mask is not None:
            nbytes *= 2
        return real(self, state, desc, coords, dst, nbytes, mcast_mask)
    monkeypatch.setattr(tp.PipelineTmaAsync, "tma_load", tma_load)
    k, ctas = _build(PAIR)
    res = _sim(k, ctas, PAIR_ARGS)
    assert sum(res[0].counts.values()) == 3, str(res)   # every schedule
    assert set(res[0].counts) <= {"tx-count", "early-read", "overwrite", "smem-race"}, str(res)
