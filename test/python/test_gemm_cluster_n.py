"""The 2-CTA cluster side by side along N (GemmConfig.cluster_along_n,
gemm_configs ``<tile>c2n``): the pair shares each A tile (each CTA loads
half of its rows and multicasts them) and loads its own B. Deviceless: the
192x192 kernel is built once, assembled (ptxas where it is on PATH: no
spills), checked by pipeline-verify-protocol and run by the simulator on a
ragged output of an odd count of tile rows; a planted mistake in the A
multicast (the peer's half loaded without the multicast: the stage's
transaction count is never reached) is rejected by the checker; the pair's tiles are the
neighbours along N of the grouped order; the variants before it build the
same kernel."""

import re
import textwrap
from dataclasses import replace

import pytest

from _example_checks import protocol_warnings, simulate, verify_protocol
from _gemm_pick_rules import before_cluster_n_any  # noqa: F401 (autouse)
from _ptxas import spill_bytes
from pipeline_mlir.kernels import gemm_mainloop, hopper_gemm as hg
from pipeline_mlir.ops import gemm_configs as gc


# m, n, k (kernel arguments 4, 5, 6): one ragged row of tiles (odd: the pair
# along M would compute an empty one), three column pairs (the last ragged),
# 5 k-blocks (past the 4 stages: the ring wraps inside a tile)
SIM_ARGS = {4: 136, 5: 1064, 6: 320}


def _cfg(variant):
    return replace(hg.GemmConfig(), **gc.overrides(variant))


@pytest.fixture(scope="module")
def built():
    cfg = _cfg("192x192c2n")
    k = hg.build(cfg)
    return cfg, k, str(k.module), k.to_ptx()


def test_the_pair_shares_a_and_keeps_its_own_b():
    cfg = _cfg("192x192c2n")
    a, b, c = cfg.layouts()
    assert (a.rows, b.rows) == (96, 192)             # half of A's rows, all of B
    assert (cfg.a_multicast, cfg.b_multicast) == (2, 1)
    assert cfg.num_stages() == 4 and cfg.name.endswith("_cn")
    m_pair = _cfg("192x192c2")
    assert (m_pair.layouts()[0].rows, m_pair.layouts()[1].rows) == (192, 96)
    assert "_cn" not in m_pair.name
    for bad in (dict(cluster_m=1), dict(stream_k=True, sk_prefetch=True), dict(split_k=2)):
        with pytest.raises(ValueError, match="cluster_along_n|split_k needs cluster_m=1"):
            replace(cfg, **bad).check()


def test_kernel_lowers_assembles_and_is_checked(built):
    cfg, k, text, ptx = built
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16") == 8
    # one A load, multicast; one B load, not
    loads = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\S*", ptx)
    assert len(loads) == 2 and sum("multicast::cluster" in x for x in loads) == 1, loads
    assert k.smem_bytes <= hg.SMEM_LIMIT and k.stages == 4
    assert spill_bytes(ptx) in (None, 0)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    (report,) = simulate(text, schedules=2, args=SIM_ARGS, cluster=(2, 1, 1)).values()
    assert report.ok and report.schedules == 2, report


def test_a_peer_half_not_multicast_is_rejected(monkeypatch):
    """Each CTA loads its half of A into its own stage only: a stage then
    receives 36,864 of the 49,152 bytes its full barrier expects (the
    peer's half never comes), and the checker refuses the kernel."""
    src = open(gemm_mainloop.__file__).read()
    code = textwrap.dedent(src[src.index("def producer("):src.index("class MmaKBlock")])
    mcast = "mcast_mask=(1 << cluster) - 1)"
    first = code.index(mcast)                # the A load of cluster_along_n
    assert code.index("if cfg.cluster_along_n:") < first < code.index("rank * b_tile.rows")
    code = code[:first] + "mcast_mask=None)" + code[first + len(mcast):]
    ns = dict(vars(gemm_mainloop))
    exec(compile(code, gemm_mainloop.__file__, "exec"), ns)
    monkeypatch.setattr(hg, "producer", ns["producer"])
    text = str(hg.build(_cfg("192x192c2n")).module)
    try:
        errors = verify_protocol(text)
    except Exception as e:   # the pass fails on it
        errors = [str(e)]
    assert any("expects 49152 bytes (tx_count 49152) but the 2 copies bound to this stage "
               "deliver 36864" in e for e in errors), errors


def test_the_pair_is_two_neighbours_along_n():
    """The unit order of the kernel's scheduler, on ints: the grouped order
    over tile pairs, rank r taking column 2 * pair + r."""
    sched = hg.ClusterAlongNScheduler.__new__(hg.ClusterAlongNScheduler)
    sched.tiles_m, sched.tiles_n, sched.group_m = 11, 42, 8    # 2072 x 16040 on 192x192
    per_group = sched.tiles_n * sched.group_m
    seen = set()
    for unit in range(11 * 42):
        group, in_group = divmod(unit, per_group)
        rows = min(sched.tiles_m - group * 8, 8)
        pair, in_rows = divmod(in_group, rows)
        for r in (0, 1):
            seen.add((group * 8 + in_rows, 2 * pair + r))
    assert len(seen) == 11 * 84          # every tile once, none empty


def test_the_pick_takes_it_over_192x192_where_its_rounds_are_fewer(monkeypatch):
    """2072 x 16040 x 3464 (K not a multiple of 16; 11 x 84 tiles: 7 rounds
    of pairs along N against 7 waves at the one CTA's 1.04): the cluster
    along N, 0.90x the one-CTA time on an H200. 5128 x 13896 x 7224 (73
    tile columns: a pair a row half empty, 16 rounds against 15 waves)
    keeps 192x192, which ran 1.4% faster. No other pick becomes it, a fused
    call never takes it, and the cubes and model shapes keep theirs."""
    sys_path = __import__("sys").path
    sys_path.insert(0, str(__import__("pathlib").Path(__file__).parents[2]
                           / "benchmarks" / "gemm"))
    import sweep

    for dtype in ("bf16", "f16"):
        assert gc.choose(2072, 16040, 3464, dtype) == "192x192c2n"
        assert gc.choose(5128, 13896, 7224, dtype) == "192x192"
        assert gc.choose(2072, 16040, 3464, dtype, fused=True) != "192x192c2n"
    assert gc.estimate("192x192c2n", 2072, 16040, 132, 3464) < \
        gc.estimate("192x192", 2072, 16040, 132, 3464)
    assert gc.choose_cluster_n(2072, 16040, 3464, 132, "128x256c2") is None
    shapes = [s[:3] for s in sweep.SHAPES]
    now = [gc.choose(m, n, k, "bf16") for m, n, k in shapes]
    monkeypatch.setattr(gc, "AUTO_CLUSTER_N", False)
    assert gc.choose(2072, 16040, 3464, "bf16") == "192x192"
    assert now == [gc.choose(m, n, k, "bf16") for m, n, k in shapes]
    assert "192x192c2n" not in now
