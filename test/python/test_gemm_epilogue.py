"""The GEMM's fused epilogue, deviceless: the ``Epilogue`` description
(pipeline_mlir/ops/epilogues.py) and its checks, the kernel's epilogue
variants built, verified, checked by the protocol checker (on in every
lowering) and assembled by ptxas, the default configuration's IR unchanged,
a user ``fn`` in a small kernel, the op's variant naming and the launcher's
binding by name. Values against torch: test/gpu/test_gpu_launch.py
(test_gemm_fused_epilogue_matches_torch)."""

import json
import re
import shutil
from dataclasses import replace

import pytest

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, store
from pipeline_mlir.kernel.epilogue import (ACTIVATIONS, Epilogue, EpilogueContext, apply,
                                           kernel_params)
from pipeline_mlir.kernel.fragment import Fragment
from pipeline_mlir.kernels import hopper_gemm as hg
from pipeline_mlir.ops import gemm_configs
from pipeline_mlir.ops.hopper_gemm_host import HopperGemm
from _ptxas import spill_bytes as _ptxas_spills

ASSEMBLER = "ptxas" if shutil.which("ptxas") else "nvjitlink"
FULL = Epilogue(alpha="param", bias="col", residual=True, activation="gelu_erf")


# --- the description ------------------------------------------------------------

def test_epilogue_fields_are_checked_with_the_rule_and_the_fix():
    with pytest.raises(ValueError, match="activation must be None or one of relu, gelu_tanh, "
                                         "gelu_erf, silu, got 'gelu'"):
        Epilogue(activation="gelu")
    with pytest.raises(ValueError, match="bias must be None or 'col'"):
        Epilogue(bias="row")
    with pytest.raises(ValueError, match="alpha must be a number or 'param'"):
        Epilogue(alpha="2")
    with pytest.raises(ValueError, match="bias_dtype must be one of"):
        Epilogue(bias="col", bias_dtype="f64")
    with pytest.raises(ValueError, match="residual must be True or False"):
        Epilogue(residual=1)
    with pytest.raises(ValueError, match=r"fn must be a function fn\(fragment, ctx\)"):
        Epilogue(fn=3)


def test_json_form_round_trips_and_is_a_stable_key():
    for epi in (Epilogue(), FULL, Epilogue(alpha=2, bias="col", bias_dtype="f32"),
                Epilogue(activation="silu")):
        data = json.loads(json.dumps(epi.to_json()))
        assert Epilogue.from_json(data) == epi
    assert Epilogue().to_json() == {}
    assert Epilogue(alpha=2) == Epilogue(alpha=2.0)          # one key for 2 and 2.0
    assert FULL.to_json() == {"alpha": "param", "bias": "col", "activation": "gelu_erf",
                              "residual": True}
    with pytest.raises(ValueError, match="a user fn cannot be described by data"):
        Epilogue(fn=lambda x, ctx: x).to_json()
    with pytest.raises(ValueError, match=r"unknown fields \['beta'\]"):
        Epilogue.from_json({"beta": 1})


def test_names_params_and_identity():
    assert Epilogue().is_identity and Epilogue(alpha=1).is_identity
    assert not Epilogue(alpha=0.5).is_identity
    assert FULL.param_names() == ("alpha", "bias", "residual")
    assert FULL.tag == "alpha_bias_res_gelu_erf"
    assert Epilogue(alpha=-0.5, bias="col", bias_dtype="f32").tag == "xm0p5_biasf32"
    assert set(ACTIVATIONS) == {"relu", "gelu_tanh", "gelu_erf", "silu"}
    k = Kernel("p", block_dim=128, params={})
    with k:
        params = kernel_params(FULL, "bf16")
        assert [(n, p.kind) for n, p in params.items()] == [
            ("alpha", "f32"), ("bias", "ptr:4"), ("residual", "ptr:4")]
        assert kernel_params(Epilogue(bias="col", bias_dtype="f32"), "f16")["bias"].kind == \
            "ptr:8"
        assert kernel_params(None, "bf16") == {}


# --- the GEMM kernel ----------------------------------------------------------------

def test_default_config_builds_the_same_ir_as_without_an_epilogue():
    """None and an identity Epilogue build byte-identical IR under the same
    name and parameters: every existing variant, its PTX and its cache key
    stay as they were."""
    for overrides in ({}, gemm_configs.VARIANTS["128x192"], dict(tma_store_epilogue=False)):
        cfg = replace(hg.GemmConfig(), **overrides)
        plain = hg.build(cfg)
        same = hg.build(replace(cfg, epilogue=Epilogue()))
        assert str(same.module) == str(plain.module)
        assert [n for n, _ in plain.params] == ["a", "b", "c", "c_ptr", "m", "n", "k"]
    assert gemm_configs.fused("128x256", None) == ("128x256", gemm_configs.VARIANTS["128x256"])
    assert gemm_configs.fused("128x256", Epilogue())[1] is gemm_configs.VARIANTS["128x256"]


EPILOGUES = {
    "relu": Epilogue(activation="relu"),
    "gelu_tanh": Epilogue(activation="gelu_tanh"),
    "gelu_erf": Epilogue(activation="gelu_erf"),
    "silu": Epilogue(activation="silu"),
    "bias": Epilogue(bias="col"),
    "bias_f32": Epilogue(bias="col", bias_dtype="f32"),
    "residual": Epilogue(residual=True),
    "alpha_param": Epilogue(alpha="param"),
    "alpha_const": Epilogue(alpha=0.25),
    "full": FULL,
}


@pytest.mark.parametrize("name", sorted(EPILOGUES))
def test_epilogue_variant_builds_checks_and_assembles(name):
    """On the 64x128 tile (quick to build), each epilogue: its parameters
    after the base ones, in its order; the instructions it stands for; the
    checker (part of to_ptx) and ptxas pass."""
    epi = EPILOGUES[name]
    cfg_name, overrides = gemm_configs.fused("64x128", epi)
    cfg = replace(hg.GemmConfig(dtype="f16"), **overrides)
    cfg = replace(cfg, epilogue=Epilogue.from_json(overrides["epilogue"]))
    k = hg.build(cfg)
    k.verify()
    assert [n for n, _ in k.params][7:] == list(epi.param_names())
    assert cfg.name.endswith("_" + epi.tag) and cfg_name == f"64x128_{epi.tag}"
    ptx = k.to_ptx()
    loads = len(re.findall(r"ld\.global\.v2\.(?:b16|f32|b32)", ptx))
    # per consumer thread: 32 residual pairs (64 x 128 / 128 threads / 2), 16 bias pairs
    assert loads == 32 * epi.residual + 16 * (epi.bias is not None)
    if epi.activation in ("gelu_erf", "gelu_tanh", "silu"):
        assert ptx.count("ex2.approx.ftz.f32") == 64     # one per accumulator value
    if epi.activation == "relu":
        assert ptx.count("max.NaN.f32") == 64
    if epi.alpha != 1 and epi.bias is None:
        assert len(re.findall(r"mul\.rn\.f32\s", ptx)) >= 64
    k.compile(assembler=ASSEMBLER)


@pytest.mark.parametrize("variant", sorted(gemm_configs.VARIANTS))
def test_every_table_variant_fuses_the_full_epilogue_without_spills(variant):
    """alpha + bias + residual + gelu_erf on each tile of pipeline_mlir.gemm's
    table: checked, and (where ptxas is on PATH) no register spill; a tile
    of ``UNFUSED`` is refused (a fused call never picks it)."""
    if variant in gemm_configs.UNFUSED:
        with pytest.raises(ValueError, match="built without fused epilogues"):
            gemm_configs.fused(variant, FULL)
        return
    full = FULL
    if variant in gemm_configs.NO_RESIDUAL:
        # the residual spills there: refused, and the rest of the epilogue fits
        with pytest.raises(ValueError, match="without a residual epilogue"):
            gemm_configs.fused(variant, FULL)
        full = replace(FULL, residual=False)
    name, overrides = gemm_configs.fused(variant, full)
    overrides = json.loads(json.dumps(overrides))        # what the cache key hashes
    image, meta = hg.build_variant(overrides, "bf16", "sm_90a")
    assert image and [p[0] for p in meta["params"]][7:] == (
        ["alpha", "bias", "residual"] if full.residual else ["alpha", "bias"])
    assert meta["epilogue"] == full.to_json() and f"_{full.tag}" in meta["name"]
    cfg = replace(hg.GemmConfig(), **dict(overrides, epilogue=full))
    spills = _ptxas_spills(hg.build(cfg).to_ptx())
    assert spills in (None, 0), f"{name}: {spills} bytes of spill stores"


def test_direct_store_epilogue_and_fp8_scaled_take_the_epilogue_too():
    for overrides in (dict(tma_store_epilogue=False, consumer_warpgroups=1, setmaxnreg=False,
                           block_n=128),
                      dict(dtype="e4m3", out_dtype="bf16", scaled=True, block_n=128,
                           epilogue_passes=1)):
        cfg = replace(hg.GemmConfig(), **overrides, epilogue=FULL)
        k = hg.build(cfg)
        names = [n for n, _ in k.params]
        assert names[-3:] == ["alpha", "bias", "residual"]
        k.compile(assembler=ASSEMBLER)


def test_simulator_runs_the_fused_gemm(tmp_path):
    """The epilogue adds loads and math, no barrier: pipeline-sim runs the
    fused kernel's protocol as it runs the plain one's."""
    from pipeline_mlir.sim.cli import main as sim_main

    path = tmp_path / "gemm_epilogue.mlir"
    path.write_text(str(hg.build(hg.GemmConfig(epilogue=FULL))))
    assert sim_main([str(path), "--arg", "4=256", "--arg", "5=256", "--arg", "6=256",
                     "--schedules", "2"]) == 0


def test_a_non_epilogue_is_refused():
    with pytest.raises(TypeError, match="epilogue must be an Epilogue"):
        hg.build(hg.GemmConfig(epilogue={"activation": "relu"}))


# --- the hook in a user kernel -------------------------------------------------------

def test_user_fn_hook_in_a_small_kernel():
    """A user kernel applies an Epilogue with its own fn: the built-in steps
    first (bias, then relu), then fn, which reads the context (a mask of
    the output's edges) and a kernel argument of its own."""
    seen = {}

    def clamp_outside(x, ctx):
        seen["ctx"] = ctx
        limit = ctx.arg("limit")
        return x.minimum(limit).where(ctx.inside, 0.0)

    epi = Epilogue(bias="col", activation="relu", fn=clamp_outside)
    params = {"out": GlobalPtr(), "m": Int32(), "n": Int32(), "limit": "f32"}
    params.update(kernel_params(epi, "bf16"))
    k = Kernel("user_epilogue", block_dim=128, params=params)
    with k:
        out, m, n, limit, bias = k.args
        acc = Fragment.full(64, 1.0)
        ctx = EpilogueContext(m * 0, n * 0, m, n, k.warp_idx() % 4, k.lane_idx(), "bf16",
                              {"bias": bias, "limit": limit})
        res = epi.apply(acc, ctx)
        assert isinstance(res, Fragment) and res.n == 64
        for i, v in enumerate(res.values):
            store(v, out, k.thread_idx() * 32 + i)
    assert seen["ctx"] is ctx
    ptx = k.to_ptx()
    k.compile(assembler=ASSEMBLER)
    assert len(re.findall(r"ld\.global\.v2\.b16", ptx)) == 8        # 16 bias columns / 2
    assert "max.NaN.f32" in ptx and "min.f32" in ptx


def test_user_fn_must_return_a_fragment_of_the_same_shape():
    k = Kernel("bad_fn", block_dim=128, params={"m": Int32(), "n": Int32()})
    with k:
        m, n = k.args
        ctx = EpilogueContext(m, n, m, n, k.warp_idx() % 4, k.lane_idx(), "bf16")
        acc = Fragment.full(64, 1.0)
        with pytest.raises(TypeError, match="must return a Fragment of n=64"):
            apply(Epilogue(fn=lambda x, c: x.row_max()), acc, ctx)
        with pytest.raises(KeyError, match="no kernel argument 'bias'"):
            apply(Epilogue(bias="col"), acc, ctx)
        assert apply(Epilogue(), acc, ctx) is acc and apply(None, acc, ctx) is acc


# --- the launcher binds by name -------------------------------------------------------

def _launcher(params):
    g = HopperGemm.__new__(HopperGemm)     # no GPU here: only what bind reads
    g.meta = {"name": "test", "params": params}
    g.param_names = tuple(p[0] for p in params)
    g.extra_names = tuple(p for p in g.param_names if p not in
                          ("a", "b", "c", "c_ptr", "m", "n", "k"))
    return g


class _Tensor:
    def __init__(self, ptr):
        self.ptr = ptr

    def data_ptr(self):
        return self.ptr


def test_launcher_binds_extra_arguments_by_name():
    base = [["a", "tma"], ["b", "tma"], ["c", "tma"], ["c_ptr", "ptr"], ["m", "i32"],
            ["n", "i32"], ["k", "i32"]]
    g = _launcher(base + [["alpha", "f32"], ["bias", "ptr:4"], ["residual", "ptr:4"]])
    c = _Tensor(0xC0)
    want = ("A", "B", "C", 0xC0, 1, 2, 3, 0.5, 0xB0, 0xE0)
    assert g.bind(("A", "B", "C"), c, 1, 2, 3,
                  {"residual": _Tensor(0xE0), "alpha": 0.5, "bias": _Tensor(0xB0)}) == want
    assert g.bind(("A", "B", "C"), c, 1, 2, 3, (0.5, _Tensor(0xB0), _Tensor(0xE0))) == want
    with pytest.raises(ValueError, match=r"missing \['residual'\], unknown \['beta'\]"):
        g.bind(("A", "B", "C"), c, 1, 2, 3, {"alpha": 1.0, "bias": c, "beta": 2})
    with pytest.raises(ValueError, match=r"takes \['alpha', 'bias', 'residual'\] after m, n, "
                                         "k; got 1 extra"):
        g.bind(("A", "B", "C"), c, 1, 2, 3, (1.0,))
    plain = _launcher(base)
    assert plain.bind(("A", "B", "C"), c, 1, 2, 3, ()) == ("A", "B", "C", 0xC0, 1, 2, 3)


# --- the cache filler -----------------------------------------------------------------

def test_build_script_lists_the_prebuilt_epilogues_of_each_variant():
    import argparse
    import importlib.util
    import os

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location(
        "build_gemm_cache", os.path.join(root, "scripts", "build-gemm-cache.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    args = argparse.Namespace(kernel=["hopper_gemm"], dtype=["bf16"], all=False,
                              shape=[(256, 256, 256)], sms=132, epilogues=True)
    found = mod.wanted(args)
    names = [v for _, v, _, _ in found]
    assert names[0] == "64x128" and len(found) == 1 + len(gemm_configs.PREBUILT_EPILOGUES)
    assert "64x128_alpha_bias_res_gelu_erf" in names and "64x128_biasf32" in names
    for _, name, overrides, _ in found[1:]:
        epi = Epilogue.from_json(overrides["epilogue"])
        assert name == f"64x128_{epi.tag}" and json.dumps(overrides)   # a JSON key
    # a shape whose plain pick is UNFUSED: its fused entries are the fused
    # pick's (192x192), none of the unfused tile's
    args.shape = [(6208, 1800, 1192)]
    assert gemm_configs.choose(6208, 1800, 1192, "bf16") in gemm_configs.UNFUSED
    names = [v for _, v, _, _ in mod.wanted(args)]
    fused = gemm_configs.choose(6208, 1800, 1192, "bf16", fused=True)
    assert f"{fused}_alpha_bias_res_gelu_erf" in names
    assert not [v for v in names for u in gemm_configs.UNFUSED if v.startswith(u + "_")]
