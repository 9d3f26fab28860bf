"""The attention backward's main kernel (pipeline_mlir/kernels/attention_bwd/)
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
from pipeline_mlir.chip_limits import SMEM_PER_BLOCK
from pipeline_mlir.kernels import attention_bwd as ab
from pipeline_mlir.ops import attention_configs, kernel_cache
from pipeline_mlir.layout import OperandLayout
from _ptxas import report as _ptxas_notes

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
    # The checker's ring-access rule (check 16) refuses it before the
    # simulator's read-after-release finding would.
    "lse_read_after_release": (
        "checker",
        r"llvm.load touches a buffer of the ring that pipeline 'lse' fills \(its producer "
        r"addresses it from state.index\), while this role holds a stage of pipeline '\w+' "
        r"but none of pipeline 'lse'"),
}


def assert_caught(k, who, pattern):
    """``who`` ('checker' or a simulator finding's kind) catches the planted
    mistake in ``k``: the checker's error, or (the kernel statically clean)
    that kind in at least one schedule and nothing else, its first finding
    matching ``pattern``."""
    from pipeline_mlir.compiler import CompileError

    if who == "checker":
        with pytest.raises(CompileError) as err:
            k.to_ptx()
        assert re.search(pattern, str(err.value)), str(err.value)
        return
    k.to_ptx()
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
    assert set(report.counts) == {who} and report.counts[who] >= 1, report
    assert re.search(pattern, report.findings[0].message), report.findings[0].message


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


# The d 64 set of four (6% less backward time than the plain kernel on an
# H200, full and causal; the op's d 64 default until 128-query steps and
# then the reduce warp won): attention_configs.BWD_D64_OPTION_SETS.
D64_BEST = ("dq_store_spread", "dq_deferred", "min_ctas", "dq_double_buffer")
# And at d 128 (0.5-6.8% less on its four rows), with dQ split by columns
# (the d 128 default until the reduce warp won).
D128_BEST = ("dq_split", "dq_deferred", "dq_double_buffer", "min_ctas")
# d 64 with 128-query steps and dK issued after dQ (a candidate).
D64_M128_DKL = dict(block_m=128, dq_store_spread=True, min_ctas=True, dk_last=True)


def production(head_dim, causal=False):
    """The configuration the op runs for this head dim (its cache entry)."""
    return attention_configs.bwd_variant(head_dim, causal)[1]


def with_options(overrides, opts):
    """``overrides`` with the options ``opts`` of ``BWD_OPTIONS`` on."""
    out = dict(overrides)
    for o in opts:
        out.update(attention_configs.BWD_OPTION_OVERRIDES.get(o, {o: True}))
    return out


def dq_split_candidate(causal=False):
    """The d 128 dq_split candidate's configuration (its cache entry)."""
    return attention_configs.bwd_variant(128, causal, dq_split=True)[1]


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
    assert k.smem_bytes <= SMEM_PER_BLOCK


@pytest.mark.parametrize("cfg", [production(128), dict(head_dim=64, causal=True),
                                 production(256), production(256, causal=True)])
def test_the_kernel_simulates_clean(cfg):
    (report,) = build(**cfg).simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report


@pytest.mark.parametrize("config", ["d64", "d256", "d128_dqs", "d64_dqd_dqb",
                                    "d128_split_dqd_dqb", "d64_m128_dkl"])
@pytest.mark.parametrize("mistake", sorted(CAUGHT))
def test_each_planted_mistake_is_rejected(mistake, config):
    """At d 64 (each consumer its own keys), d 256 (both consumers on the
    same keys, each its columns of the gradients), d 128 with
    ``dq_split`` (its barrier over both consumers per step lets the
    epilogue race show in fewer of the simulator's schedules: at least
    one) and the d 64 and d 128 candidates measured fastest (dQ's last
    part stored a step later, two dQ tiles, the launch bound; at d 128 with
    dQ split by columns)."""
    from pipeline_mlir.compiler import CompileError

    who, pattern = CAUGHT[mistake]
    cfg = {"d64": production(64), "d256": production(256),
           "d128_dqs": dq_split_candidate(),
           "d64_dqd_dqb": dict(production(64), **{o: True for o in D64_BEST}),
           "d128_split_dqd_dqb": dict(production(128), **{o: True for o in D128_BEST}),
           "d64_m128_dkl": dict(production(64), **D64_M128_DKL)}[config]
    k = build(mistake, **cfg)
    if who == "checker":
        with pytest.raises(CompileError) as err:
            k.to_ptx()
        assert re.search(pattern, str(err.value)), str(err.value)
    else:
        k.to_ptx()                       # statically clean: the simulator finds it
        (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
        if config in ("d128_dqs", "d128_split_dqd_dqb", "d64_m128_dkl"):
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
    assert meta["smem"] == k.smem_bytes <= SMEM_PER_BLOCK
    assert meta["layouts"]["dq"]["cols"] == 128 and meta["layouts"]["dkv"]["cols"] == 128


def test_the_variants_and_their_family():
    assert set(attention_configs.BWD_VARIANTS) == {
        "bwd_d64", "bwd_d64c", "bwd_d128", "bwd_d128c", "bwd_d256", "bwd_d256c",
        "bwd_prep_d64", "bwd_prep_d128", "bwd_prep_d256",
        "bwd_prepw_d64", "bwd_prepw_d128", "bwd_prepw_d256",
        "bwd_dq_convert_d64", "bwd_dq_convert_d128",
        # d 128 full's 80-query default un-permutes the transposed order
        "bwd_dq_convert_d128_m80"}
    # d 64 keeps its cache key; d 128 and 256 store the dQ tile spread
    # (measured faster), and d 256 runs one stage of Q and dO.
    assert attention_configs.BWD_VARIANTS["bwd_d64c"] == dict(head_dim=64, causal=True)
    assert attention_configs.BWD_VARIANTS["bwd_d128c"] == dict(head_dim=128, causal=True,
                                                               dq_store_spread=True)
    assert attention_configs.BWD_VARIANTS["bwd_d256"] == dict(head_dim=256, causal=False,
                                                              stages=1, dq_store_spread=True)
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
    split = build(**dq_split_candidate(causal))
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
    cands = attention_configs.BWD_CANDIDATES
    assert {n: o for n, o in cands.items() if "dqs" in n} == {
        "bwd_d128_dqs": dict(head_dim=128, causal=False, dq_split=True),
        "bwd_d128c_dqs": dict(head_dim=128, causal=True, dq_split=True)}
    assert not set(cands) & set(attention_configs.BWD_VARIANTS)
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
            spills = _ptxas_spills(build(**dq_split_candidate(causal)).to_ptx())
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


# -- the dQ path's options (candidates, off by default) ---------------------------

OPTION_SETS = attention_configs.BWD_OPTION_SETS


def test_option_candidates_are_cached_and_named():
    """Every head dim and mask, each option set of ``BWD_OPTION_SETS``: in
    the kernel cache family (the GPU tests and run_attention_bwd.py
    --options run them), its overrides the production ones plus the
    options, named with their tags; not what the op runs; unknown names
    refused."""
    cands = attention_configs.BWD_CANDIDATES
    for d in (64, 128, 256):
        for opts in attention_configs.bwd_option_sets(d):
            for causal in (False, True):
                name, over = attention_configs.bwd_variant(d, causal, options=opts)
                assert cands[name] == with_options(production(d, causal), opts)
                tags = "".join("_" + tag for o, tag in attention_configs.BWD_OPTIONS.items()
                               if o in opts)
                assert name == f"bwd_d{d}{'c' if causal else ''}" + tags
                cfg_name = ab.AttentionBwdConfig(**over).name
                # The kernel's own name tags dq_split "dqs" (the variant "split":
                # "bwd_d128_dqs" is the candidate without the spread stores).
                # 128- and 80-query steps show as the tile, "128x128", "128x80".
                kernel_tags = dict(attention_configs.BWD_OPTIONS, dq_split="dqs",
                                   block_m128="128x128", block_m80="128x80")
                assert all(f"_{kernel_tags[o]}" in cfg_name for o in opts)
    assert not set(cands) & set(attention_configs.BWD_VARIANTS)
    with pytest.raises(ValueError, match="unknown options"):
        attention_configs.bwd_variant(128, False, options=("dq_fast",))


def test_the_ops_default_options_are_measured_candidates_in_the_cache():
    """What the op's backward runs at each head dim (BWD_DEFAULT_OPTIONS)
    is one of that head dim's candidate sets, or none: a variant the kernel
    cache builds (a GPU host without MLIR reads it from there) and the GPU
    tests check against fp32."""
    cached = {**attention_configs.BWD_VARIANTS, **attention_configs.BWD_CANDIDATES}
    assert set(attention_configs.BWD_DEFAULT_OPTIONS) == set(attention_configs.BWD_HEAD_DIMS)
    assert set(attention_configs.BWD_FULL_OPTIONS) <= set(attention_configs.BWD_HEAD_DIMS)
    for d in attention_configs.BWD_HEAD_DIMS:
        for causal in (False, True):
            opts = attention_configs.bwd_default_options(d, causal)
            assert not opts or set(opts) in [set(o) for o in attention_configs.bwd_option_sets(d)]
            name, over = attention_configs.bwd_variant(d, causal, options=opts)
            assert cached[name] == over


def test_the_defaults_hand_dq_to_the_reduce_warp_where_it_won():
    """d 64 runs its set with the reduce warp (one dQ tile, the last part
    deferred), d 128 dQ split by columns with the reduce warp and LSE and
    dPsum on Q's and dO's stages, d 256 the score GEMMs split by queries
    with the reduce warp and LSE and dPsum on Q's and dO's stages, each on
    both masks (measured faster on every row of its head dim); d 64 full
    attention its own set, FA4's d 64 tile with LSE and dPsum on Q's and
    dO's stages (faster on the full row in two passes, slower causal), the
    shuffles' source lanes as immediates and dQ in the accumulator's order;
    d 128 full attention the head dim's set in FA4's order at 80-query
    steps with dQ^T in the accumulator's order (block_m80, dq_acc_order,
    its postprocess kernel: faster on both full rows in two passes);
    causal its own sets: the key blocks longest first (lpt_order) on the
    d 128 and d 256 sets, at d 128 in FA4's order too (dk_last,
    ds_one_barrier), and at d 64 FA4's tile with the rows on the tiles'
    stages, P^T packed early, lpt_order and LSE and dPsum shuffled by
    immediate source lanes (each faster causal in two passes)."""
    pick = attention_configs.bwd_default_options
    assert attention_configs.BWD_FULL_OPTIONS == {
        64: ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier", "stat_shuffle",
             "stats_with_tiles", "shuffle_imm", "dq_acc_order"),
        128: ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles", "dk_last",
              "ds_one_barrier", "block_m80", "dq_acc_order")}
    for d in attention_configs.BWD_HEAD_DIMS:
        assert pick(d, True) == attention_configs.BWD_CAUSAL_OPTIONS.get(
            d, attention_configs.BWD_DEFAULT_OPTIONS[d])
        assert pick(d, False) == attention_configs.BWD_FULL_OPTIONS.get(
            d, attention_configs.BWD_DEFAULT_OPTIONS[d])
    assert pick(64, True) == ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                              "stat_shuffle", "stats_with_tiles", "p_packed", "lpt_order",
                              "shuffle_imm")
    assert pick(128, False) == ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                                "dk_last", "ds_one_barrier", "block_m80", "dq_acc_order")
    assert pick(128, True) == attention_configs.BWD_DEFAULT_OPTIONS[128] + (
        "lpt_order", "dk_last", "ds_one_barrier")
    assert pick(256, False) == ("split_scores", "dq_reduce_warp", "stats_with_tiles")
    assert pick(256, True) == pick(256, False) + ("lpt_order",)


@pytest.mark.parametrize("cols", [64, 128])
@pytest.mark.parametrize("spread", [False, True])
def test_dq_tile_stores_land_right_and_spread_removes_the_bank_conflict(cols, spread):
    """``f32_pair_offset`` (what ``store_fragment_f32`` emits, on ints):
    every element of an m64 x ``cols`` fp32 fragment is stored exactly once,
    where the 128-byte swizzle that TMA reads puts it; and per store
    instruction each half-warp (the unit of a 64-bit store) needs as many
    shared-memory wavefronts as its busiest bank has words: 2 by default
    (rows 2i and 2i + 1 on the same chunks), 1 with ``spread``."""
    layout = OperandLayout("f32", "K", 128, 64, cols)
    seen = {}
    for j in range(cols // 8):
        for half in range(2):
            for warp in range(4):
                banks = [[], []]                    # per half-warp: 4-byte banks
                for lane in range(32):
                    quad, pair = lane // 4, lane % 4
                    r = warp * 16 + quad + 8 * half
                    box, off = ab.f32_pair_offset(layout, r, pair, j, spread)
                    src = j ^ 2 if spread and r % 2 else j
                    col = 8 * src + 2 * pair
                    want_box, in_box = divmod(col, layout.box_cols)
                    assert (box, off) == (want_box, layout.swizzled_offset(r, in_box * 4))
                    for e in range(2):
                        key = (r, col + e)
                        assert key not in seen, key
                        seen[key] = box * layout.box_bytes + off + 4 * e
                        banks[lane // 16].append((off // 4 + e) % 32)
                worst = max(max(b.count(x) for x in set(b)) for b in banks)
                assert worst == (1 if spread else 2), (j, half, warp, worst)
    assert len(seen) == 64 * cols == len(set(seen.values()))


@pytest.mark.parametrize("opts", OPTION_SETS, ids="+".join)
@pytest.mark.parametrize("head_dim,causal", [(128, False), (64, True), (256, True)])
def test_option_candidates_check_and_simulate_clean(opts, head_dim, causal):
    """Each option set, each head dim: the checker accepts it (its Q and
    dO stages go back after the first dQ part's wait, which with
    ``dq_overlap`` leaves that part running, except at d 256) and the
    simulator runs it clean on the ragged GQA shape; the PTX shows what
    changed: the overlapped waits leave one group pending, the spread
    stores select."""
    want = with_options(production(head_dim, causal), opts)
    k = build(**want)
    k.verify()
    assert len(k.compile()) > 0
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report
    ptx = k.to_ptx()
    plain = build(**dict(production(head_dim, causal), dq_store_spread=False)).to_ptx()
    pending1 = r"wgmma\.wait_group\.sync\.aligned\s+1;"
    cfg = k.config
    # One wait_group(1) per dQ part; the first a full wait where Q and dO
    # have one stage, as K and V (GradGemms.wait_dkv).
    extra = cfg.dq_cols // ab.DQ_CHUNK - (cfg.stages == 1) if "dq_overlap" in opts else 0
    assert len(re.findall(pending1, ptx)) == len(re.findall(pending1, plain)) + extra
    # One select per dQ value a thread stores (64 x dq_cols over 128 threads);
    # dq_deferred stores its last part in the loop and once more after it.
    stored = cfg.dq_cols + (ab.DQ_CHUNK if cfg.dq_deferred else 0)
    selects = stored // 2 if cfg.dq_store_spread else 0
    assert ptx.count("selp.f32") - plain.count("selp.f32") == selects
    assert k.config == ab.AttentionBwdConfig(**want)


def test_dq_overlap_release_before_dkv_retired_is_rejected():
    """The wrong twin of ``dq_overlap``'s first wait (none: Q and dO go
    back while the dV and dK GEMMs that read them may still run) is
    rejected by the checker; the production order is the correct twin."""
    import dataclasses

    from pipeline_mlir.compiler import CompileError

    class NoWaitForDkv(ab.GradGemms):
        def wait_dkv(self):
            pass                                  # wrong: dV and dK may still read Q, dO

    stages = dataclasses.replace(ab.STAGES, grads=NoWaitForDkv)
    cfg = ab.AttentionBwdConfig(**production(128), dq_overlap=True)
    with pytest.raises(CompileError) as err:
        ab.build(cfg, stages=stages).to_ptx()
    assert re.search(r"consumer_release hands back a stage of pipeline '(do|q)' while "
                     r"WarpgroupMma\.mma(_rs)? may still read it", str(err.value)), str(err.value)
    ab.build(cfg).to_ptx()


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_option_candidates_spill_little(head_dim):
    """ptxas -v on the candidates with both options: dQ's parts in flight
    together hold one more 64 x 64 accumulator (32 registers) while dV and
    dK retire; measured 24/68 (d 64), 20/84 (d 128) and 84/100 (d 256)
    bytes of spill stores, full/causal, the production kernels' or 8 more."""
    from test_gemm_epilogue import _ptxas_spills

    for causal in (False, True):
        spills = _ptxas_spills(build(**dict(production(head_dim, causal), dq_overlap=True,
                                            dq_store_spread=True)).to_ptx())
        assert spills is None or spills <= 128, (head_dim, causal, spills)


def test_dq_store_spread_is_the_default_at_128_and_256():
    """Measured faster on every d 128 and d 256 row of the H200 A/B, not
    on every d 64 row: the op's configurations (and their cache entries)
    store the dQ tile spread at d 128 and 256 only; the dq_split candidate
    stays as it was measured."""
    for d, on in ((64, False), (128, True), (256, True)):
        for causal in (False, True):
            assert production(d, causal).get("dq_store_spread", False) is on
            name = attention_configs.bwd_variant(d, causal)[0]
            assert attention_configs.BWD_VARIANTS[name] == production(d, causal)
    assert "dq_store_spread" not in attention_configs.bwd_variant(128, False, dq_split=True)[1]


# -- dq_deferred, min_ctas, dq_double_buffer (candidates, off by default) ----------


@pytest.mark.parametrize("causal", [False, True])
def test_min_ctas_makes_ptxas_honour_setmaxnreg_at_d64(causal):
    """Without ``.minnctapersm`` ptxas cannot tell the d 64 kernel's
    register count at entry and drops its ``setmaxnreg`` (note C7508: the
    consumers keep 168 registers and spill); ``min_ctas`` declares one CTA
    per SM and the consumers get their 240, spill-free."""
    from test_gemm_epilogue import _ptxas_spills

    plain = build(**production(64, causal)).to_ptx()
    bound = build(**dict(production(64, causal), min_ctas=True)).to_ptx()
    assert ".minnctapersm 1" in bound and ".minnctapersm" not in plain
    notes = _ptxas_notes(plain)
    if notes is None:
        pytest.skip("no ptxas")
    assert "'setmaxnreg' ignored" in notes
    assert "'setmaxnreg' ignored" not in _ptxas_notes(bound)
    assert _ptxas_spills(bound) == 0


def test_dq_deferred_stores_the_last_part_a_step_later():
    """``dq_deferred``: the last dQ part's store and reduce-add are emitted
    in the loop (for the step before, after S^T is issued) and once after
    it (the last step's): twice the reduce-adds of the default in the
    PTX, and the first wait of the dQ parts a full one. Not with
    ``dq_overlap``."""
    for d in (64, 128):
        plain = build(**production(d)).to_ptx()
        ptx = build(**dict(production(d), dq_deferred=True, min_ctas=True)).to_ptx()
        red = "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add"
        assert ptx.count(red) == 2 * plain.count(red) > 0, d
    with pytest.raises(ValueError, match="not with dq_overlap"):
        ab.AttentionBwdConfig(dq_deferred=True, dq_overlap=True)


@pytest.mark.parametrize("head_dim", [128, 256])
def test_dq_deferred_spills_stay_bounded(head_dim):
    """ptxas -v: at d 128 and 256 the carried dQ part (32 registers) next
    to dK, dV and S^T's accumulator costs spills: measured 92-96 bytes at
    d 128 and 184-200 at d 256 (176 and 192-208 with ``min_ctas``),
    against 20-84 and 76-92 for the production kernels; d 64 none with
    ``min_ctas``. A reordering that held dP^T too would show as 600+."""
    from test_gemm_epilogue import _ptxas_spills

    for causal in (False, True):
        spills = _ptxas_spills(build(**dict(production(head_dim, causal), dq_deferred=True,
                                            min_ctas=True)).to_ptx())
        assert spills is None or spills <= 256, (head_dim, causal, spills)


D64_SETS = attention_configs.BWD_D64_OPTION_SETS
# (80-query steps: test_attention_bwd_m80.py.)
D128_SETS = tuple(o for o in attention_configs.BWD_D128_OPTION_SETS if "block_m80" not in o)


@pytest.mark.parametrize("head_dim,opts",
                         [(64, o) for o in D64_SETS] + [(128, o) for o in D128_SETS],
                         ids=lambda x: "+".join(x) if isinstance(x, tuple) else f"d{x}")
def test_head_dim_option_sets_check_and_simulate_clean(head_dim, opts):
    """The sets of one head dim (two dQ tiles per warpgroup at d 64, and at
    d 128 with dQ split by columns): checked and simulated clean (ragged
    GQA, causal), with two tiles the leader's wait leaves one reduce-add
    reading (``wait_group.read 1``) for one tile's more shared memory;
    refused where it would not fit."""
    want = with_options(production(head_dim, True), opts)
    k = build(**want)
    k.verify()
    assert len(k.compile()) > 0
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report
    ptx = k.to_ptx()
    cfg = k.config
    assert cfg.smem_bytes() <= SMEM_PER_BLOCK
    if "dq_double_buffer" in opts:
        assert re.search(r"cp\.async\.bulk\.wait_group\.read\s+1;", ptx)
        single = ab.AttentionBwdConfig(**dict(want, dq_double_buffer=False))
        assert cfg.smem_bytes() - single.smem_bytes() == 2 * cfg.dq_layout().bytes
    with pytest.raises(ValueError, match="dq_double_buffer at head_dim 128"):
        ab.AttentionBwdConfig(head_dim=128, dq_double_buffer=True)


@pytest.mark.parametrize("causal", [False, True])
def test_block_m128_checks_simulates_and_reduces_one_tile_per_consumer(causal):
    """128-query steps at d 64 (``block_m`` 128): checker and simulator
    clean on the ragged GQA shape, with and without ``dk_last``; each
    consumer reduce-adds one 64 x 64 tile per step (its query rows: two
    32-column boxes), after the barrier over both consumers' dS^T tiles
    (id 4); S^T and dP^T are m64n128 GEMMs; ptxas spills stay bounded
    (measured 84-172 bytes: loop-invariant addresses reloaded from L1)."""
    from test_gemm_epilogue import _ptxas_spills

    for extra in (dict(), dict(dk_last=True)):
        want = dict(production(64, causal), block_m=128, dq_store_spread=True, min_ctas=True,
                    **extra)
        k = build(**want)
        k.verify()
        assert len(k.compile()) > 0
        (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
        assert report.ok and report.schedules == SCHEDULES, report
        ptx = k.to_ptx()
        reduce = "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add"
        assert ptx.count(reduce) == 2
        assert re.search(r"bar\.sync\s+4, 256;", ptx)
        assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.bf16\.bf16", ptx)
        assert k.smem_bytes <= SMEM_PER_BLOCK
        assert "_128x128_" in k.config.name
        spills = _ptxas_spills(ptx)
        assert spills is None or spills <= 256, (extra, spills)


def test_block_m128_layouts_and_coordinates():
    """Where 128-query steps put and read things (the layouts and functions
    the kernel is built from): Q and dO tiles of 128 rows (the host's TMA
    box), LSE and dPsum rows of 512 bytes; a consumer writes box ``j``
    (queries 64 j..) of its 64 x 128 dS^T tile at its rows (keys 64 cw..)
    of box ``j`` of the buffer's 128 x 128 set, which is, byte for byte,
    the MN-major A that consumer ``j``'s dQ GEMM reads (its 64 queries,
    all 128 keys: K slice 4 starts at consumer 1's keys); dQ rows 64 cw..
    of the query block, 64 x 64 fp32 tiles in the host's 32-column boxes."""
    cfg = ab.AttentionBwdConfig(head_dim=64, block_m=128)
    assert (cfg.dq_rows, cfg.shared_ds, cfg.ds_buffers, cfg.row_bytes) == (True, True, 2, 512)
    assert cfg.q_layout().box == (128, 64) and cfg.q_mn_layout().k_slices == 8
    ds, ds_set, ds_mn, dq = cfg.ds_layout(), cfg.ds_set_layout(), cfg.ds_mn_layout(), \
        cfg.dq_layout()
    assert (ds.rows, ds.cols, ds.boxes) == (64, 128, 2)
    assert (ds_set.rows, ds_set.cols, ds_mn.rows, ds_mn.cols) == (128, 128, 128, 128)
    assert ds_mn.k_slices == 8 and ds_mn.k_slice_offset(4) == ds_set.mn_offset(64) == 8192
    for j in range(2):                          # query box j: consumer j's dQ A
        assert j * ds_set.box_bytes == ds_mn.mn_offset(64 * j)
        for cw in range(2):
            for r in range(64):                 # key 64 cw + r, its row of the tile
                for col_byte in range(0, 128, 16):
                    written = (j * ds_set.box_bytes + cw * ds_set.mn_offset(64)
                               + ds.swizzled_offset(r, col_byte))
                    read = ds_mn.mn_offset(64 * j) + ds_mn.swizzled_offset(64 * cw + r,
                                                                           col_byte)
                    assert written == read
    assert (dq.rows, dq.cols, dq.box) == (64, 64, (64, 32))
    assert [ab.dq_row(cfg, 3, cw) for cw in (0, 1)] == [384, 448]
    assert ab.dq_column(cfg, 5, 1, 32) == 5 * 64 + 32
    assert ab.dq_row(ab.AttentionBwdConfig(head_dim=64), 3, 1) == 192
    assert cfg.name == "attn_bwd_d64_128x128_s2"
    for bad in (dict(head_dim=128), dict(head_dim=256), dict(head_dim=128, dq_split=True),
                dict(head_dim=64, block_m=96)):
        with pytest.raises(ValueError, match="block_m"):
            ab.AttentionBwdConfig(**dict(dict(block_m=128), **bad))
    with pytest.raises(ValueError, match="dq_double_buffer at head_dim 64"):
        ab.AttentionBwdConfig(head_dim=64, block_m=128, dq_double_buffer=True)


def test_dk_last_is_refused_where_dq_has_parts():
    """``dk_last`` (dK issued after dQ) needs one dQ part per step: d 64,
    or d 128 with dq_split; not with the deferred or overlapped dQ."""
    for ok in (dict(head_dim=64), dict(head_dim=64, block_m=128),
               dict(head_dim=128, dq_split=True)):
        assert ab.AttentionBwdConfig(dk_last=True, **ok).name.endswith("_dkl")
    for bad in (dict(head_dim=128), dict(head_dim=256, stages=1),
                dict(head_dim=64, dq_deferred=True), dict(head_dim=64, dq_overlap=True)):
        with pytest.raises(ValueError, match="dk_last needs one dQ part"):
            ab.AttentionBwdConfig(dk_last=True, **bad)


@pytest.mark.parametrize("head_dim,causal", [(64, True), (128, False), (256, True)])
def test_pingpong_checks_simulates_and_takes_turns(head_dim, causal):
    """``pingpong``: the consumers' S^T and dP^T GEMMs in turn, on barrier
    ids 5 and 6 over both consumers (each syncs on its own id, arrives on
    the other's; warpgroup 1's start signal); checked and simulated clean
    (the last turn's arrive is a start signal's, left pending by design);
    refused where dQ reads both consumers' dS^T tiles."""
    k = build(**dict(production(head_dim, causal), pingpong=True))
    k.verify()
    assert len(k.compile()) > 0
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report
    ptx = k.to_ptx()
    assert re.search(r"bar\.sync\s+%r\d+, 256;|bar\.sync\s+[56], 256;", ptx)
    assert re.search(r"bar\.arrive\s+(%r\d+|[56]), 256;", ptx)
    assert k.config.name.endswith("_pp")
    plain = build(**production(head_dim, causal)).to_ptx()
    assert not re.search(r"bar\.arrive\s+(%r\d+|[56]), 256;", plain)
    for shared in (dict(head_dim=128, dq_split=True), dict(head_dim=64, block_m=128)):
        with pytest.raises(ValueError, match="pingpong needs"):
            ab.AttentionBwdConfig(pingpong=True, **shared)


@pytest.mark.parametrize("causal", [False, True])
def test_the_128_query_mask_keeps_what_the_sums_keep(causal):
    """``SoftmaxGrad.keep_by_offsets`` (128-query steps: one compare of two
    per-step values per element) keeps exactly the elements the per-column
    sums of ``mask`` keep, ``key0 + r < seqlen_k`` and ``key0 + r <= col0 +
    c + offset``, on integers around both edges and negative offsets (more
    queries than keys)."""
    import random
    from types import SimpleNamespace

    rng = random.Random(0)
    me = SimpleNamespace(cfg=SimpleNamespace(causal=causal))
    for _ in range(300):
        key0, col0 = rng.randrange(0, 600), rng.randrange(0, 600)
        seqlen_k, offset = rng.randrange(1, 700), rng.randrange(-300, 300)
        keep = ab.SoftmaxGrad.keep_by_offsets(me, key0, col0, seqlen_k, offset)
        for r in (0, 8):
            for c in range(128):
                want = key0 + r < seqlen_k and (not causal or key0 + r <= col0 + c + offset)
                assert bool(keep(r, c)) == want, (key0, col0, seqlen_k, offset, r, c)
