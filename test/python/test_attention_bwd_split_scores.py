"""d 256 with the score GEMMs split by queries (``AttentionBwdConfig.
split_scores``), without a GPU: each consumer computes S^T and dP^T of its
32 queries (m64n32), writes its halves of P^T and dS^T into tiles both
share (two buffers by step), and dV and dK take their A from those tiles
after one barrier over both consumers. The sets build, check, assemble
without spills (the plain d 256 kernel spills), simulate clean on a ragged
GQA shape, and the planted mistakes are still rejected on the option,
with two of the new hand-over's own (its barrier over one warpgroup, one
buffer for every step) as races. ``dq_one_part`` (dQ's 128 columns as one
GEMM, with split_scores only) leaves no m64n64 GEMM. The GPU tests compare
every set with fp32 and with the default (test_gpu_attention_bwd.py).
"""

import re

import pytest

from _attention_bwd_builds import cfg_of
from _attention_bwd_mistakes import _ThisWarpgroup, build_with_mistake
from _ptxas import spill_bytes
from test_attention_bwd import CAUGHT, SCHEDULES, SIM_ARGS, assert_caught
from pipeline_mlir.chip_limits import SMEM_PER_BLOCK
from pipeline_mlir.kernels import attention_bwd as ab
from pipeline_mlir.kernels.attention_bwd import STAGES, GradGemms
from pipeline_mlir.ops import attention_configs

SPS = ("split_scores",)
DQR_LPT = ("split_scores", "dq_reduce_warp", "lpt_order")
GQA_ARGS = {"batch": 1, "heads": 4, "heads_kv": 2, "seqlen_q": 200, "seqlen_k": 300}


@pytest.fixture(scope="module")
def built():
    """(head_dim 256, causal, opts) -> (kernel, PTX), each built once."""
    cache = {}

    def get(causal, opts):
        if (causal, opts) not in cache:
            k = ab.build(cfg_of(256, causal, opts))
            cache[(causal, opts)] = (k, k.to_ptx())
        return cache[(causal, opts)]
    return get


def test_sets_are_cached_candidates():
    sets = [o for o in attention_configs.bwd_option_sets(256) if "split_scores" in o]
    assert len(sets) == 12
    for opts in sets:
        for causal in (False, True):
            name, _ = attention_configs.bwd_variant(256, causal, options=opts)
            assert name in attention_configs.BWD_CANDIDATES
    assert attention_configs.BWD_OPTIONS["split_scores"] == "sps"


@pytest.mark.parametrize("kw", [dict(head_dim=128), dict(dq_deferred=True),
                                dict(pingpong=True),
                                dict(p_packed=True), dict(stat_shuffle=True)],
                         ids=lambda kw: next(iter(kw)))
def test_refused(kw):
    base = dict(head_dim=256, stages=1, split_scores=True)
    with pytest.raises(ValueError, match="split_scores"):
        ab.AttentionBwdConfig(**{**base, **kw})


def test_shared_memory_and_shapes():
    """Two buffers of the shared P^T and dS^T (16 KiB more than each
    consumer's own dS^T tile), under the limit; S^T and dP^T of 32
    queries per consumer."""
    plain, split = cfg_of(256, False, ()), cfg_of(256, False, SPS)
    assert split.smem_bytes() - plain.smem_bytes() == 2 * 64 * 64 * 2
    assert split.smem_bytes() <= SMEM_PER_BLOCK
    assert (plain.score_n, split.score_n) == (64, 32)
    assert split.name.endswith("_sps") and not plain.name.endswith("_sps")


@pytest.mark.parametrize("causal,opts", [(False, SPS), (True, DQR_LPT)])
def test_gemms_and_spills(built, causal, opts):
    """m64n32 score GEMMs where the plain kernel has m64n64; dV and dK with
    A from shared memory (no register-A m64n128 wgmma left); no spills,
    where the plain d 256 kernel spills."""
    _, ptx = built(causal, opts)
    _, plain = built(causal, ())
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n32k16", ptx)
    assert not re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n32k16", plain)
    # register A: "{%r..}" as the first source operand
    reg_a = r"wgmma\.mma_async\.sync\.aligned\.m64n128k16[^;]*\},\s*\{"
    assert re.search(reg_a, plain) and not re.search(reg_a, ptx)
    spills, base = spill_bytes(ptx), spill_bytes(plain)
    if spills is None:
        pytest.skip("ptxas not installed")
    assert spills == 0 and base > 0, (spills, base)


@pytest.mark.parametrize("causal,opts", [(False, SPS), (True, DQR_LPT)])
def test_simulates_clean_on_gqa(built, causal, opts):
    k, _ = built(causal, opts)
    (report,) = k.simulate(GQA_ARGS, schedules=2)
    assert report.ok and report.schedules == 2, report


@pytest.mark.parametrize("mistake", sorted(CAUGHT))
def test_planted_mistakes_rejected(mistake):
    """The four planted backward mistakes, on the option without the
    reduce warp (its leader's reduce-add, LSE on its own ring)."""
    assert_caught(build_with_mistake(mistake, cfg_of(256, True, SPS)), *CAUGHT[mistake])


class SplitHandedOverByOneWarpgroup(GradGemms):
    """The barrier after the P^T / dS^T halves covers this warpgroup only:
    dV and dK may read the other half before the other warpgroup wrote
    it."""

    def store_split(self, p, ds, it):
        both, self.both = self.both, _ThisWarpgroup(self)   # wrong: one warpgroup
        try:
            return super().store_split(p, ds, it)
        finally:
            self.both = both


class SplitSingleBuffer(GradGemms):
    """Every step writes buffer 0: a warpgroup may overwrite its half
    while the other one's GEMMs of the step before still read it."""

    def store_split(self, p, ds, it):
        return super().store_split(p, ds, 0)                 # wrong: one buffer


@pytest.mark.parametrize("grads", [SplitHandedOverByOneWarpgroup, SplitSingleBuffer],
                         ids=lambda g: g.__name__)
def test_hand_over_mistakes_are_races(grads):
    from dataclasses import replace

    k = ab.build(cfg_of(256, True, DQR_LPT), stages=replace(STAGES, grads=grads))
    k.to_ptx()
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
    assert set(report.counts) == {"smem-race"} and report.counts["smem-race"] >= 1, report


D256 = ("split_scores", "dq_reduce_warp", "stats_with_tiles")     # the op's d 256 set


def test_dq_one_part_needs_split_scores():
    with pytest.raises(ValueError, match="dq_one_part needs split_scores"):
        ab.AttentionBwdConfig(head_dim=256, stages=1, dq_one_part=True)
    assert cfg_of(256, False, D256 + ("dq_one_part",)).name.endswith("_sps_dq1")


def test_dq_one_part_is_one_m64n128_gemm(built):
    """With split_scores the only m64n64 GEMMs are dQ's two parts (S^T and
    dP^T are n32, dV and dK n128); ``dq_one_part`` makes dQ one n128
    GEMM: no m64n64 wgmma left, and ptxas spills at most a few bytes."""
    _, ptx = built(False, D256 + ("dq_one_part",))
    _, base = built(False, D256)
    n64 = r"wgmma\.mma_async\.sync\.aligned\.m64n64k16"
    assert re.search(n64, base) and not re.search(n64, ptx)
    spills = spill_bytes(ptx)
    if spills is None:
        pytest.skip("ptxas not installed")
    assert spills <= 8, spills
