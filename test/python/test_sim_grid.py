"""The simulator on a grid of several clusters (``simulate(..., grid=)``,
``pipeline-sim --grid``): each cluster has its own CTAs, cluster barrier
and multicast; global memory spans the grid. The kernel reads its place as
on the GPU (``%cluster_ctarank``, ``%clusterid``, ``%ctaid``, and their
counts); a hand-over between clusters through a flag released and acquired
at gpu scope is clean, one that relies on the cluster barrier (or on
cluster scope) is a race; the clustered stream-K GEMM
(``128x128c2n_streamk``) runs its fix-up across two clusters clean, and
its flag bumped before the partial is fenced is found there; a grid past
the cap, or not a whole number of clusters, is refused."""

import inspect
import random
from dataclasses import replace

import pytest
from mlir.dialects import arith, llvm, nvvm, scf
import mlir.ir as ir

from pipeline_mlir.kernel import GlobalPtr, Kernel, load, store
from pipeline_mlir.kernel.values import Scalar, i32, to_value
from pipeline_mlir.pipeline import Agent, CooperativeGroup, PipelineAsync
from pipeline_mlir.sim import simulate
from pipeline_mlir.sim.engine import run_one
from pipeline_mlir.sim.frontend import kernels as sim_kernels
from pipeline_mlir.sim.interp import Launch, make_world_factory
from pipeline_mlir.user_location import UserLine


def _line():
    """The line after the caller's."""
    return inspect.currentframe().f_back.f_lineno + 1


def _at(line):
    return f"test_sim_grid.py:{line}:"


def _ptr(base, index):
    return llvm.getelementptr(base.type, base, [to_value(index, i32())], [-2147483648], i32(), 0)


def _unused_pipeline(k):
    """The simulator runs kernels with pipeline ops."""
    PipelineAsync.create(num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 32),
                         consumer_group=CooperativeGroup(Agent.Thread, 32),
                         barrier_storage=k.alloc_barriers(2), name="unused")


def _sim(k, cluster, grid, schedules=20):
    return simulate(k.module, kernel=k.name, block_dim=k.block_dim, cluster=cluster,
                    grid=grid, schedules=schedules, check=False)


def _world(k, cluster, grid, args=None):
    """One random schedule of ``k`` run to its end; its world."""
    with k.module.context:
        sk, = sim_kernels(k.module)
    make = make_world_factory(sk, Launch(sk.block_dim, cluster, None, args or {}, grid=grid))
    rng = random.Random(0)
    return run_one(make, lambda n, cont: rng.randrange(n), 0)


# -- where a CTA is ----------------------------------------------------------

def test_every_cta_reads_its_place_in_the_grid():
    """Lane i of every CTA stores its i-th id into ``out[8 * ctaid.x + i]``:
    %ctaid.x / .y, %cluster_ctarank, %clusterid.x / .y, %nctaid.x,
    %nclusterid.x / .y. A 2 x 1 cluster on a 4 x 2 grid: 4 clusters."""
    k = Kernel("ids", block_dim=32, cluster_dim=(2, 1, 1), params={"out": GlobalPtr()})
    with k:
        out, = k.args
        _unused_pipeline(k)
        ids = [nvvm.read_ptx_sreg_ctaid_x(i32()), nvvm.read_ptx_sreg_ctaid_y(i32()),
               nvvm.read_ptx_sreg_cluster_ctarank(i32()), nvvm.read_ptx_sreg_clusterid_x(i32()),
               nvvm.read_ptx_sreg_clusterid_y(i32()), nvvm.read_ptx_sreg_nctaid_x(i32()),
               nvvm.read_ptx_sreg_nclusterid_x(i32()), nvvm.read_ptx_sreg_nclusterid_y(i32())]
        lane = k.lane_idx()
        linear = Scalar(ids[1]) * 4 + Scalar(ids[0])
        for i, v in enumerate(ids):
            with k.if_(lane == i):
                store(Scalar(v), out, linear * 8 + i)
        nvvm.MembarOp(nvvm.MemScopeKind.GPU)   # global memory is followed (gmem.py)
    w = _world(k, (2, 1, 1), (4, 2, 1))
    got = {key[1] // 4: wd.value for key, wd in w.gmem.words.items()}
    assert len(w.agents) == 8 and len(w.clusters) == 4
    for y in range(2):
        for x in range(4):
            row = [got[(4 * y + x) * 8 + i] for i in range(8)]
            assert row == [x, y, x % 2, x // 2, y, 4, 2, 2], (x, y, row)
    # CTAs numbered cluster by cluster: CTA i is rank i % 2 of cluster i // 2
    assert [(a.cta, a.rank, a.cluster) for a in w.agents] == [
        (i, i % 2, i // 2) for i in range(8)]


def test_a_grid_past_the_cap_or_not_whole_clusters_is_refused():
    with pytest.raises(ValueError, match="has 64 CTAs; the simulator runs every warp of "
                                         "every CTA and takes at most 32"):
        Launch((32, 1, 1), (2, 1, 1), grid=(64, 1, 1))
    with pytest.raises(ValueError, match=r"grid \(3, 1, 1\) is not a whole number of "
                                         r"clusters of \(2, 1, 1\)"):
        Launch((32, 1, 1), (2, 1, 1), grid=(3, 1, 1))
    assert Launch((32, 1, 1), (2, 1, 1)).grid == (2, 1, 1)   # one cluster by default


# -- hand-overs between clusters -----------------------------------------------

def cluster_handover(reads_other):
    """Rank 0 of each cluster stores a partial (a word per lane) into slot
    ``%clusterid.x`` of ``ws`` and fences (membar.gl); the cluster syncs
    (barrier.cluster arrive + wait); rank 1 reads the partial of its own
    cluster, or (``reads_other``) of the other one: the cluster barrier does
    not order that cluster's store."""
    k = Kernel(f"cluster_handover_{'other' if reads_other else 'own'}", block_dim=32,
               cluster_dim=(2, 1, 1), params={"ws": GlobalPtr(), "out": GlobalPtr()})
    lines = {}
    with k:
        ws, out = k.args
        _unused_pipeline(k)
        rank, lane = k.cluster_cta_rank(), k.lane_idx()
        cid = Scalar(nvvm.read_ptx_sreg_clusterid_x(i32()))
        with k.if_(rank == 0):
            lines["store"] = _line()
            store(lane + 1, ws, cid * 32 + lane)
            with UserLine():
                nvvm.MembarOp(nvvm.MemScopeKind.GPU)
        k.cluster_sync()
        with k.if_(rank == 1):
            slot = (1 - cid) if reads_other else cid
            lines["load"] = _line()
            store(load(ws, i32(), slot * 32 + lane), out, cid * 32 + lane)
    return k, lines


def test_a_partial_of_its_own_cluster_after_the_cluster_barrier_is_clean():
    k, _ = cluster_handover(reads_other=False)
    res = _sim(k, (2, 1, 1), (4, 1, 1))
    assert res.ok, str(res)
    assert "4 CTA(s) (2 clusters of 2) x 1 warp(s)" in str(res)


def test_another_clusters_partial_after_only_a_cluster_barrier_is_a_race():
    k, lines = cluster_handover(reads_other=True)
    res = _sim(k, (2, 1, 1), (4, 1, 1))
    races = [f for f in res.findings if f.kind == "gmem-race"]
    assert races and set(res[0].counts) == {"gmem-race"}, str(res)
    f = races[0]
    # both lines named, and why: the two CTAs are in different clusters
    assert _at(lines["load"]) in f.message and _at(lines["store"]) in f.message, f.message
    assert "a cluster barrier, or a release or acquire of cluster scope, orders the CTAs " \
           "of its own cluster only" in f.message, f.message
    # every schedule shows it (the store and the read are never ordered)
    assert res[0].counts["gmem-race"] == res[0].schedules



def test_kernel_simulate_takes_the_grid():
    """``Kernel.simulate(grid=)`` runs the same grid as ``simulate``: the
    other cluster's partial read after only a cluster barrier is the race."""
    k, _ = cluster_handover(reads_other=True)
    res = k.simulate(grid=(4, 1, 1), schedules=5, check=False)
    assert "4 CTA(s) (2 clusters of 2)" in str(res), str(res)
    assert [f.kind for f in res.findings] and \
        {f.kind for f in res.findings} == {"gmem-race"}, str(res)
    own, _ = cluster_handover(reads_other=False)
    assert own.simulate(grid=(4, 1, 1), schedules=5).ok

def flag_handover(scope):
    """CTA 0 stores a partial, fences and bumps a flag (relaxed atomic add);
    CTA 1 polls the flag, fences and reads the partial; fences and atomics
    of ``scope`` ("device" or "cluster")."""
    kind = {"device": nvvm.MemScopeKind.GPU, "cluster": nvvm.MemScopeKind.CLUSTER}[scope]
    k = Kernel(f"flag_{scope}", block_dim=32, params={"ws": GlobalPtr(), "flag": GlobalPtr(align=4),
                                                      "out": GlobalPtr()})
    with k:
        ws, flag, out = k.args
        _unused_pipeline(k)
        cta, lane = k.block_idx(), k.lane_idx()
        with k.if_(cta == 0):
            store(lane + 1, ws, lane)
            nvvm.bar_warp_sync(to_value(-1, i32()))
            nvvm.MembarOp(kind)
            with k.if_(lane == 0):
                llvm.atomicrmw(llvm.AtomicBinOp.add, _ptr(to_value(flag), 0),
                               arith.constant(i32(), 1), llvm.AtomicOrdering.monotonic,
                               syncscope=scope)
        with k.if_(cta == 1):
            loop = scf.WhileOp([], [])
            before, after = loop.before.blocks.append(), loop.after.blocks.append()
            with ir.InsertionPoint(before):
                seen = llvm.load(i32(), _ptr(to_value(flag), 0), alignment=4,
                                 ordering=llvm.AtomicOrdering.monotonic, syncscope=scope)
                waiting = arith.cmpi(arith.CmpIPredicate.ne, seen, to_value(1, i32()))
                scf.ConditionOp(nvvm.vote_sync(ir.IntegerType.get_signless(1),
                                               to_value(-1, i32()), waiting,
                                               nvvm.VoteSyncKind.any), [])
            with ir.InsertionPoint(after):
                scf.YieldOp([])
            nvvm.MembarOp(kind)
            store(load(ws, i32(), lane), out, lane)
    return k


def test_a_flag_of_gpu_scope_hands_a_partial_to_another_cluster():
    res = _sim(flag_handover("device"), (1, 1, 1), (2, 1, 1))
    assert res.ok, str(res)


def test_the_trace_shows_the_values_global_reads_return():
    """The poll's reads of the flag (0 until the contributor's add, then
    1) and the partial the reader loads after it (lane i stored i + 1)."""
    from pipeline_mlir.sim.engine import replay
    k = flag_handover("device")
    with k.module.context:
        sk, = sim_kernels(k.module)
    make = make_world_factory(sk, Launch(sk.block_dim, (1, 1, 1), None, {}, grid=(2, 1, 1)))
    lines = replay(make, seed=0, index=0)
    polls = [ln for ln in lines if ln.startswith("warp 0 of CTA 1 read `flag` (argument 1) "
                                                 "byte 0 = ") and "llvm.load" in ln]
    assert polls and polls[-1].startswith("warp 0 of CTA 1 read `flag` (argument 1) byte 0 = 1")
    assert all(" = 0 " in p for p in polls[:-1]), polls
    add = [ln for ln in lines if "llvm.atomicrmw" in ln and " read " in ln]
    assert add == [f"warp 0 of CTA 0 read `flag` (argument 1) byte 0 = 0 (llvm.atomicrmw at "
                   f"{__file__}:{add[0].rsplit(':', 2)[-2]}:{add[0].rsplit(':', 1)[-1]}"], add
    partial = [ln for ln in lines if "read `ws`" in ln]
    assert partial and partial[0].startswith(
        "warp 0 of CTA 1 read `ws` (argument 0) byte 0 = 1, byte 4 = 2, byte 8 = 3, "
        "byte 12 = 4 (+28 more words) (llvm.load"), partial


def test_a_flag_of_cluster_scope_orders_its_cluster_only():
    k = flag_handover("cluster")
    assert _sim(k, (2, 1, 1), (2, 1, 1)).ok          # one cluster of two: ordered
    res = _sim(k, (1, 1, 1), (2, 1, 1))              # two clusters of one: a race
    assert {f.kind for f in res.findings} == {"gmem-race"}, str(res)
    assert "orders the CTAs of its own cluster only" in res.findings[0].message


# -- the clustered stream-K GEMM -------------------------------------------------

VARIANT = "128x128c2n_streamk"
# One unit (a pair of 128x128 tiles along N) of 8 K blocks cut between the
# two clusters (arguments 4 m, 5 n, 6 k, 9 sk_ctas, 10 sk_rounds): cluster 0
# stores its partials, cluster 1 adds them.
SK_ARGS = {4: 128, 5: 256, 6: 512, 9: 2, 10: 0}


def _gemm():
    from pipeline_mlir.kernels import hopper_gemm as hg
    from pipeline_mlir.ops import gemm_configs as gc
    cfg = replace(hg.GemmConfig(), **gc.overrides(VARIANT))
    assert cfg.cluster_size == 2 and gc.along_n(VARIANT)
    return hg.build(cfg)


@pytest.fixture(scope="module")
def gemm():
    return _gemm()


def test_the_clustered_stream_k_fix_up_runs_across_two_clusters(gemm):
    """Not clean by doing nothing: every CTA of cluster 0 stores its
    partial (64 KiB: 16384 words each), and the CTA of the same rank in
    cluster 1 reads it, after acquiring its 8 consumer warps' counters."""
    w = _world(gemm, (2, 1, 1), (4, 1, 1), SK_ARGS)
    g = w.gmem
    ws = [key for key, wd in g.words.items() if key[0] == 7 and wd.w >= 0]
    assert len(ws) == 2 * 16384
    by_reader = {}
    for key in ws:
        writer = w.agents[g.words[key].w]
        assert writer.cluster == 0
        for r in g.words[key].reads:
            by_reader.setdefault(w.agents[r].cta, set()).add(writer.cta)
    assert by_reader == {2: {0}, 3: {1}}
    assert sum(g.warp(a).acquired for a in w.agents if a.cluster == 1) == 16


def test_the_clustered_stream_k_gemm_simulates_clean_on_two_clusters(gemm):
    res = simulate(gemm.module, args=SK_ARGS, cluster=(2, 1, 1), grid=(4, 1, 1),
                   schedules=3, check=False)
    assert res.ok, str(res)
    assert "4 CTA(s) (2 clusters of 2) x 12 warp(s)" in str(res)


def test_the_flag_bumped_before_the_fence_is_found_across_clusters(monkeypatch):
    from pipeline_mlir.kernel import arrival_counter as ac
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
    res = simulate(_gemm().module, args=SK_ARGS, cluster=(2, 1, 1), grid=(4, 1, 1),
                   schedules=3, check=False)
    races = [f for f in res.findings if f.kind == "gmem-race"]
    assert races, str(res)
    f = races[0]
    assert "reads `sk_workspace` (argument 7)" in f.message
    assert "the flag is set before the write is fenced" in f.message
    assert _at(lines["flag"]) in f.message
    # a CTA of cluster 1 reads what the CTA of its rank in cluster 0 wrote
    assert any(f"warp {w} of CTA {r + 2} reads" in f.message and f"of CTA {r} (" in f.message
               for w in range(12) for r in (0, 1)), f.message


def test_the_2x2_cluster_stream_k_gemm_runs_its_fix_up_across_two_clusters():
    """128x160c2x2_streamk: 4 CTAs a cluster, loads multicast along both
    axes (the masks' ranks are CTAs of the issuing cluster); one 2 x 2 unit
    cut between two clusters: every CTA of cluster 1 reads the partial of
    its rank in cluster 0, and two schedules run clean."""
    from pipeline_mlir.kernels import hopper_gemm as hg
    from pipeline_mlir.ops import gemm_configs as gc
    k = hg.build(replace(hg.GemmConfig(), **gc.overrides("128x160c2x2_streamk")))
    args = {4: 256, 5: 320, 6: 512, 9: 2, 10: 0}
    w = _world(k, (4, 1, 1), (8, 1, 1), args)
    g = w.gmem
    pairs = {(w.agents[r].cta, w.agents[wd.w].cta) for key, wd in g.words.items()
             if key[0] == 7 and wd.w >= 0 for r in wd.reads}
    assert pairs == {(4 + r, r) for r in range(4)}, pairs
    res = simulate(k.module, args=args, cluster=(4, 1, 1), grid=(8, 1, 1), schedules=2,
                   check=False)
    assert res.ok and "8 CTA(s) (2 clusters of 4)" in str(res), str(res)
