"""The FP8 (e4m3) attention forward (``AttentionConfig(dtype='e4m3')``,
kernels/attention_fwd/__init__.py's "FP8"), without a GPU: P's register operand
packed in place against V^T's key order, element by element on the PTX
ISA's fragment layouts (test/gpu/ptx_layouts.py) and as a product; the
host's V^T operand; the configurations pass the protocol checker and the
simulator on a ragged GQA shape, compile without spills, with 8-bit k32
wgmma, V^T loads and no more shuffles than the bf16 kernel; the bf16
configurations are what they were. The GPU check against fp32 attention of
the dequantized inputs is benchmarks/attention/run_attention_fp8.py."""

import importlib.util
import os
import re
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from _example_checks import protocol_warnings, simulate, verify_protocol
from test_gemm_epilogue import _ptxas_spills

from pipeline_mlir.kernel.fragment import fp8_in_place_value
from pipeline_mlir.kernels import attention_fwd
from pipeline_mlir.kernels.attention_fwd import AttentionConfig
from pipeline_mlir.layout import fp8_register_a_key_order
from pipeline_mlir.ops import attention_configs, attention_fp8_configs, kernel_cache
from pipeline_mlir.ops.attention_fwd_host import (FP8_KEY_AXES, FP8_KEY_TRANSPOSE,
                                                  fp8_v_keys, fp8_v_source_keys)

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "gpu")))
import ptx_layouts  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORDER = fp8_register_a_key_order()
# The op's configurations: d 128 full, causal, d 256 full, causal.
FP8 = [attention_fp8_configs.VARIANTS[n] for n in ("fp8_d128", "fp8_d128c", "fp8_d256",
                                                    "fp8_d256c")]


def ir(**cfg):
    return str(attention_fwd.build(AttentionConfig(**cfg)).module)


# -- P's register fragment against V^T's K order -------------------------------

def test_the_key_order_is_a_permutation_within_each_half_slice():
    assert sorted(ORDER) == list(range(32))
    # k indices 0..15 take columns 0..15 (registers 0, 1), 16..31 the rest.
    assert sorted(ORDER[:16]) == list(range(16))


@pytest.mark.parametrize("n", [128, 192, 256])
def test_in_place_registers_hold_the_columns_the_b_descriptor_pairs_them_with(n):
    """For every thread, k32 slice, register and byte: the PTX ISA says the
    register A operand's byte is element (row, kappa) of A; the in-place
    packing puts there accumulator value ``fp8_in_place_value``, which the
    PTX accumulator layout places at (row', column c). The row must match,
    and c must be the key that the host put at V^T column kappa (the K-major
    B descriptor's K index kappa is byte kappa of a V^T row: k slice s
    starts 32 s bytes in)."""
    v_cfg = AttentionConfig(head_dim=128, dtype="e4m3", block_n=n)
    vt = v_cfg.v_layout()
    assert (vt.major, vt.rows, vt.cols, vt.k_per_instruction) == ("K", 128, n, 32)
    # Slice s starts at V^T column 32 s: its box, then its byte in the row
    # (192 keys: three 64-byte boxes, the 64-byte swizzle).
    for s in range(n // 32):
        off = vt.k_slice_offset(s)
        assert (off // vt.box_bytes) * vt.box_cols + off % vt.box_bytes == 32 * s
    source = fp8_v_source_keys(n)
    for T in range(ptx_layouts.THREADS):
        for s in range(n // 32):
            for reg in range(4):
                elements = ptx_layouts.a_register_elements(T, s, reg, 8)
                for byte, (row, kappa) in enumerate(elements):
                    i = fp8_in_place_value(s, reg, byte)
                    acc_row, col = ptx_layouts.accumulator_element(T, i)
                    assert acc_row == row, (T, s, reg, byte)
                    assert col == source[kappa], (T, s, reg, byte)


def test_the_register_product_with_the_permuted_v_is_p_v():
    """P V as the wgmma computes it: A assembled from every thread's in-place
    registers by the PTX A layout, B[kappa, :] = V^T's column kappa from the
    host's gather; small integers, so the products are exact."""
    rng = np.random.default_rng(0)
    n, d = 128, 64
    p = rng.integers(-8, 8, size=(64, n)).astype(np.float64)
    v = rng.integers(-8, 8, size=(n, d)).astype(np.float64)
    a = np.full((64, n), np.nan)
    for T in range(ptx_layouts.THREADS):
        values = {}
        for i in range(n // 2):
            values[i] = p[ptx_layouts.accumulator_element(T, i)]
        for s in range(n // 32):
            for reg in range(4):
                for byte, (row, kappa) in enumerate(
                        ptx_layouts.a_register_elements(T, s, reg, 8)):
                    a[row, kappa] = values[fp8_in_place_value(s, reg, byte)]
    assert not np.isnan(a).any()
    vt = v[fp8_v_source_keys(n)].T              # d x keys, as the host lays it out
    b = vt.T                                    # B[kappa, :]: K-major, column kappa
    assert np.array_equal(a @ b, p @ v)
    assert not np.array_equal(a, p)             # the packing did permute


def test_the_v_operands_transpose_of_key_axes_is_the_gather():
    """fp8_v_operand permutes a 32-key block's axes (h, a, t, e) to (h, t,
    a, e); on numpy the same transpose must give the key order."""
    keys = np.arange(32).reshape(FP8_KEY_AXES).transpose(FP8_KEY_TRANSPOSE).reshape(-1)
    assert tuple(keys) == ORDER == tuple(fp8_v_source_keys(32))
    # and with V's other axes around it, as the host folds it in:
    b, sk, hk, d = 2, 64, 3, 4
    v = np.arange(b * sk * hk * d).reshape(b, sk, hk, d)
    blocks = v.reshape(b, sk // 32, *FP8_KEY_AXES, hk, d)
    vt = blocks.transpose(0, 6, 7, 1, *(2 + i for i in FP8_KEY_TRANSPOSE)).reshape(b, hk, d, sk)
    assert np.array_equal(vt, v[:, fp8_v_source_keys(sk)].transpose(0, 2, 3, 1))


def test_the_v_operand_pads_to_whole_key_blocks():
    for sk in (1, 31, 32, 300, 4096):
        keys = fp8_v_keys(sk)
        src = fp8_v_source_keys(sk)
        assert keys % 32 == 0 and keys - 32 < sk <= keys and len(src) == keys
        assert sorted(src) == list(range(keys))
        # Each block only permutes its own keys.
        assert all(src[c] // 32 == c // 32 for c in range(keys))


# -- the kernel -----------------------------------------------------------------

@pytest.mark.parametrize("cfg", FP8[:3], ids=lambda c: str(c))
def test_fp8_configurations_check_and_simulate_clean(cfg):
    """Checker clean, and the simulator runs every warp to the end on a
    ragged GQA shape: 4 query heads on 2 K/V heads, 200 queries, 300 keys."""
    text = ir(dtype="e4m3", **cfg)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    args = {5: 1, 6: 4, 7: 2, 8: 200, 9: 300}
    (report,) = simulate(text, schedules=2, args=args).values()
    assert report.ok and report.schedules == 2, report


def _shuffles(ptx):
    return len(re.findall(r"shfl\.sync", ptx))


@pytest.mark.parametrize("cfg", FP8, ids=lambda c: str(c))
def test_fp8_kernels_compile_to_8_bit_wgmma_without_spills(cfg):
    """S: m64n{block_n}k32 e4m3 from shared memory; P V: m64n{d}k32 e4m3
    with A in registers (no imm-trans-b); no spill; as many shuffles as the
    bf16 kernel (the row max and sum: P's conversion adds none), or 4 fewer
    with ``row_sum_mma``."""
    c = AttentionConfig(dtype="e4m3", **cfg)
    k = attention_fwd.build(c)
    ptx = k.to_ptx()
    assert _ptxas_spills(ptx) in (None, 0)
    d, bn = cfg["head_dim"], c.kv_block
    assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n{bn}k32\.f32\.e4m3\.e4m3", ptx)
    pv = re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{d}k32\.f32\.e4m3\.e4m3 "
                    r"\{[^}]*\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, p, 1, 1;", ptx)
    if d != bn:
        # the overlapped and the last block's P V, bn / 32 each (S is
        # m64n{bn}: counted apart where d == bn)
        assert len(pv) == 2 * bn // 32
    bf16 = attention_fwd.build(AttentionConfig(head_dim=d, causal=cfg["causal"])).to_ptx()
    # (row_sum_mma: the row sum from the tensor pipe, whole in every
    # thread: the final sum's 4 quad shuffles are gone.)
    assert _shuffles(ptx) == _shuffles(bf16) - (4 if c.row_sum_mma else 0)


def test_fp8_layouts_signature_and_v_loads():
    cfg = AttentionConfig(head_dim=256, dtype="e4m3")
    q, kk, v = cfg.q_layout(), cfg.k_layout(), cfg.v_layout()
    assert (q.dtype, q.major, q.k_slices, kk.rows) == ("e4m3", "K", 8, 128)
    assert (v.dtype, v.major, v.rows, v.cols, v.k_slices) == ("e4m3", "K", 256, 128, 4)
    k = attention_fwd.build(cfg)
    assert [n for n, _ in k.params][-4:] == ["scale_log2", "q_descale", "k_descale",
                                            "v_descale"]
    assert cfg.name.endswith("_e4m3") and cfg.meta(k)["dtype"] == "e4m3"
    text = str(k.module)
    # V^T's loads: 3-D (keys, the head's d rows, batch), one box per stage.
    v_loads = re.findall(r"pipeline\.copy\.tma_load [^\n]*?%arg2\[([^\]]*)\]", text)
    assert v_loads and all(len(c.split(",")) == 3 for c in v_loads)


def test_bf16_configurations_take_no_fp8_parameter():
    cfg = AttentionConfig(head_dim=128)
    k = attention_fwd.build(cfg)
    assert [n for n, _ in k.params][-1] == "scale_log2"
    assert "e4m3" not in str(k.module) and "_e4m3" not in cfg.name
    assert ir(head_dim=128, dtype="bf16") == str(k.module)


@pytest.mark.parametrize("cfg, message", [
    (dict(head_dim=64), "head_dim 128 or 256"),
    (dict(head_dim=128, block_n=96), "key block is a multiple of 64"),
    (dict(head_dim=128, pack_gqa=2), "runs unpacked"),
    (dict(head_dim=128, dtype="f16"), "dtype must be one of"),
])
def test_fp8_configurations_that_cannot_be_built_are_refused(cfg, message):
    cfg = {"dtype": "e4m3", **cfg}
    with pytest.raises(ValueError, match=message):
        AttentionConfig(**cfg)


def test_the_kernel_cache_builds_and_keeps_the_fp8_entries(tmp_path, monkeypatch):
    """``attention_fp8``'s cubins come from the kernel cache (family
    attention_fwd, dtype e4m3): built on a miss, read back on a hit, an
    entry apart from the bf16 one of the same overrides."""
    monkeypatch.setenv("PIPELINE_MLIR_CACHE_DIR", str(tmp_path))
    name, over = attention_fp8_configs.variant(128, True)
    image, meta = kernel_cache.get(name, over, "e4m3", "sm_90a", kernel="attention_fwd")
    assert image[:4] == b"\x7fELF"
    assert meta["dtype"] == "e4m3" and meta["layouts"]["v"]["major"] == "K"
    assert meta["signature"][-3:] == ["ptr:4"] * 3
    assert kernel_cache.load(name, over, "e4m3", "sm_90a", kernel="attention_fwd") == (
        image, meta)
    assert kernel_cache.entry_path(name, over, "e4m3", "sm_90a", kernel="attention_fwd") != \
        kernel_cache.entry_path(name, over, "bf16", "sm_90a", kernel="attention_fwd")


def test_the_cache_script_builds_the_fp8_configurations():
    spec = importlib.util.spec_from_file_location(
        "build_gemm_cache", os.path.join(ROOT, "scripts", "build-gemm-cache.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    found = mod.wanted(SimpleNamespace(kernel=["attention_fwd"], all=True, shape=[], sms=132,
                                       dtype=["bf16"], epilogues=False))
    fp8 = {v: o for k, v, o, d in found if d == "e4m3"}
    assert fp8 == attention_fp8_configs.VARIANTS
    assert {v for k, v, o, d in found if d == "bf16"} == set(attention_configs.VARIANTS)
