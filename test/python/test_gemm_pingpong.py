"""The ping-pong consumer schedule of the Hopper GEMM
(``GemmConfig.pingpong_m``, kernels/hopper_gemm_pingpong.py; the
``128x128pp`` and ``64x256pp`` variants of ``gemm_configs.VARIANTS``): each
consumer warpgroup owns whole tiles, the two take the CTA's tiles and their
mainloops in turn through named barriers, each stores through its own C
buffer. Deviceless: the kernels are built, assembled (ptxas where it is on
PATH: no spills), checked by pipeline-verify-protocol and run by the
simulator; planted mistakes of the schedule (a warpgroup that enters its
mainloop without its turn, ring states that disagree with the producer's
tile order) are rejected; the fused pick takes the ping-pong tile by its
rule."""

import os
import re
from dataclasses import replace

import pytest

from _example_checks import messages, protocol_warnings, simulate, verify_protocol
from pipeline_mlir.kernels import hopper_gemm as hg
from pipeline_mlir.kernels import hopper_gemm_pingpong as pp
from pipeline_mlir.ops import gemm_configs as gc
from pipeline_mlir.ops import hopper_gemm_host
from pipeline_mlir.ops.epilogues import Epilogue
from _ptxas import spill_bytes as _ptxas

VARIANTS = ("128x128pp", "64x256pp")
LINEAR_GELU = Epilogue(bias="col", activation="gelu_tanh")
FULL = Epilogue(alpha="param", bias="col", residual=True, activation="gelu_erf")
# m, n, k (kernel arguments 4, 5, 6): 128x128pp runs 8 tiles (4 a warpgroup)
# of 4 k-blocks, and 3 tiles (2 + 1: the turn of the warpgroup with one tile
# fewer is left pending) of 7 k-blocks (past the 6 stages: the ring wraps
# inside a tile)
SIM_ARGS = ({4: 256, 5: 512, 6: 256}, {4: 384, 5: 128, 6: 448})


def _cfg(variant="128x128pp", epilogue=None):
    _, over = gc.fused(variant, epilogue)
    over = dict(over)
    if over.get("epilogue") is not None:
        over["epilogue"] = Epilogue.from_json(over["epilogue"])
    return replace(hg.GemmConfig(), **over)


def test_tiles_stages_and_shared_memory():
    cfg = _cfg()
    assert (cfg.block_m, cfg.block_n, cfg.threads) == (128, 128, 384)
    assert cfg.name.endswith("_pp") and cfg.setmaxnreg
    # a stage is one warpgroup's A (128 x 64) and B (128 x 64); a C buffer
    # of one 64-row sub-tile per warpgroup
    assert cfg.epilogue_bytes() == 2 * 64 * 128 * 2
    k = hg.build(cfg)
    assert k.stages == 6 and k.smem_bytes <= hg.SMEM_LIMIT
    ptx = k.to_ptx()
    # two m64n128 per k-slice, 4 k-slices: the first k-block and the loop's
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") == 16
    # per sub-tile, its two 64-column boxes
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 4
    assert "setmaxnreg.inc" in ptx
    wide = hg.build(_cfg("64x256pp"))
    assert (wide.config.block_m, wide.stages) == (64, 4)
    assert wide.to_ptx().count("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16") == 8


def test_each_stage_is_released_by_one_warpgroup_and_turns_are_named_barriers():
    """The ring's empty barrier counts one warpgroup's 4 warps (the
    cooperative kernel's counts both warpgroups'), and the turns are named
    barriers 3 and 4 of 256 threads, after the epilogue's 1 and 2."""
    text = str(hg.build(_cfg()).module)
    assert "<tma_async, stages = 6, producer = <thread, 1>, consumer = <thread, 4>" in text
    coop = str(hg.build(replace(hg.GemmConfig(), **gc.VARIANTS["128x128"])).module)
    assert "producer = <thread, 1>, consumer = <thread, 8>" in coop
    assert pp.turn_barrier_id(_cfg()) == 3
    assert "named_barrier.sync id = 3, threads = 256 index" in text
    assert "named_barrier.arrive id = 3, threads = 256 index" in text


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("epilogue", [None, LINEAR_GELU, FULL],
                         ids=["plain", "bias_gelu_tanh", "alpha_bias_res_gelu_erf"])
def test_builds_to_cubin_without_spills(variant, epilogue):
    """128 fp32 accumulators a thread (two 64x128 sub-tiles, or one 64x256)
    and the epilogue, a residual included, within the consumers'
    registers: no spill."""
    k = hg.build(_cfg(variant, epilogue))
    assert _ptxas(k.to_ptx()) in (None, 0)
    assert k.compile()


@pytest.mark.parametrize("variant", VARIANTS)
def test_protocol_checker_and_simulator_accept_it(variant):
    text = str(hg.build(_cfg(variant)).module)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    for args in SIM_ARGS:
        (report,) = simulate(text, schedules=2, args=args).values()
        assert report.ok and report.schedules == 2, (args, report)


def test_the_fused_kernel_simulates_clean():
    text = str(hg.build(_cfg(epilogue=LINEAR_GELU)).module)
    (report,) = simulate(text, schedules=2, args=SIM_ARGS[1]).values()
    assert report.ok, report


# --- planted mistakes: each a wrong twin of one part of the schedule -------------------

class TurnNotAwaited(pp.Turns):
    """A warpgroup enters its mainloop without waiting for the other's
    hand-off (both issue at once, as the cooperative kernel does, but the
    hand-offs still arrive)."""

    def begin(self):
        pass


class TurnsCrossed(pp.Turns):
    """Each warpgroup waits on the id it arrives on (the other's turn)."""

    def ids(self, cw):
        _, other = super().ids(cw)
        return other, other


class LastHandOffLeftPending(pp.Turns):
    """No warpgroup takes the turn handed on after the CTA's last tile."""

    def drain(self, tiles):
        pass


def test_the_last_hand_off_is_taken_before_exit(monkeypatch):
    """3 tiles: warpgroup 0 runs two, and its last hand-off goes to
    warpgroup 1, which must take it (``Turns.drain``) before the CTA exits."""
    text = _planted(monkeypatch, "Turns", LastHandOffLeftPending)
    (report,) = simulate(text, schedules=2, args=SIM_ARGS[1]).values()
    assert not report.ok
    assert re.search(r"CTA 0 exits while named barrier 4 of CTA 0 holds 128 of 256 threads' "
                     r"arrivals of a phase no sync completes", messages(report)["named-barrier"])


class SecondWarpgroupStartsAtTheFirstTile(pp.Tiles):
    """Warpgroup 1's ring states start at the CTA's first tile, where the
    producer put warpgroup 0's: the ring order disagrees with the
    producer's."""

    def skip_first(self, states):
        pass


class OtherTileNotSkipped(pp.Tiles):
    """After its tile a warpgroup's states do not skip the other's tile."""

    def skip(self, states):
        pass


def _planted(monkeypatch, name, cls):
    monkeypatch.setattr(pp, name, cls)
    return str(hg.build(_cfg()).module)


@pytest.mark.parametrize("cls", [TurnNotAwaited, TurnsCrossed])
def test_a_turn_taken_without_the_hand_off_is_rejected(monkeypatch, cls):
    """Without the wait, each turn's id is reached by one warpgroup's
    arrives only: the checker says so; crossed ids are reached by both
    warpgroups (``drain`` syncs on the other's id), which the checker
    accepts, and the simulator rejects both when it runs them."""
    text = _planted(monkeypatch, "Turns", cls)
    errors = verify_protocol(text)
    if cls is TurnNotAwaited:
        assert errors and all(re.match(r"named barrier id [34] waits for 256 threads but "
                                       r"only 128 \(warps (4-7|8-11)\) reach it", e)
                              for e in errors), errors
    (report,) = simulate(text, schedules=2, args=SIM_ARGS[0]).values()
    assert not report.ok
    assert re.search(r"arrives on named barrier [34] of CTA 0 twice in one phase",
                     messages(report)["arrive-count"])


@pytest.mark.parametrize("cls", [SecondWarpgroupStartsAtTheFirstTile, OtherTileNotSkipped])
def test_ring_states_out_of_the_producers_order_are_rejected(monkeypatch, cls):
    """Both warpgroups then wait on stages of one tile: a stage's empty
    barrier gets 8 warps' releases for its 4 and its full barrier's phase
    runs ahead of a waiter. The static checker does not follow run-time
    stage counts; the simulator does."""
    text = _planted(monkeypatch, "Tiles", cls)
    (report,) = simulate(text, schedules=2, args=SIM_ARGS[0]).values()
    assert not report.ok
    assert re.search(r"consumer warp \d+ of CTA 0 waits on pipeline 'ab' full barrier stage "
                     r"\d of CTA 0 for phase 0 \(#0\), but phases #0 and #1 have both "
                     r"completed", messages(report)["overrun"])


# --- the host side and the pick --------------------------------------------------------

def test_launch_facts_and_grid():
    """A ping-pong tile is one warpgroup's: the meta's block_m is its rows,
    and the persistent grid is one CTA per SM (or per tile, if fewer)."""
    cfg = _cfg(epilogue=LINEAR_GELU)
    meta = hopper_gemm_host.meta_of(cfg, hg.build(cfg))
    assert (meta["block_m"], meta["block_n"], meta["threads"]) == (128, 128, 384)
    assert meta["layouts"]["c"]["rows"] == 64 and "ctas_per_sm" not in meta
    g = object.__new__(hopper_gemm_host.HopperGemm)
    g.meta, g.persistent, g._resident = meta, True, None
    assert g.grid(1024, 11008, 132, 4096) == (132, 1, 1)       # 688 tiles
    assert g.grid(256, 512, 132, 4096) == (8, 1, 1)
    assert gc.tile("128x128pp") == (128, 128) and gc.tile("64x256pp") == (64, 256)


def test_misuse_refused():
    base = _cfg()
    for change, match in ((dict(pingpong_m=96), "64 or 128"),
                          (dict(consumer_warpgroups=3), "consumer_warpgroups=2"),
                          (dict(cluster_m=2), "without cluster_m"),
                          (dict(stream_k=True), "without cluster_m"),
                          (dict(split_k=2), "without cluster_m"),
                          (dict(ctas_per_sm=2, setmaxnreg=False), "without cluster_m"),
                          (dict(accumulation="promoted"), "without cluster_m"),
                          (dict(block_n=256), "128 fp32 accumulators")):
        with pytest.raises(ValueError, match=match):
            replace(base, **change).check()


# (shape, plain pick): the shapes measured on an H200 (docs/gemm.md, "Fused
# epilogues, measured", the ping-pong schedule) where 128x128pp ran 1.02-1.13x
# the pick with a bias and each activation: at least 4 of its tiles an SM
PINGPONG_SHAPES = [((2048, 4096, 4096), "128x256"), ((1024, 11008, 4096), "128x256"),
                   ((4096, 4096, 4096), "128x256"), ((8192, 4096, 4096), "128x256"),
                   ((4096, 14336, 4096), "128x256c2"), ((2048, 28672, 4096), "128x256c2"),
                   ((8192, 8192, 8192), "128x256c2")]


CUT = {(1024, 11008, 4096): "128x240c2"}


@pytest.mark.parametrize("shape, pick", PINGPONG_SHAPES)
def test_the_fused_pick_takes_ping_pong_where_it_hides_epilogues(shape, pick):
    m, n, k = shape
    # plain: unchanged, but for a tile cut to the shape (gemm_configs.choose_cut:
    # 1024 x 11008 x 4096 is 184 pairs of 128x240c2, the same 3 rounds as
    # 344 tiles of 128x256, each 6% smaller), never a fused call's pick
    assert gc.choose(m, n, k, "bf16", 132) == CUT.get(shape, pick)
    for act in (None, "relu", "gelu_tanh", "gelu_erf", "silu"):
        assert gc.choose(m, n, k, "bf16", 132, fused=True, activation=act) == "128x128pp"
        # a residual was not measured: the pick stays what it was
        assert gc.choose(m, n, k, "bf16", 132, fused=True, activation=act,
                         residual=True) == pick


@pytest.mark.parametrize("shape", [
    (2048, 2048, 2048),     # 1.9 tiles an SM: even (the two-CTA rule stands)
    (4096, 1024, 4096),     # 1.9: even
    (1536, 4096, 4096),     # 2.9, over 192x128: 1.00-1.04x, not taken
    (512, 4096, 4096),      # 1.0: 0.89-1.01x
    (128, 8192, 8192),      # over 64x128: 0.81-0.87x
    (3072, 3072, 3072),     # over 192x192: 0.93-0.95x
    (4096, 4096, 4104),     # K rows not whole L2 sectors: 0.62-0.70x
    (1000, 1032, 520)])
def test_the_fused_pick_keeps_its_tile_elsewhere(shape):
    m, n, k = shape
    for act in (None, "relu", "gelu_tanh", "gelu_erf", "silu"):
        assert gc.choose(m, n, k, "bf16", 132, fused=True, activation=act) != "128x128pp"


def test_the_rule_counts_the_busiest_ctas_tiles():
    """At least ``PINGPONG_MIN_ROUNDS`` tiles on the busiest CTA: 3 x 132
    tiles are 3 each, one more makes 4 for one CTA; and the rule scales
    with the SMs, not a fixed tile count."""
    sms, rounds = 132, gc.PINGPONG_MIN_ROUNDS
    assert rounds == 4
    # 128 x (128 * 3 * 132): 3 tiles a CTA exactly; one tile more
    assert gc.choose_pingpong(128, 128 * 3 * sms, 4096, sms, "128x256") is None
    assert gc.choose_pingpong(128, 128 * (3 * sms + 1), 4096, sms, "128x256") == "128x128pp"
    assert gc.choose_pingpong(2048, 4096, 4096, 132, "128x256") == "128x128pp"     # 512 tiles
    assert gc.choose_pingpong(2048, 4096, 4096, 171, "128x256") is None            # 2.99 a CTA
    for pick in ("192x192", "192x128", "64x128", "128x192"):
        assert gc.choose_pingpong(4096, 4096, 4096, 132, pick) is None
    assert gc.choose_pingpong(4096, 4096, 4104, 132, "128x256") is None
    assert gc.choose_pingpong(4096, 4096, 4096, 132, "128x256", residual=True) is None


def test_the_cache_builder_prebuilds_the_ping_pong_picks():
    """scripts/build-gemm-cache.py --epilogues builds what a GPU host
    without MLIR needs for a fused call on a ping-pong shape: the ping-pong
    tile with every prebuilt epilogue, and the plain pick for a residual."""
    import argparse
    import importlib.util

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location(
        "build_gemm_cache", os.path.join(root, "scripts", "build-gemm-cache.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    args = argparse.Namespace(kernel=["hopper_gemm"], dtype=["bf16"], all=False,
                              shape=[(1024, 11008, 4096)], sms=132, epilogues=True)
    names = {v for _, v, _, _ in mod.wanted(args)}
    assert {"128x256", "128x256_alpha_bias_res_gelu_erf", "128x128pp",
            "128x128pp_bias_relu", "128x128pp_bias_gelu_tanh", "128x128pp_bias_gelu_erf",
            "128x128pp_bias_silu"} <= names
