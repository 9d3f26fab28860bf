"""pipeline-sim on the stream-K GEMM's fix-up (kernels/streamk_fixup.py,
kernel/arrival_counter.py) over several CTAs: contributors store their
fp32 partials into workspace slots, fence and bump per-warp counters; the
tile's last contributor polls, fences and adds the slots (the shared
fix-up: every contributor waits for all and sums its share). The
simulator follows the workspace and the counters (sim/gmem.py): the
production kernels simulate clean on launches where the fix-up runs, and
each planted mistake is found, at the line of the code that plants it.

Arguments: 4 m, 5 n, 6 k, 9 sk_ctas, 10 sk_rounds; the grid is the
simulated CTAs (``cluster``)."""

import inspect
import re
from dataclasses import replace

import pytest
from mlir.dialects import arith, llvm, nvvm, scf
import mlir.ir as ir

from pipeline_mlir.kernel import arrival_counter as ac
from pipeline_mlir.kernel.tile_scheduler import StreamKSchedule
from pipeline_mlir.kernel.values import i32, to_value
from pipeline_mlir.kernels import hopper_gemm as hg
from pipeline_mlir.ops import gemm_configs
from pipeline_mlir.sim import TensorMap, simulate
from pipeline_mlir.user_location import UserLine

VARIANT = "128x128_streamk"


def _line():
    return inspect.currentframe().f_back.f_lineno + 1


def _build(share=False):
    cfg = replace(hg.GemmConfig(), **gemm_configs.overrides(VARIANT))
    return hg.build(replace(cfg, sk_share=True) if share else cfg)


@pytest.fixture(scope="module")
def kernels():
    return {"partial": _build(), "share": _build(share=True)}


def _sim(k, ctas, m, n, kdim, rounds=0, schedules=3):
    return simulate(k.module, args={4: m, 5: n, 6: kdim, 9: ctas, 10: rounds},
                    cluster=(ctas, 1, 1), schedules=schedules, check=False)


# (CTAs, m, n, k, whole-tile rounds): one tile cut in two; two tiles over
# three CTAs (the middle one ends the first and starts the second); a
# whole-tile round, then one tile shared by three CTAs.
SHAPES = [(2, 128, 128, 256, 0), (3, 256, 128, 512, 0), (3, 512, 128, 384, 1)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_the_last_contributor_fix_up_simulates_clean(kernels, shape):
    res = _sim(kernels["partial"], *shape)
    assert res.ok, str(res)


def test_the_shared_fix_up_simulates_clean(kernels):
    """One tile shared by three CTAs: each sums its third of every slot."""
    res = _sim(kernels["share"], 3, 128, 128, 512, schedules=2)
    assert res.ok, str(res)


def test_the_fix_up_runs_in_the_simulation(kernels):
    """Not clean by doing nothing: the workspace of the one-tile launch
    holds CTA 0's partial (64 KiB: 16384 words), read by CTA 1 after it
    acquired the counters of its 8 consumer warps."""
    import random

    from pipeline_mlir.sim.engine import run_one
    from pipeline_mlir.sim.frontend import kernels as sim_kernels
    from pipeline_mlir.sim.interp import Launch, make_world_factory

    k = kernels["partial"]
    with k.module.context:
        sk, = sim_kernels(k.module)
    make = make_world_factory(sk, Launch(sk.block_dim, (2, 1, 1), None,
                                         {4: 128, 5: 128, 6: 256, 9: 2, 10: 0}))
    rng = random.Random(0)
    w = run_one(make, lambda n, cont: rng.randrange(n), 0)
    g = w.gmem
    ws = [key for key, wd in g.words.items() if key[0] == 7 and wd.w >= 0]
    assert len(ws) == 16384
    readers = {r for key in ws for r in g.words[key].reads}
    assert {w.agents[r].cta for r in readers} == {1} and len(readers) == 8
    assert sum(g.warp(a).acquired for a in w.agents if a.cta == 1) == 8


def _finding(kind, ctas=2, m=128, kdim=256, schedules=3):
    res = _sim(_build(), ctas, m, 128, kdim, schedules=schedules)
    found = [f for f in res.findings if f.kind == kind]
    assert found, str(res)
    return found[0]


def _at(line):
    return f"test_sim_streamk_fixup.py:{line}:"


def test_the_counter_bumped_before_the_partial_is_fenced_is_found(monkeypatch):
    lines = {}

    def arrive(counters, index, lane):
        nvvm.bar_warp_sync(to_value(-1, i32()))
        first = to_value(lane == 0, what="lane 0")
        branch = scf.IfOp(first, [i32()], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            lines["flag"] = _line()
            with UserLine():   # the atomic, with no fence before it
                old = llvm.atomicrmw(llvm.AtomicBinOp.add, ac._counter_ptr(counters, index),
                                     arith.constant(i32(), 1), llvm.AtomicOrdering.monotonic,
                                     syncscope="device")
            scf.YieldOp([old])
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp([arith.constant(i32(), 0)])
        ac._fence_gpu()
        return branch.results[0]
    monkeypatch.setattr(ac, "warp_arrive", arrive)
    f = _finding("gmem-race")
    assert "reads `sk_workspace` (argument 7)" in f.message
    assert "the flag is set before the write is fenced" in f.message
    assert _at(lines["flag"]) in f.message


def test_the_poll_without_acquire_is_found(monkeypatch):
    real = ac._fence_gpu
    lines = {}

    def wait_count(counters, index, count, lane):
        monkeypatch.setattr(ac, "_fence_gpu", lambda: None)   # the poll's fence dropped
        try:
            lines["poll"] = _line()
            with UserLine():
                ac._poll(counters, index, count, lane, arith.CmpIPredicate.ne)
        finally:
            monkeypatch.setattr(ac, "_fence_gpu", real)
    monkeypatch.setattr(ac, "wait_count", wait_count)
    f = _finding("gmem-race")
    assert "reads `sk_workspace` (argument 7)" in f.message
    assert "the poll has no acquire" in f.message


def test_a_wrong_expected_count_is_a_deadlock_naming_the_poll(monkeypatch):
    real = ac.wait_count
    lines = {}

    def wait_count(counters, index, count, lane):
        lines["poll"] = _line()
        with UserLine():
            real(counters, index, count + 1, lane)     # one arrival too many
    monkeypatch.setattr(ac, "wait_count", wait_count)
    f = _finding("deadlock", schedules=1)
    assert "the poll loop at" in f.message and _at(lines["poll"]) in f.message
    assert "reads `sk_counters` (argument 8)" in f.message
    assert any(w.startswith("warp ") and "of CTA 1 at" in w and _at(lines["poll"]) in w
               for w in f.where), f.where


def test_a_fix_up_reading_the_wrong_slot_is_found(monkeypatch):
    """The last contributor adds slot 2c + 1 of a contributor whose partial
    is in slot 2c (its run began in this tile): nobody writes it."""
    real = StreamKSchedule.slot_of
    monkeypatch.setattr(StreamKSchedule, "slot_of",
                        lambda self, cta, tile: real(self, cta, tile) + 1)
    f = _finding("gmem-unwritten", schedules=1)
    # slot 1 (bytes 65536 ..): CTA 0's partial is in slot 0
    byte = int(re.search(r"reads `sk_workspace` \(argument 7\) byte (\d+)", f.message)[1])
    assert 65536 <= byte < 2 * 65536, f.message
    assert "no warp of the launch writes that word" in f.message


# C as the host maps it for the TMA-store epilogue: bf16, n x m (innermost
# first), 64 x 64 boxes, in the buffer of `c_ptr` (argument 3, through
# which the shared fix-up stores its shares): sim/gmem.py follows the
# epilogue's TMA stores into it.
C_MAP = {"c": TensorMap(2, (128, 128), (64, 64), buffer=3)}


def test_the_last_contributor_stores_c_alone_with_tma():
    """One tile cut in two: CTA 1 (the tile's last contributor) TMA-stores
    every word of C, CTA 0 none; clean over two schedules."""
    import random

    from pipeline_mlir.sim.engine import run_one
    from pipeline_mlir.sim.frontend import kernels as sim_kernels
    from pipeline_mlir.sim.interp import Launch, make_world_factory

    k = _build()
    res = simulate(k.module, args={4: 128, 5: 128, 6: 256, 9: 2, 10: 0}, cluster=(2, 1, 1),
                   schedules=2, check=False, tensor_maps=C_MAP)
    assert res.ok, str(res)
    with k.module.context:
        sk, = sim_kernels(k.module)
    make = make_world_factory(sk, Launch(sk.block_dim, (2, 1, 1), None,
                                         {4: 128, 5: 128, 6: 256, 9: 2, 10: 0},
                                         tensor_maps={2: C_MAP["c"]}))
    rng = random.Random(0)
    w = run_one(make, lambda n, cont: rng.randrange(n), 0)
    c = [wd for key, wd in w.gmem.words.items() if key[0] == 3 and wd.written]
    assert len(c) == 128 * 128 * 2 // 4
    assert {(w.agents[wd.w].cta, wd.op) for wd in c} == {(1, "pipeline.copy.tma_store")}


def test_a_contributor_storing_its_partial_as_c_is_a_race(monkeypatch):
    """Planted: every contributor stores C (the first one its partial), so
    the two CTAs' TMA stores of the tile race."""
    real = hg.stream_k_partial

    def always_store(*args, **kwargs):
        total, stores = real(*args, **kwargs)
        return total, stores | ~stores
    monkeypatch.setattr(hg, "stream_k_partial", always_store)
    res = simulate(_build().module, args={4: 128, 5: 128, 6: 256, 9: 2, 10: 0},
                   cluster=(2, 1, 1), schedules=1, check=False, tensor_maps=C_MAP)
    assert set(res[0].counts) == {"gmem-race"}, str(res)
    f = res.findings[0]
    assert "writes `c_ptr` (argument 3) byte" in f.message, f.message
    assert re.search(r"warp \d+ of CTA [01] writes .* written by warp \d+ of CTA [01] "
                     r"\(pipeline.copy.tma_store at ", f.message), f.message
    assert "whichever lands last wins" in f.message
