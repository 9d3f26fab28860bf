"""The attention forward's GQA packing (``AttentionConfig.pack_gqa``), its
two-CTAs-per-SM configurations (``ctas_per_sm``: one consumer warpgroup,
64-row tiles; the benchmark's "short" candidates) and the shape-aware pick
among the configurations (``attention_configs.pick``), without a GPU: the
builds pass the protocol checker and the simulator, ptxas compiles them
without spills (and within half the register file where two CTAs share an
SM), the packed kernel loads Q as one 4-D box per column block, the
features off leave the kernel as it was, and the pick over a grid of shapes
returns a configuration of its table by its rules. Their outputs are
checked against fp32 attention on a GPU host
(benchmarks/attention/run_attention_grid.py)."""

import importlib.util
import math
import os
import re
import sys
from types import SimpleNamespace

import pytest

from _example_checks import EXAMPLES_DIR, protocol_warnings, simulate, verify_protocol
from test_gemm_epilogue import _ptxas_spills

from pipeline_mlir.kernels import attention_fwd
from pipeline_mlir.kernels.attention_fwd import AttentionConfig
from pipeline_mlir.ops import attention_configs as configs
from pipeline_mlir.ops.attention_fwd_host import AttentionFwd
from _ptxas import registers as _ptxas_registers

if EXAMPLES_DIR not in sys.path:
    sys.path.insert(0, EXAMPLES_DIR)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
    "attention_bench_variants", os.path.join(REPO, "benchmarks", "attention", "variants.py"))
bench_variants = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_variants)
SHORT = bench_variants.SHORT

# Every configuration beyond the head dims' plain ones: the table's packed
# and shape-specific ones, and the benchmark's extra candidates.
NEW = {**{n: o for n, o in configs.VARIANTS.items() if n not in
          {configs.variant(d, c)[0] for d in configs.HEAD_DIMS for c in (False, True)}},
       **bench_variants.grid_extra()}


def ir(**cfg):
    return str(attention_fwd.build(AttentionConfig(**cfg)).module)


def q_loads(text):
    """Coordinate counts of the TMA loads into pipeline 'q' (the first
    pipeline the producer fills: %arg0 is Q's tensor map)."""
    return [len(m.split(",")) for m in re.findall(r"pipeline\.copy\.tma_load [^\n]*?%arg0\[([^\]]*)\]",
                                                 text)]


def kv_loads(text):
    return [len(m.split(",")) for m in re.findall(
        r"pipeline\.copy\.tma_load [^\n]*?%arg[12]\[([^\]]*)\]", text)]


@pytest.mark.parametrize("cfg", [dict(), dict(head_dim=64, causal=True, consumer_warpgroups=3,
                                              consumer_registers=160, l2_sections=True),
                                 dict(head_dim=256, causal=True)])
def test_features_off_leave_the_kernel_as_it_was(cfg):
    """pack_gqa=0 and ctas_per_sm=1 are the defaults: the same module and
    name, no .minnctapersm, 3-D loads only."""
    plain = ir(**cfg)
    assert ir(**cfg, pack_gqa=0, ctas_per_sm=1) == plain
    assert "_gqa" not in AttentionConfig(**cfg).name and "nvvm.minctasm" not in plain
    assert set(q_loads(plain)) == {3} and set(kv_loads(plain)) == {3}


@pytest.mark.parametrize("group", configs.GROUPS)
def test_packed_q_is_one_4d_box_per_column_block_and_kv_stay_3d(group):
    cfg = AttentionConfig(pack_gqa=group)
    text = ir(pack_gqa=group)
    assert q_loads(text) == [4] * len(list(cfg.q_layout().box_offsets()))
    assert set(kv_loads(text)) == {3}
    assert cfg.tile_positions * group == cfg.block_m
    assert cfg.name.endswith(f"_gqa{group}")


CHECKED = [dict(head_dim=128, pack_gqa=8),
           dict(head_dim=128, causal=True, pack_gqa=4),
           dict(head_dim=64, causal=True, pack_gqa=2, consumer_warpgroups=3,
                consumer_registers=160, l2_sections=True),
           dict(head_dim=64, causal=True, consumer_warpgroups=2, pack_gqa=4),
           dict(head_dim=128, causal=True, block_n=64, pack_gqa=2),
           dict(SHORT[128], head_dim=128, causal=True),
           dict(SHORT[64], head_dim=64, causal=False, pack_gqa=8)]


@pytest.mark.parametrize("cfg", CHECKED, ids=lambda c: AttentionConfig(**c).name)
def test_new_configurations_check_and_simulate_clean(cfg):
    """Checker clean, and the simulator runs every warp to the end on a
    ragged GQA shape: 2 K/V heads of the configuration's group (2 when
    unpacked), 200 queries, 300 keys."""
    text = ir(**cfg)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    group = cfg.get("pack_gqa", 0) or 2
    args = {5: 1, 6: 2 * group, 7: 2, 8: 200, 9: 300}
    (report,) = simulate(text, schedules=2, args=args).values()
    assert report.ok and report.schedules == 2, report


@pytest.mark.parametrize("name", sorted(NEW))
def test_new_variants_compile_without_spills(name):
    """ptxas on every new configuration: no spill stores (the plain kernels
    have none either), and the two-CTA ones fit two per SM (entry registers
    <= 65536 / (2 x threads), shared memory <= half an SM)."""
    cfg = AttentionConfig(**NEW[name])
    k = attention_fwd.build(cfg)
    ptx = k.to_ptx()
    spills = _ptxas_spills(ptx)
    assert spills in (None, 0), f"{name}: {spills} bytes of spill stores"
    if cfg.ctas_per_sm == 2:
        assert ".minnctapersm 2" in ptx
        assert 2 * (cfg.smem_bytes() + 1024) <= attention_fwd.SMEM_PER_SM
        registers = _ptxas_registers(ptx)
        assert registers is None or registers * cfg.threads * 2 <= 65536, registers


def test_configurations_that_cannot_be_built_are_refused():
    with pytest.raises(ValueError, match="pack_gqa must be 0 or one of"):
        AttentionConfig(pack_gqa=3)
    with pytest.raises(ValueError, match="pack_gqa stores O from registers"):
        AttentionConfig(pack_gqa=4, tma_store=True)
    with pytest.raises(ValueError, match="ctas_per_sm must be 1 or 2"):
        AttentionConfig(ctas_per_sm=3)
    # Two 384-thread CTAs of 240-register consumers do not fit one SM.
    with pytest.raises(ValueError, match="register budget"):
        attention_fwd.build(AttentionConfig(ctas_per_sm=2))


def test_the_host_counts_packed_units_over_kv_heads():
    host = SimpleNamespace(meta={"block_m": 128, "pack_gqa": 8})
    # 32 query heads on 4 K/V heads, 1000 queries: 16 positions per tile.
    assert AttentionFwd.units(host, 2, 32, 1000, 4) == 2 * 4 * math.ceil(1000 / 16)
    host.meta["pack_gqa"] = 0
    assert AttentionFwd.units(host, 2, 32, 1000, 4) == 2 * 32 * math.ceil(1000 / 128)


GRID = [(d, causal, b, h, hk, sq, sk)
        for d in configs.HEAD_DIMS for causal in (False, True)
        for b in (1, 2, 8, 16) for h, hk in ((16, 16), (32, 8), (32, 4), (16, 2), (12, 4),
                                             (8, 1), (6, 3), (64, 4))
        for sq, sk in ((128, 128), (300, 300), (512, 512), (1000, 1000), (2048, 2048),
                       (4096, 4096), (8192, 8192), (32768, 32768), (512, 8192), (1, 4096),
                       (3000, 3000))]


def test_the_pick_returns_a_configuration_of_its_table_by_its_rules():
    sms = 132
    names = set()
    for d, causal, b, h, hk, sq, sk in GRID:
        name, over = configs.pick(d, causal, b, h, hk, sq, sk, sms=sms)
        names.add(name)
        assert configs.VARIANTS[name] == over, name
        cfg = AttentionConfig(**over)
        assert cfg.head_dim == d and cfg.causal == causal
        group = h // hk
        # Packing: exactly the groups the kernel packs (else one head per tile).
        assert cfg.pack_gqa == (group if group in configs.GROUPS else 0)
        # Never two CTAs per SM; 128-row tiles for d 64 causal one-head
        # tiles, 64-key blocks for d 128 causal with fewer units than SMs.
        assert cfg.ctas_per_sm == 1
        plain = AttentionConfig(**configs.variant(d, causal)[1])
        few = b * h * math.ceil(sq / plain.block_m) < sms
        if cfg.pack_gqa:
            assert over == dict(configs.variant(d, causal)[1], pack_gqa=group)
        elif d == 64 and causal:
            assert cfg.block_m == 128 and cfg.kv_block == 128
        elif d == 128 and causal and few:
            assert cfg.block_m == 128 and cfg.kv_block == 64
        else:
            assert over == plain_overrides(d, causal)
    # The grid reaches every configuration of the table but the head dim's
    # plain d 64 causal one (what variant_attention runs without a shape).
    assert set(configs.VARIANTS) - names == {"d64c"}


def plain_overrides(d, causal):
    return configs.variant(d, causal)[1]


def test_the_pick_of_the_measured_rows():
    """What the op runs on rows of docs/attention.md's grid (H200, 132 SMs)."""
    def pick(*shape):
        return configs.pick(*shape, sms=132)[0]
    assert pick(64, True, 2, 16, 2, 8192, 8192) == "d64c_gqa8"
    assert pick(64, True, 8, 16, 16, 1024, 1024) == "d64c_m128"
    assert pick(64, False, 8, 16, 16, 1024, 1024) == "d64"
    assert pick(128, True, 16, 16, 16, 512, 512) == "d128c"
    assert pick(128, True, 1, 8, 8, 1024, 1024) == "d128c_bn64"
    assert pick(128, False, 1, 8, 8, 1024, 1024) == "d128"
    assert pick(128, False, 2, 32, 4, 4096, 4096) == "d128_gqa8"
    assert pick(256, True, 4, 8, 8, 2048, 2048) == "d256c"
