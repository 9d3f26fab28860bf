"""The attention backward's main kernel (pipeline_mlir/kernels/attention_bwd.py)
without a GPU: it builds, the protocol checker accepts it, the simulator runs
it to the end, ptxas assembles it, and each of four backward-specific
synchronization mistakes, planted by building the kernel with one stage
replaced by its wrong twin (_attention_bwd_mistakes.py), is rejected by the
checker or the simulator while its correct twin (the production kernel) is
not. Also the launch facts the host reads, the
variant table and the kernel cache family. (The op's tracing with fake
tensors: test_attention_autograd_trace.py.)
"""

import re

import pytest

from _attention_bwd_mistakes import STAGES_WITH, build_with_mistake
from pipeline_mlir.kernels import attention_bwd as ab
from pipeline_mlir.ops import attention_configs, kernel_cache

# batch 1, 2 query heads on 1 K/V head (GQA: each CTA walks both heads),
# ragged 200 query / 300 key rows (two key blocks, the last one partial).
SIM_ARGS = {"batch": 1, "heads": 2, "heads_kv": 1, "seqlen_q": 200, "seqlen_k": 300}
SCHEDULES = 3

# mistake -> (who rejects it, message pattern)
CAUGHT = {
    "do_released_before_dp_retired": (
        "checker",
        r"consumer_release hands back a stage of pipeline 'do' while WarpgroupMma.mma may "
        r"still read it asynchronously: its wgmma group is committed but not retired"),
    "dq_reduce_before_fence": (
        "checker",
        r"proxy fence: this TMA store reads shared memory through the async proxy that warps "
        r"4-11 wrote with ordinary stores"),
    "epilogue_races_last_mma": (
        "overwrite",
        r"consumer warp \d+ of CTA 0 writes pipeline 'kv' stage 0 of CTA 0 with llvm.store "
        r"at [^ ]+ while consumer warp \d+ of CTA 0 still holds it"),
    "lse_read_after_release": (
        "read-after-release",
        r"consumer warp \d+ of CTA 0 reads pipeline 'lse' stage \d of CTA 0 with llvm.load "
        r"at [^ ]+ while it does not hold the stage"),
}


def build(mistake=None, **cfg):
    config = ab.AttentionBwdConfig(**cfg)
    if mistake is None:
        return ab.build(config)
    return build_with_mistake(mistake, config)


def test_every_mistake_has_its_case():
    assert set(CAUGHT) == set(STAGES_WITH)


def test_the_kernel_holds_no_mistake():
    """The production build takes ``STAGES``; a mistake is only ever a
    stage the tests swap in, each differing from it in that one stage."""
    import dataclasses

    fields = [f.name for f in dataclasses.fields(ab.Stages)]
    for name, stages in STAGES_WITH.items():
        changed = [f for f in fields if getattr(stages, f) is not getattr(ab.STAGES, f)]
        assert len(changed) == 1, (name, changed)
        assert issubclass(getattr(stages, changed[0]), getattr(ab.STAGES, changed[0]))


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_the_kernel_checks_and_assembles(head_dim, causal):
    k = build(head_dim=head_dim, causal=causal)
    k.verify()
    image = k.compile()                 # the checker, then ptxas
    assert len(image) > 0
    ptx = k.to_ptx()
    # TMA loads, the fp32 reduce-add of dQ, register-A wgmma, TMA stores
    assert "cp.async.bulk.tensor.3d.shared::cluster.global" in ptx
    assert "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add" in ptx
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f32\.bf16\.bf16 \{", ptx)
    assert "cp.async.bulk.tensor.3d.global.shared::cta" in ptx
    assert k.smem_bytes <= ab.SMEM_PER_BLOCK


@pytest.mark.parametrize("cfg", [dict(), dict(head_dim=64, causal=True)])
def test_the_kernel_simulates_clean(cfg):
    (report,) = build(**cfg).simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report


@pytest.mark.parametrize("mistake", sorted(CAUGHT))
def test_each_planted_mistake_is_rejected(mistake):
    from pipeline_mlir.compiler import CompileError

    who, pattern = CAUGHT[mistake]
    k = build(mistake, head_dim=64)
    if who == "checker":
        with pytest.raises(CompileError) as err:
            k.to_ptx()
        assert re.search(pattern, str(err.value)), str(err.value)
    else:
        k.to_ptx()                       # statically clean: the simulator finds it
        (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
        assert report.counts == {who: SCHEDULES}, report
        (finding,) = report.findings
        assert re.search(pattern, finding.message), finding.message


def test_the_launch_facts_name_every_parameter():
    k = build(head_dim=128, causal=True)
    meta = k.config.meta(k)
    assert meta["params"] == ["q", "k", "v", "do", "lse_log2", "dpsum", "dq_accum", "dk",
                              "dv", "batch", "heads", "heads_kv", "seqlen_q", "seqlen_k",
                              "scale_log2", "scale"]
    assert meta["block_m"] == 64 and meta["block_n"] == 128 and meta["threads"] == 384
    assert meta["layouts"]["dq"]["dtype"] == "f32"
    assert meta["smem"] == k.smem_bytes


def test_the_variants_and_their_family():
    assert set(attention_configs.BWD_VARIANTS) == {"bwd_d64", "bwd_d64c", "bwd_d128",
                                                   "bwd_d128c", "bwd_prep_d64",
                                                   "bwd_prep_d128"}
    with pytest.raises(ValueError, match="head_dim must be one of"):
        attention_configs.bwd_variant(256, False)
    assert "attention_bwd" in kernel_cache.FAMILIES
    with pytest.raises(ValueError, match="head_dim must be 64 or 128"):
        ab.AttentionBwdConfig(head_dim=256)


@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_preprocess_builds_through_the_family(head_dim):
    """The family's builder makes the preprocess from its overrides: one
    pass of 16-byte loads over O and dO, a warp reduction, two stores."""
    from pipeline_mlir.kernels import attention_bwd_prep

    name, overrides = attention_configs.bwd_prep_variant(head_dim)
    image, meta = ab.build_variant(overrides, "bf16", "sm_90a")
    assert len(image) > 0 and meta["head_dim"] == head_dim
    assert meta["params"] == ["o", "do", "lse", "lse_log2", "dpsum", "rows", "heads",
                              "seqlen", "padded"]
    ptx = attention_bwd_prep.build(head_dim).to_ptx()
    assert "ld.global.v4" in ptx and "shfl.sync.bfly" in ptx
    assert ptx.count("st.global") == 2
    with pytest.raises(ValueError, match="overrides are kernel and head_dim"):
        ab.build_variant(dict(overrides, causal=True), "bf16", "sm_90a")
