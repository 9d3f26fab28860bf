"""Split-K, deviceless: the split-K GEMM variants and the
reduction build, verify, pass the protocol checker and assemble; the work
unit -> (tile, split, K blocks) map, folded from the kernel's own IR,
equals the Python model, and the model covers every (tile, K block) once;
the pick takes split-K for narrow outputs with a long K and not for the
shapes that fill the GPU; a plain variant is built exactly as before. The
GPU checks (against torch.matmul, bitwise equal over two runs) are
test/gpu/test_gpu_launch.py::test_gemm_split_k_*."""

import re
import shutil
from dataclasses import replace

import pytest
from mlir import passmanager as pm
from mlir.dialects import arith

from _ptxas import spill_bytes

from pipeline_mlir.kernel import GlobalPtr, Kernel, Scalar, store
from pipeline_mlir.kernel.tile_scheduler import split_k_count, split_k_unit
from pipeline_mlir.kernel.values import i32
from pipeline_mlir.kernels import hopper_gemm as hg
from pipeline_mlir.kernels import splitk_reduce
from pipeline_mlir.ops import gemm_configs
from pipeline_mlir.ops.epilogues import Epilogue

ASSEMBLER = "ptxas" if shutil.which("ptxas") else "nvjitlink"
TMA_STORE = "cp.async.bulk.tensor.2d.global.shared::cta"


# --- the unit map ------------------------------------------------------------------

def _model(tiles, splits, k_blocks):
    """An independent statement of the map: S' = min(S, kb) splits, split s
    owning K blocks [s kb / S', (s + 1) kb / S'); unit u = s * tiles + t."""
    used = min(splits, k_blocks)
    out = []
    for s in range(used):
        lo, hi = s * k_blocks // used, (s + 1) * k_blocks // used
        out += [(t, s, lo, hi - lo) for t in range(tiles)]
    return out


def _const(v):
    return Scalar(arith.constant(i32(), v))


def _folded(tiles, splits, k_blocks):
    """split_k_unit as the kernel emits it (i32 Scalars), folded for every
    constant unit by canonicalize, read back from the stored constants."""
    k = Kernel("splitk_map", block_dim=32, params={"out": GlobalPtr()})
    units = tiles * min(splits, k_blocks)
    with k:
        (out,) = k.args
        used = split_k_count(splits, _const(k_blocks))
        for u in range(units):
            for j, v in enumerate(split_k_unit(_const(u), _const(tiles), used,
                                               _const(k_blocks))):
                store(v, out, 4 * u + j)
    pm.PassManager.parse("builtin.module(gpu.module(gpu.func(canonicalize)))",
                         k.context).run(k.module.operation)
    text = str(k.module)
    stored = re.findall(r"llvm\.store %(c[-\w]*)", text)
    consts = dict(re.findall(r"%(c[-\w]*) = arith\.constant (-?\d+) : i32", text))
    values = [int(consts[name]) for name in stored]
    assert len(values) == 4 * units, text
    return [tuple(values[i:i + 4]) for i in range(0, len(values), 4)]


# (tiles, S, K blocks): K blocks divisible by S, not divisible (ragged
# splits), fewer K blocks than splits (S' = kb), the narrow-long shape's
# 141 blocks (K = 9000: a ragged last block, which TMA fills with zeros).
MAP_CASES = [(3, 4, 12), (5, 3, 7), (2, 8, 5), (4, 4, 141), (1, 7, 64), (6, 2, 1)]


@pytest.mark.parametrize("tiles, splits, k_blocks", MAP_CASES)
def test_unit_map_in_the_kernel_equals_the_model(tiles, splits, k_blocks):
    model = _model(tiles, splits, k_blocks)
    used = split_k_count(splits, k_blocks)
    py = [split_k_unit(u, tiles, used, k_blocks) for u in range(tiles * used)]
    assert py == model
    assert _folded(tiles, splits, k_blocks) == model


@pytest.mark.parametrize("tiles, splits, k_blocks",
                         MAP_CASES + [(t, s, kb) for t in (1, 7) for s in range(2, 9)
                                      for kb in (1, 2, 9, 17, 100, 257)])
def test_every_k_block_of_every_tile_once_and_no_split_empty(tiles, splits, k_blocks):
    used = split_k_count(splits, k_blocks)
    seen = {}
    sizes = set()
    for u in range(tiles * used):
        t, s, lo, count = split_k_unit(u, tiles, used, k_blocks)
        assert count >= 1, (u, t, s)           # a split with no K block would write nothing
        sizes.add(count)
        for kb in range(lo, lo + count):
            assert (t, kb) not in seen
            seen[t, kb] = s
    assert set(seen) == {(t, kb) for t in range(tiles) for kb in range(k_blocks)}
    assert max(sizes) - min(sizes) <= 1        # balanced: the last split is not a straggler
    for t in range(tiles):                      # splits in K order: partial s holds range s
        owners = [seen[t, kb] for kb in range(k_blocks)]
        assert owners == sorted(owners)


# --- the kernels -------------------------------------------------------------------

SPLIT_BUILDS = ["128x128_sk3", "128x256_sk4"]


@pytest.mark.parametrize("variant", SPLIT_BUILDS)
def test_split_variant_builds_checks_and_assembles(variant):
    """Verified, through the protocol checker (to_ptx runs it), assembled;
    wgmma as in the plain kernel, the fp32 partials stored from registers
    (one 8-byte store per value pair and row half: block_n / 8 x 2 per
    thread), no TMA store and no C buffer."""
    over = gemm_configs.overrides(variant)
    cfg = replace(hg.GemmConfig(dtype="f16"), **over)
    k = hg.build(cfg)
    k.verify()
    ptx = k.to_ptx()
    shape = f"m64n{cfg.block_n}k16.f32.f16.f16"
    assert ptx.count(f"wgmma.mma_async.sync.aligned.{shape}") == 8
    assert TMA_STORE not in ptx
    assert ptx.count("st.global.v2.b32") == cfg.block_n // 8 * 2
    assert cfg.epilogue_bytes() == 0 and cfg.c_dtype == "f32"
    assert cfg.name.endswith(f"_sk{over['split_k']}")
    assert [n for n, _ in k.params] == ["a", "b", "c", "c_ptr", "m", "n", "k"]
    k.compile(assembler=ASSEMBLER)


@pytest.mark.skipif(not shutil.which("ptxas"), reason="ptxas -v counts the spills")
@pytest.mark.parametrize("variant", ["128x256_sk4", "128x128_sk8"])
def test_split_variant_does_not_spill(variant):
    """The partial store's addresses and predicates fit beside the
    accumulator (ptxas -v: no spill stores)."""
    ptx = hg.build(replace(hg.GemmConfig(), **gemm_configs.overrides(variant))).to_ptx()
    assert spill_bytes(ptx) == 0


def test_simulator_runs_a_split_variant_with_fewer_k_blocks_than_splits(tmp_path):
    """pipeline-sim on 128x128_sk8 with M = N = 256 and K = 200: 4 K blocks,
    so 4 splits of one block each, 16 units; producer and consumers walk
    the same blocks (no deadlock, no protocol finding)."""
    from pipeline_mlir.sim.cli import main as sim_main

    k = hg.build(replace(hg.GemmConfig(), **gemm_configs.overrides("128x128_sk8")))
    path = tmp_path / "splitk.mlir"
    path.write_text(str(k))
    assert sim_main([str(path), "--arg", "4=256", "--arg", "5=256", "--arg", "6=200",
                     "--schedules", "2"]) == 0


def test_split_variant_meta_tells_the_launcher():
    image, meta = hg.build_variant(gemm_configs.overrides("128x128_sk2"), "bf16", "sm_90a")
    assert image and meta["split_k"] == 2
    assert meta["layouts"]["c"]["dtype"] == "f32"       # C is the fp32 workspace slice
    _, plain = hg.build_variant(gemm_configs.overrides("128x128"), "bf16", "sm_90a")
    assert "split_k" not in plain and plain["layouts"]["c"]["dtype"] == "bf16"
    # The launcher encodes a tensor map for C (the kernel does not use it
    # when split): the fp32 layout's box passes every cuTensorMapEncodeTiled
    # rule on a workspace slice of 2000 x 200.
    from pipeline_mlir.layout import OperandLayout
    from pipeline_mlir.runtime.tensormap import validate

    c = OperandLayout.from_meta(meta["layouts"]["c"])
    assert c.torch_dtype == "float32"
    validate(0x7000_0000, (2000, 200), (800, 4), "float32", c.box, c.swizzle)


def test_plain_variants_are_built_as_before():
    """split_k=1 is the default and emits nothing of split-K: the same IR
    as a config that does not mention it (the byte-for-byte comparison
    with the kernel before split-K existed was run by hand:
    docs/gemm.md, split-K), no fp32 store, the same name."""
    for name, over in gemm_configs.VARIANTS.items():
        cfg = replace(hg.GemmConfig(), **over)
        assert cfg.split_k == 1 and "_sk" not in cfg.name
    cfg = replace(hg.GemmConfig(), **gemm_configs.VARIANTS["64x128"])
    text = str(hg.build(cfg).module)
    assert text == str(hg.build(replace(cfg, split_k=1)).module)
    assert "vector<2xf32>" not in text


def test_split_config_misuse_names_the_rule():
    with pytest.raises(ValueError, match="split_k must be an int >= 1"):
        hg.build(hg.GemmConfig(split_k=0))
    with pytest.raises(ValueError, match="split_k needs cluster_m=1"):
        hg.build(hg.GemmConfig(split_k=2, cluster_m=2))
    with pytest.raises(ValueError, match="apply it in the reduction"):
        hg.build(hg.GemmConfig(split_k=2, epilogue=Epilogue(activation="relu")))
    with pytest.raises(ValueError, match="is a split-K variant"):
        gemm_configs.fused("128x256_sk4", Epilogue(activation="relu"))
    with pytest.raises(KeyError, match="split-K: <128x256|128x128>_sk<2..8>"):
        gemm_configs.overrides("128x256_sk99")


@pytest.mark.parametrize("splits, dtype", [(2, "bf16"), (5, "f16"), (8, "bf16")])
def test_reduction_builds_and_assembles(splits, dtype):
    """Two 16-byte fp32 loads per split, all issued before the adds; S - 1
    adds per element (one fixed order); one 16-byte store of 8 values."""
    k = splitk_reduce.build(splitk_reduce.ReduceConfig(splits, dtype))
    k.verify()
    ptx = k.to_ptx()
    assert ptx.count("ld.global.v4.b32") == 2 * splits
    assert ptx.count("add.rn.f32") == (splits - 1) * 8
    assert ptx.count("st.global.v4.b32") == 1
    assert ptx.count(f"cvt.rn.{dtype}x2.f32") == 4
    body = ptx[ptx.index("ld.global.v4.b32"):]
    assert body.rindex("ld.global.v4.b32") < body.index("add.rn.f32")
    k.compile(assembler=ASSEMBLER)
    with pytest.raises(ValueError, match="splits must be an int in 1..16"):
        splitk_reduce.build(splitk_reduce.ReduceConfig(17, dtype))


FUSED = {"full": Epilogue(alpha="param", bias="col", residual=True, activation="gelu_erf"),
         "bias_f32_relu": Epilogue(bias="col", bias_dtype="f32", activation="relu"),
         "alpha_const": Epilogue(alpha=0.5),
         "residual_silu": Epilogue(residual=True, activation="silu")}


@pytest.mark.parametrize("name", sorted(FUSED))
def test_reduction_with_a_fused_epilogue(name):
    """The epilogue in the reduction: its parameters after (ws, out,
    groups, n) in Epilogue.param_names order; bias and residual loaded in
    pairs (4 each per group of 8), one activation per value; assembled;
    the cache entry names it."""
    epi = FUSED[name]
    entry, over = gemm_configs.reduction(3, epi)
    assert entry == f"sum3_{epi.tag}" and over["epilogue"] == epi.to_json()
    image, meta = splitk_reduce.build_variant(over, "bf16", "sm_90a")
    assert image and meta["epilogue"] == epi.to_json()
    assert [p[0] for p in meta["params"]] == ["ws", "out", "groups", "n",
                                              *epi.param_names()]
    ptx = splitk_reduce.build(splitk_reduce.ReduceConfig(3, "bf16", epi)).to_ptx()
    pairs = len(re.findall(r"ld\.global\.v2\.b(?:16|32)", ptx))
    assert pairs == 4 * (epi.bias is not None) + 4 * epi.residual
    if epi.activation in ("gelu_erf", "silu"):
        assert ptx.count("ex2.approx.ftz.f32") == 8
    if epi.activation == "relu":
        assert ptx.count("max.NaN.f32") == 8
    with pytest.raises(ValueError, match="user fn epilogue"):
        splitk_reduce.build(splitk_reduce.ReduceConfig(
            2, "bf16", Epilogue(fn=lambda x, ctx: x)))


# --- the pick ----------------------------------------------------------------------

NARROW_LONG = [(4096, 256, 9000), (512, 512, 16384), (2000, 200, 9000), (256, 512, 9000),
               (336, 320, 12864)]
# Shapes that fill the GPU, and the sweep's long-K shapes measured fast on
# the plain variant (gemm_configs.TUNED keeps them there until measured).
FILLING = [(1024, 1024, 16384), (256, 4096, 14336), (128, 8192, 8192),
           (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
           (3072, 3072, 3072), (4104, 4200, 2056), (12288, 1280, 5120), (4096, 14336, 4096),
           (2048, 28672, 4096), (4096, 4096, 14336), (8192, 8192, 1024), (3000, 5000, 4096)]


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_pick_splits_narrow_outputs_with_a_long_k(dtype):
    for m, n, k in NARROW_LONG:
        v = gemm_configs.choose(m, n, k, dtype, split=True, stream_k=False)
        s = gemm_configs.splits_of(v)
        assert s > 1, (m, n, k, v)
        units = gemm_configs.units_of(gemm_configs.tile_variant(v), m, n, s)
        assert units <= 2 * 132                          # at most two waves
        assert -(-k // 64) // s >= gemm_configs.MIN_SPLIT_K_BLOCKS
        plain = gemm_configs.choose(m, n, k, dtype, split=False)
        assert gemm_configs.splits_of(plain) == 1
        assert gemm_configs.units_of(plain, m, n) < 132  # split only where a wave is part-empty


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_pick_keeps_the_shapes_that_fill_the_gpu(dtype):
    for m, n, k in FILLING:
        assert gemm_configs.splits_of(gemm_configs.choose(m, n, k, dtype)) == 1, (m, n, k)
    # a short K is not split however few the tiles (each split would be all fill)
    assert gemm_configs.splits_of(gemm_configs.choose(512, 512, 512, dtype)) == 1


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_the_default_pick_does_not_split_until_split_k_pays(dtype):
    """AUTO_SPLIT_K is off (measured slower than cuBLAS on every split pick):
    pipeline_mlir.gemm runs the plain pick, also on the narrow-long shapes."""
    assert gemm_configs.AUTO_SPLIT_K is False
    for m, n, k in NARROW_LONG:
        assert gemm_configs.splits_of(gemm_configs.choose(m, n, k, dtype)) == 1


def test_fill_and_last_wave():
    assert gemm_configs.fill("128x256", 4096, 4096) == 1.0
    assert gemm_configs.fill("128x256", 4104, 4200) == pytest.approx(
        4104 * 4200 / (33 * 17 * 128 * 256))
    assert gemm_configs.last_wave("128x256", 4096, 256, 132) == pytest.approx(32 / 132)
    assert gemm_configs.last_wave("128x256", 4096, 256, 132, 4) == pytest.approx(128 / 132)
    assert gemm_configs.last_wave("128x256", 4096, 4096, 132) == pytest.approx(116 / 132)


# --- the host side, without a GPU --------------------------------------------------

class _Dtype:
    def __init__(self, name):
        self.name = name


_BF16, _F32 = _Dtype("bfloat16"), _Dtype("float32")


class _Tensor:
    """The attributes splitk_host reads of a torch CUDA tensor."""
    _next = 0x7000_0000

    def __init__(self, shape, dtype=_BF16, base=None, contiguous=True):
        self.shape, self.dtype, self.device = tuple(shape), dtype, "cuda:0"
        self.contiguous = contiguous
        if base is None:
            base = _Tensor._next
            _Tensor._next += 1 << 24
        self.base = base

    def get_device(self):
        return 0

    def data_ptr(self):
        return self.base

    def is_contiguous(self):
        return self.contiguous

    def new_empty(self, shape, dtype=None):
        return _Tensor(shape, dtype or self.dtype)

    def __getitem__(self, i):
        return _Tensor(self.shape[1:], self.dtype, self.base + i * 4 * self.shape[1]
                       * self.shape[2])


def _stand_in_torch():
    import types

    torch = types.ModuleType("torch")
    torch.float32 = _F32
    torch.empty = lambda shape, device=None, dtype=None: _Tensor(shape, dtype)
    return torch


class _Recorder:
    def __init__(self, meta, log):
        self.meta, self.log = meta, log
        self.extra_names = ()
        self.device = type("D", (), {"ordinal": 0})()

    def launch(self, a, b, c, extra, stream, sync):
        self.log.append(("gemm", a, b, c, stream))
        return c


class _Reduce:
    def __init__(self, splits, log):
        self.splits, self.log = splits, log

    def launch(self, ws, out, groups, n, extra, stream, sync):
        self.log.append(("reduce", self.splits, ws, out, groups, stream, n, extra))


def test_split_k_host_runs_the_gemm_into_the_workspace_then_the_reduction(monkeypatch):
    """The GEMM gets slice 0 of an (S', M, N) fp32 workspace as C; then the
    reduction of S' = min(S, K blocks) splits writes out (M N / 8 groups),
    both on the call's stream; a repeat on the same stream reuses the
    workspace (its prepared launches stay valid), another stream gets its
    own; misuse is refused with the rule."""
    import sys

    from pipeline_mlir.ops import splitk_host

    monkeypatch.setitem(sys.modules, "torch", _stand_in_torch())
    monkeypatch.setattr(splitk_host, "_workspaces", {})
    log = []
    g = splitk_host.SplitKGemm(_Recorder({"name": "gemm_sk4", "split_k": 4}, log),
                               lambda s: _Reduce(s, log), _BF16)
    a, b = _Tensor((4096, 9000)), _Tensor((256, 9000))
    c = g.launch(a, b, None, (), 7, False)
    assert c.shape == (4096, 256) and c.dtype is _BF16
    (_, ga, gb, gc, gs), (_, splits, ws, out, groups, rs, n, extra) = log
    assert (ga, gb, gs, rs) == (a, b, 7, 7) and out is c
    assert ws.shape == (4, 4096, 256) and ws.dtype is _F32
    assert gc.shape == (4096, 256) and gc.data_ptr() == ws.data_ptr()
    assert splits == 4 and groups == 4096 * 256 // 8 and n == 256 and extra == ()
    log.clear()
    g.launch(a, b, c, (), 7, False)
    assert log[1][2] is ws                                   # the same workspace
    log.clear()
    g.launch(a, b, c, (), 9, False)
    assert log[1][2] is not ws and log[1][2].shape == ws.shape   # another stream's
    log.clear()
    short_a, short_b = _Tensor((1000, 200)), _Tensor((1032, 200))   # 4 K blocks: S' = 4
    g8 = splitk_host.SplitKGemm(_Recorder({"name": "gemm_sk8", "split_k": 8}, log),
                                lambda s: _Reduce(s, log), _BF16)
    g8.launch(short_a, short_b, None, (), 7, False)
    assert log[1][1] == 4 and log[1][2].shape == (4, 1000, 1032)
    with pytest.raises(ValueError, match="out must be a contiguous 4096 x 256"):
        g.launch(a, b, _Tensor((256, 4096)), (), 7, False)
    with pytest.raises(ValueError, match=r"N \(204\) x 2 bytes must be a multiple of 16"):
        g.launch(a, _Tensor((204, 9000)), None, (), 7, False)
    with pytest.raises(ValueError, match="out must start on a 16-byte boundary"):
        g.launch(a, b, _Tensor((4096, 256), base=0x7000_0008), (), 7, False)
    with pytest.raises(ValueError, match=r"its reduction takes the extra arguments \[\]"):
        g.launch(a, b, None, {"alpha": 0.5}, 7, False)
    # with a fused epilogue: its arguments go to the reduction, in the
    # kernel's order whatever the dict's
    log.clear()
    fused = splitk_host.SplitKGemm(_Recorder({"name": "gemm_sk4", "split_k": 4}, log),
                                   lambda s: _Reduce(s, log), _BF16, ("alpha", "bias"))
    bias = _Tensor((256,))
    fused.launch(a, b, c, {"bias": bias, "alpha": 0.5}, 7, False)
    assert log[1][7] == (0.5, bias) and log[0][3].data_ptr() == ws.data_ptr()
    with pytest.raises(ValueError, match=r"takes the extra arguments \['alpha', 'bias'\]"):
        fused.launch(a, b, c, {"bias": bias}, 7, False)


def test_split_k_grid_counts_tiles_times_splits():
    """HopperGemm.grid of a split-K meta: tiles x min(S, K blocks) units,
    at most one CTA per SM; a plain meta is as before."""
    import types

    from pipeline_mlir.layout import OperandLayout
    from pipeline_mlir.ops.hopper_gemm_host import HopperGemm

    fake = types.SimpleNamespace(
        meta={"block_m": 128, "block_n": 256, "cluster_m": 1, "split_k": 4},
        persistent=True, _resident=None,
        layouts={"a": OperandLayout.one_box("bf16", "K", 128, 128)})
    assert HopperGemm.grid(fake, 4096, 256, 132, 9000) == (128, 1, 1)   # 32 tiles x 4
    assert HopperGemm.grid(fake, 4096, 256, 132, 128) == (64, 1, 1)     # 2 K blocks: S' = 2
    assert HopperGemm.grid(fake, 8192, 512, 132, 9000) == (132, 1, 1)
    del fake.meta["split_k"]
    assert HopperGemm.grid(fake, 4096, 256, 132, 9000) == (32, 1, 1)


def test_random_sweep_draws_reproducible_shapes_and_reports_the_pick_s_waste():
    """benchmarks/gemm/random_sweep.py (run on a GPU host): its draw is the
    same for a seed, inside [128, 16384] in multiples of 8, both
    distributions; its waste columns are gemm_configs' (split-K units
    counted as tiles x splits)."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "gemm",
                        "random_sweep.py")
    spec = importlib.util.spec_from_file_location("random_sweep", path)
    rs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rs)
    for dist in ("log", "linear"):
        shapes = rs.draw(60, 33, dist)
        assert shapes == rs.draw(60, 33, dist) != rs.draw(60, 34, dist)
        assert len(shapes) == 60
        assert all(128 <= x <= 16384 and x % 8 == 0 for s in shapes for x in s)
    fill, last, waves = rs.waste("128x256_sk4", 4096, 256, 9000, 132)
    assert (fill, waves) == (1.0, 1) and last == pytest.approx(128 / 132)
    assert rs.waste("128x192", 4104, 4200, 2056, 132) == (
        pytest.approx(gemm_configs.fill("128x192", 4104, 4200)),
        pytest.approx(gemm_configs.last_wave("128x192", 4104, 4200, 132)), 6)
    # K of 2 blocks: the variant runs 2 splits, not 4
    assert rs.waste("128x256_sk4", 4096, 256, 128, 132)[1] == pytest.approx(64 / 132)
