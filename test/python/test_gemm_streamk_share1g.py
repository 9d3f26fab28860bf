"""Stream-K's one-arrival shared fix-up with one arrival a consumer
warpgroup instead of a warp, deviceless (GemmConfig.sk_wg_arrival,
``<tile>_streamk_share1g[v4]``; kernels/streamk_fixup.stream_k_share): the
warpgroup's warps meet at its epilogue barrier after their partial stores,
its first warp arrives (and resets the counter or polls, as
test_gemm_streamk_share1.py's variants do), and the warps meet again before
the share loads. A candidate: not registered as a variant, not measured.

Checked here: it builds and passes the protocol checker, ptxas takes it
without spills, the PTX keeps one arrival and one poll and adds the two
meetings; the simulator runs one tile over three CTAs clean with the two
warpgroup counters back at 0, and finds either meeting left out as a race
on the workspace (a partial stored after the arrival's release, or a share
read before the poll's acquire)."""

from dataclasses import replace

import pytest

from _ptxas import spill_bytes

from pipeline_mlir.kernels import hopper_gemm as hg
from pipeline_mlir.ops import gemm_configs
from test_gemm_streamk_share1 import ONE_TILE, _sim, cross_cta_readers, one_tile_world

BASE = "128x128_streamk_share1v4"


def _build(variant=BASE, dtype="bf16"):
    cfg = replace(hg.GemmConfig(dtype=dtype), **gemm_configs.overrides(variant),
                  sk_wg_arrival=True)
    return cfg, hg.build(cfg)


@pytest.fixture(scope="module")
def share1g():
    return _build()


def test_it_needs_the_one_arrival_fixup():
    cfg = replace(hg.GemmConfig(), **gemm_configs.overrides("128x128_streamk_share"))
    with pytest.raises(ValueError, match="sk_wg_arrival"):
        hg.build(replace(cfg, sk_wg_arrival=True))


def test_builds_checks_and_assembles_without_spills(share1g):
    """to_ptx runs the protocol checker; one arrival (atomic add between
    two membar.gl) and one poll as in _share1v4, and two more bar.sync (the
    warpgroup's meetings) than it has."""
    cfg, k = share1g
    k.verify()
    ptx = k.to_ptx()
    assert cfg.name.endswith("_streamk_share1gv4")
    one = hg.build(replace(cfg, sk_wg_arrival=False)).to_ptx()
    assert ptx.count("atom.global.add.u32") == 1 and ptx.count("membar.gl") == 3
    assert ptx.count("ld.relaxed.gpu.global.b32") == 1
    assert ptx.count("st.relaxed.gpu.global.b32") == 1
    assert ptx.count("bar.sync") == one.count("bar.sync") + 2
    assert spill_bytes(ptx) in (None, 0)                 # None: no ptxas here


def test_simulates_clean_and_resets_its_counters(share1g):
    """One tile over three CTAs, clean over two schedules; in one run, the
    two warpgroup counters of the tile (argument 8) read 0 at the end, every
    CTA reads partials another CTA wrote, and C is written whole."""
    k = share1g[1]
    res = _sim(k, *ONE_TILE)
    assert res.ok, str(res)
    ctas, m, n, kdim = ONE_TILE
    w = one_tile_world(k)
    g = w.gmem
    counters = [wd for key, wd in g.words.items() if key[0] == 8 and wd.written]
    assert len(counters) == 2 and all(wd.value == 0 for wd in counters)
    assert set(cross_cta_readers(w)) == {0, 1, 2}
    c = [wd for key, wd in g.words.items() if key[0] == 3 and wd.written]
    assert len(c) == m * n * 2 // 4


class _Skip:
    """The warpgroup's barrier with its ``skip``-th meeting left out."""

    def __init__(self, sync, skip):
        self.sync, self.skip, self.met = sync, skip, 0

    def arrive_and_wait_w_index(self, cw):
        self.met += 1
        if self.met != self.skip:
            self.sync.arrive_and_wait_w_index(cw)


@pytest.mark.parametrize("skip", [1, 2], ids=["stores before arrival", "acquire before loads"])
def test_a_meeting_left_out_is_found(skip, monkeypatch):
    real = hg.stream_k_share
    monkeypatch.setattr(hg, "stream_k_share",
                        lambda *a, sync=None, **kw: real(*a, sync=_Skip(sync, skip), **kw))
    res = _sim(_build()[1], *ONE_TILE)
    races = [f for f in res.findings if f.kind == "gmem-race"]
    assert races, str(res)
    assert any("reads `sk_workspace` (argument 7)" in f.message for f in races), str(res)
