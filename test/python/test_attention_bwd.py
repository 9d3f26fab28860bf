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
        r"at [^ ]+ while consumer warp \d+ of CTA 0(, consumer warp \d+ of CTA 0)* still "
        r"holds it"),
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


def production(head_dim, causal=False):
    """The configuration the op runs for this head dim (its cache entry)."""
    return attention_configs.bwd_variant(head_dim, causal)[1]


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_the_kernel_checks_and_assembles(head_dim, causal):
    k = build(**production(head_dim, causal))
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


@pytest.mark.parametrize("cfg", [dict(), dict(head_dim=64, causal=True), production(256),
                                 production(256, causal=True)])
def test_the_kernel_simulates_clean(cfg):
    (report,) = build(**cfg).simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report


@pytest.mark.parametrize("config", ["d64", "d256", "d128_dqs"])
@pytest.mark.parametrize("mistake", sorted(CAUGHT))
def test_each_planted_mistake_is_rejected(mistake, config):
    """At d 64 (each consumer its own keys), d 256 (both consumers on the
    same keys, each its columns of the gradients) and d 128 with
    ``dq_split`` (its barrier over both consumers per step lets the
    epilogue race show in fewer of the simulator's schedules: at least
    one)."""
    from pipeline_mlir.compiler import CompileError

    who, pattern = CAUGHT[mistake]
    cfg = {"d64": production(64), "d256": production(256),
           "d128_dqs": dict(production(128), dq_split=True)}[config]
    k = build(mistake, **cfg)
    if who == "checker":
        with pytest.raises(CompileError) as err:
            k.to_ptx()
        assert re.search(pattern, str(err.value)), str(err.value)
    else:
        k.to_ptx()                       # statically clean: the simulator finds it
        (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
        if config == "d128_dqs":
            assert set(report.counts) == {who} and report.counts[who] >= 1, report
        else:
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
    # d 256: the host sizes its grid by 64-key blocks.
    k = build(**production(256, causal=True))
    meta = k.config.meta(k)
    assert meta["block_n"] == 64 and meta["threads"] == 384 and meta["head_dim"] == 256
    assert meta["smem"] == k.smem_bytes <= ab.SMEM_PER_BLOCK
    assert meta["layouts"]["dq"]["cols"] == 128 and meta["layouts"]["dkv"]["cols"] == 128


def test_the_variants_and_their_family():
    assert set(attention_configs.BWD_VARIANTS) == {
        "bwd_d64", "bwd_d64c", "bwd_d128", "bwd_d128c", "bwd_d256", "bwd_d256c",
        "bwd_prep_d64", "bwd_prep_d128", "bwd_prep_d256"}
    # d 64 and 128 keep their cache keys; d 256 runs one stage of Q and dO.
    assert attention_configs.BWD_VARIANTS["bwd_d128c"] == dict(head_dim=128, causal=True)
    assert attention_configs.BWD_VARIANTS["bwd_d256"] == dict(head_dim=256, causal=False,
                                                              stages=1)
    with pytest.raises(ValueError, match="head_dim must be one of"):
        attention_configs.bwd_variant(96, False)
    assert "attention_bwd" in kernel_cache.FAMILIES
    with pytest.raises(ValueError, match="head_dim must be one of"):
        ab.AttentionBwdConfig(head_dim=96)
    # Two stages of Q and dO do not fit next to d 256's K, V and dQ tiles.
    with pytest.raises(ValueError, match="bytes of shared memory"):
        ab.build(ab.AttentionBwdConfig(head_dim=256, stages=2))


def test_head_dim_256_splits_the_gradients_by_columns():
    """d 256: 64 keys per CTA, both consumer warpgroups on them, each the
    128 columns ``128 cw ..`` of dK, dV and dQ. The byte offsets its
    operands are read at are where TMA put those columns, its tiles'
    boxes are the host's tensor-map boxes, and its stores and reduce-adds
    land on its columns of the head (the same functions build the kernel's
    coordinates)."""
    cfg = ab.AttentionBwdConfig(**production(256))
    assert (cfg.block_n, cfg.column_parts, cfg.part_cols) == (64, 2, 128)
    kv, k_mn, q, q_mn = cfg.kv_layout(), cfg.k_mn_layout(), cfg.q_layout(), cfg.q_mn_layout()
    # Column 128 of K (dQ's B) and of Q and dO (dK's and dV's B): box 2 of
    # the tiles TMA loaded, 64 rows of 128 bytes per box.
    assert dict(kv.box_offsets())[128] == k_mn.mn_offset(128) == 2 * 64 * 128
    assert dict(q.box_offsets())[128] == q_mn.mn_offset(128) == 2 * 64 * 128
    # dK / dV of consumer cw overwrite exactly the K / V boxes of its columns.
    dkv = cfg.dkv_layout()
    assert dkv.bytes == dict(kv.box_offsets())[128] and dkv.box == kv.box == (64, 64)
    # dQ: a 64 x 128 fp32 tile in 32-column boxes, the host map's box.
    dq = cfg.dq_layout()
    assert (dq.rows, dq.cols, dq.box) == (64, 128, (64, 32))
    # Tensor coordinates: head 3 (K/V head 1), key block 5, consumer 1.
    assert [ab.dq_column(cfg, 3, 1, c) for c, _ in dq.box_offsets()] == [
        3 * 256 + 128 + c for c in (0, 32, 64, 96)]
    assert ab.dkv_row(cfg, 5, 1) == ab.dkv_row(cfg, 5, 0) == 5 * 64
    assert [ab.dkv_column(cfg, 1, 1, c) for c, _ in dkv.box_offsets()] == [384, 448]
    # d 128 is unchanged: each consumer its own 64 keys, every column.
    c128 = ab.AttentionBwdConfig(head_dim=128)
    assert (c128.block_n, c128.column_parts, c128.part_cols) == (128, 1, 128)
    assert ab.dkv_row(c128, 5, 1) == 5 * 128 + 64
    assert ab.dkv_column(c128, 1, 1, 64) == ab.dq_column(c128, 1, 1, 64) == 128 + 64


@pytest.mark.parametrize("causal", [False, True])
def test_dq_split_checks_simulates_and_halves_the_reduce(causal):
    """``dq_split`` (d 128): checker and simulator clean on the ragged GQA
    shape, and each warpgroup reduce-adds a 64 x 64 tile per step (two
    32-column boxes) where the default adds 64 x 128 (four): one dQ tile's
    traffic per CTA and query block instead of two; 16 KiB less shared
    memory (dQ tiles halve, dS tiles double)."""
    split = build(**production(128, causal), dq_split=True)
    plain = build(**production(128, causal))
    split.verify()
    assert len(split.compile()) > 0
    (report,) = split.simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report
    reduce = "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add"
    assert split.to_ptx().count(reduce) == 2 and plain.to_ptx().count(reduce) == 4
    # The barrier over both consumers' dS tiles (id 4), only with the split.
    assert re.search(r"bar\.sync\s+4, 256;", split.to_ptx())
    assert not re.search(r"bar\.sync\s+4, 256;", plain.to_ptx())
    assert plain.smem_bytes - split.smem_bytes == 16384
    assert split.config.name.endswith("_dqs") and "dqs" not in plain.config.name


def test_dq_split_coordinates():
    """Where ``dq_split``'s consumer ``cw`` reads and writes (the functions
    and layouts the kernel is built from): its B is K's column atom ``cw``
    (columns 64 cw.., where TMA put them), its A both consumers' dS^T tiles
    of the step's buffer, consumer 1's tile at K slice 4 (keys 64..), the
    same keys as K slice 4 of B; its dQ tile 64 x 64 fp32 in the host map's
    32-column boxes, reduce-added at columns 64 cw.. of the head."""
    cfg = ab.AttentionBwdConfig(head_dim=128, dq_split=True)
    kv, k_mn = cfg.kv_layout(), cfg.k_mn_layout()
    ds, ds_mn, dq = cfg.ds_layout(), cfg.ds_mn_layout(), cfg.dq_layout()
    assert (cfg.dq_cols, cfg.ds_buffers, ds_mn.rows, ds_mn.k_slices) == (64, 2, 128, 8)
    assert dict(kv.box_offsets())[64] == k_mn.mn_offset(64) == 128 * 128
    assert ds_mn.k_slice_offset(4) == ds.bytes == 64 * 128
    assert k_mn.k_slice_offset(4) == 64 * 128          # K's rows 64.. (keys 64..)
    # One buffer: both tiles, exactly the A's bytes; two buffers allocated.
    assert ds_mn.bytes == ab.CONSUMER_WARPGROUPS * ds.bytes
    assert (dq.rows, dq.cols, dq.box, dq.box_offsets()) == (64, 64, (64, 32),
                                                            [(0, 0), (32, 8192)])
    assert [ab.dq_column(cfg, 3, cw, c) for cw in (0, 1) for c in (0, 32)] == [
        384, 416, 448, 480]
    # dK and dV are not split: each consumer its 64 keys, every column.
    assert ab.dkv_row(cfg, 5, 1) == 5 * 128 + 64 and ab.dkv_column(cfg, 1, 1, 64) == 192
    plain = ab.AttentionBwdConfig(head_dim=128)
    assert ab.dq_column(plain, 3, 1, 96) == 3 * 128 + 96
    for d in (64, 256):
        with pytest.raises(ValueError, match="dq_split needs head_dim 128"):
            ab.AttentionBwdConfig(head_dim=d, dq_split=True)


def test_dq_split_is_a_cached_candidate():
    """In the kernel cache family (built for the GPU tests and the
    benchmark's --dq-split), not among the variants the op runs."""
    assert attention_configs.BWD_CANDIDATES == {
        "bwd_d128_dqs": dict(head_dim=128, causal=False, dq_split=True),
        "bwd_d128c_dqs": dict(head_dim=128, causal=True, dq_split=True)}
    assert not set(attention_configs.BWD_CANDIDATES) & set(attention_configs.BWD_VARIANTS)
    with pytest.raises(ValueError, match="dq_split is for head_dim 128"):
        attention_configs.bwd_variant(64, False, dq_split=True)


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_ptxas_spills_stay_small(head_dim):
    """ptxas -v on the production kernels (consumers at 240 registers):
    measured 20-24 bytes of spill stores at d 64 and 128 and 76-92 at
    d 256 (its S^T and dP^T walk 16 K slices); a change that pushes the
    consumers' registers over would show here as hundreds."""
    from test_gemm_epilogue import _ptxas_spills

    for causal in (False, True):
        spills = _ptxas_spills(build(**production(head_dim, causal)).to_ptx())
        assert spills is None or spills <= 128, (head_dim, causal, spills)
        if head_dim == 128:                        # and the dq_split candidate
            spills = _ptxas_spills(build(**production(128, causal), dq_split=True).to_ptx())
            assert spills is None or spills <= 128, ("dq_split", causal, spills)


@pytest.mark.parametrize("head_dim", [64, 128, 256])
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
