"""The GPU suite, part 2: fast calls, CUDA graphs, torch ops, the one-call GEMM.

Every test checks results on the GPU. Kernels: ``fill_ptx`` of the manifest
(p[i] = v + i, PTX JIT-compiled by the driver) and the GEMM variants of the
bundle's cache (``gemm-cache/``, filled by scripts/build-gpu-bundle.py),
reached through ``pipeline_mlir.gemm``. Without a GPU, torch or
cuda-bindings everything is skipped with the reason.

    cd .gpu-bundle && python3 -m pytest -q test_gpu_launch.py
"""

import os
import time

import pytest

from gpu_child import bundle_dir, load_manifest

torch = pytest.importorskip("torch", reason="these tests run torch tensors, graphs and ops")
MANIFEST = load_manifest() or {"kernels": []}
KERNELS = {e["name"]: e for e in MANIFEST["kernels"]}
GEMM_CACHE = os.path.join(bundle_dir() or ".", "gemm-cache")


@pytest.fixture(scope="module")
def gemm_cache():
    if not os.path.isdir(GEMM_CACHE):
        pytest.skip(f"no GEMM cache at {GEMM_CACHE}: build the bundle with "
                    "scripts/build-gpu-bundle.py")
    os.environ["PIPELINE_MLIR_CACHE_DIR"] = GEMM_CACHE


@pytest.fixture(scope="module")
def fill():
    from pipeline_mlir import runtime as rt

    if "fill_ptx" not in KERNELS:
        pytest.skip("fill_ptx not in the manifest")
    with open(os.path.join(bundle_dir(), KERNELS["fill_ptx"]["image"]), "rb") as f:
        return rt.CompiledKernel(f.read(), name="fill", block=256,
                                 params=[("out", "ptr:4"), ("value", "u32"), ("n", "u32")])


def filled(n, v):
    return torch.arange(n, device="cuda", dtype=torch.int64).add_(v).to(torch.int32)


def ref(a, b):
    return torch.matmul(a.float(), b.float().T)


def close(c, a, b):
    """The GEMM's stated bound (hopper_gemm_host.REL_ERROR_BOUND)."""
    from pipeline_mlir.ops.hopper_gemm_host import REL_ERROR_BOUND

    r = ref(a, b)
    err = ((c.float() - r).abs() / (r.abs() + a.shape[1] ** 0.5)).max().item()
    bound = REL_ERROR_BOUND["bf16" if a.dtype == torch.bfloat16 else "f16"]
    assert err <= bound, f"max relative error {err:.3g} > {bound}"
    return err


# --- the fast call path --------------------------------------------------------

def test_fast_calls_are_right_and_cheap(fill, device):
    n = 100_003
    grid = (n + 255) // 256
    outs = [torch.zeros(n, dtype=torch.int32, device="cuda") for _ in range(3)]
    fn = fill
    fn(outs[0], 1, n, grid=grid)                      # first call: the checked path
    for i, out in enumerate(outs):                    # then the fast path, new tensors
        fn(out, 10 + i, n, grid=grid, sync=False)
    torch.cuda.synchronize()
    for i, out in enumerate(outs):
        assert torch.equal(out, filled(n, 10 + i))
    run = fn(outs[0], 3, n, grid=grid, sync=False, timed=True)
    assert run.elapsed_ms > 0 and torch.equal(outs[0], filled(n, 3))
    # untimed (the asynchronous default): wait() records the completion then
    run = fn(outs[1], 4, n, grid=grid, sync=False)
    assert not run.timed and run.wait() is run and torch.equal(outs[1], filled(n, 4))
    with pytest.raises(RuntimeError, match="launched untimed"):
        run.elapsed_ms
    # bad arguments on the warm fast path: the checked path's messages
    from pipeline_mlir import runtime as rt
    with pytest.raises(rt.ArgumentError, match=r"argument 2 \('n'\) of kernel 'fill': -1 is "
                       r"out of range for u32"):
        fn(outs[0], 5, -1, grid=1)
    with pytest.raises(rt.ArgumentError, match=r"argument 0 \('out'\) of kernel 'fill': "
                       r"address .* is not 4-byte aligned"):
        fn(outs[0].view(torch.uint8)[1:], 5, 1, grid=1)
    # host time per asynchronous call (sanity bound; the benchmark is launch_overhead.py)
    reps = 2000
    t0 = time.perf_counter()
    for _ in range(reps):
        fn(outs[1], 7, n, grid=grid, sync=False)
    per_call = (time.perf_counter() - t0) / reps
    torch.cuda.synchronize()
    print(f"fill: {per_call * 1e6:.1f} us host time per asynchronous call")
    assert torch.equal(outs[1], filled(n, 7))
    assert per_call < 30e-6, f"{per_call * 1e6:.1f} us per call"


# --- the one-call GEMM ----------------------------------------------------------

GEMM_SHAPES = [(2048, 2048, 2048), (256, 256, 256), (128, 4096, 1024), (1000, 1032, 520),
               (4096, 1024, 512)]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_gemm_entry_point(dtype, device, gemm_cache):
    import pipeline_mlir
    from pipeline_mlir.ops import gemm as ops_gemm

    dt = getattr(torch, dtype)
    torch.manual_seed(0)
    for m, n, k in GEMM_SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=dt)
        b = torch.randn(n, k, device="cuda", dtype=dt)
        c = pipeline_mlir.gemm(a, b)
        err = close(c, a, b)
        out = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
        assert pipeline_mlir.gemm(a, b, out=out) is out
        close(out, a, b)
        print(f"gemm {dtype} {m}x{n}x{k}: variant {ops_gemm.chosen(a, b)}, err {err:.3g}")
    a = torch.randn(64, 64, device="cuda", dtype=dt)
    with pytest.raises(ValueError, match=r"b must be N x K"):
        pipeline_mlir.gemm(a, torch.randn(64, 32, device="cuda", dtype=dt))
    with pytest.raises(TypeError, match=r"must both be bfloat16 or both float16"):
        pipeline_mlir.gemm(a, a.float())
    with pytest.raises(ValueError, match=r"must be a contiguous 2-D CUDA tensor"):
        pipeline_mlir.gemm(a, a, out=torch.empty(64, 128, device="cuda", dtype=dt)[:, :64])


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_every_table_variant_matches_torch(dtype, device, gemm_cache):
    """Each tile of pipeline_mlir.gemm's table (128x192 and 128x64
    included), on a shape it divides, a ragged one and a tiny one; then a
    repeat on the same tensors with new values (the prepared launch)."""
    from pipeline_mlir.ops import gemm as ops_gemm
    from pipeline_mlir.ops import gemm_configs
    from pipeline_mlir.ops.hopper_gemm_host import check

    for v in gemm_configs.VARIANTS:
        g = ops_gemm.variant_gemm(v, dtype)
        for m, n, k in ((3072, 3072, 256), (1000, 1032, 520), (64, 8, 8)):
            err = check(g, m, n, k)
            print(f"{v} {dtype} {m}x{n}x{k}: err {err:.3g}")
        dt = getattr(torch, {"bf16": "bfloat16", "f16": "float16"}[dtype])
        a = torch.randn(384, 256, device="cuda", dtype=dt)
        b = torch.randn(576, 256, device="cuda", dtype=dt)
        c = torch.empty(384, 576, device="cuda", dtype=dt)
        for _ in range(2):
            a.normal_()
            g(a, b, c)
            close(c, a, b)


# --- split-K --------------------------------------------------------------------------

# Narrow outputs with a long K (scripts/bundle_common.SPLITK_TEST_SHAPES: the
# bundle's cache holds their split-K variants and reductions): too few
# output tiles to fill the SMs, so gemm_configs.choose_split cuts K. Ragged
# M and N (2000 x 200), K not a multiple of the 64-wide K block (9000).
SPLITK_SHAPES = [(4096, 256, 9000), (512, 512, 16384), (2000, 200, 9000), (256, 512, 9000)]


@pytest.fixture
def split_k_on(monkeypatch):
    """The pick with split-K allowed (gemm_configs.AUTO_SPLIT_K is off by
    default until split-K beats cuBLAS; these tests check it computes right)
    and stream-K, which the pick prefers on these shapes, left out."""
    from pipeline_mlir.ops import gemm as ops_gemm
    from pipeline_mlir.ops import gemm_configs

    monkeypatch.setattr(gemm_configs, "AUTO_SPLIT_K", True)
    monkeypatch.setattr(gemm_configs, "AUTO_STREAM_K", False)
    ops_gemm._picks.clear()
    ops_gemm._fused_picks.clear()
    yield
    ops_gemm._picks.clear()
    ops_gemm._fused_picks.clear()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_gemm_split_k_matches_torch_and_repeats_bitwise(dtype, device, gemm_cache, split_k_on):
    """pipeline_mlir.gemm on the narrow long-K shapes takes a split-K
    variant, is within the GEMM's bound of torch in fp32, and gives the
    same bits on a second call (into out=, the workspace reused) and after
    another shape has used the GPU in between: the partial sums are added
    in one fixed order."""
    import pipeline_mlir
    from pipeline_mlir.ops import gemm as ops_gemm
    from pipeline_mlir.ops import gemm_configs

    dt = getattr(torch, dtype)
    torch.manual_seed(0)
    firsts = []
    for m, n, k in SPLITK_SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=dt)
        b = torch.randn(n, k, device="cuda", dtype=dt)
        c = pipeline_mlir.gemm(a, b)
        v = ops_gemm.chosen(a, b)
        assert gemm_configs.splits_of(v) > 1, f"{m}x{n}x{k} took {v}, not a split-K variant"
        err = close(c, a, b)
        out = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
        assert pipeline_mlir.gemm(a, b, out=out) is out
        assert torch.equal(out, c), f"{v} {m}x{n}x{k}: two runs differ"
        firsts.append((a, b, c))
        print(f"gemm {dtype} {m}x{n}x{k}: variant {v}, err {err:.3g}")
    for a, b, c in firsts:          # each again, after the others
        assert torch.equal(pipeline_mlir.gemm(a, b), c)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_gemm_split_k_fused_epilogue_matches_torch(dtype, device, gemm_cache, split_k_on):
    """On the split-K shapes the fused epilogue runs in the reduction, on
    the fp32 sum: alpha, bias, residual and an activation against torch in
    fp32, the same bits twice; an f32 bias; the residual being out itself
    (each element read before it is written, by the same thread)."""
    import pipeline_mlir

    dt = getattr(torch, dtype)
    torch.manual_seed(0)
    for m, n, k in SPLITK_SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=dt)
        b = torch.randn(n, k, device="cuda", dtype=dt)
        bias = torch.randn(n, device="cuda", dtype=dt)
        res = torch.randn(m, n, device="cuda", dtype=dt)
        for activation in ("gelu_erf", "relu"):
            c = _fused_or_skip(lambda: pipeline_mlir.gemm(
                a, b, bias=bias, activation=activation, residual=res, alpha=0.5))
            err = fused_close(c, fused_ref(a, b, bias, activation, res, 0.5), a, 0.5)
            assert torch.equal(c, pipeline_mlir.gemm(a, b, bias=bias, activation=activation,
                                                     residual=res, alpha=0.5))
            print(f"split-K gemm+{activation} {dtype} {m}x{n}x{k}: err {err:.3g}")
        bias32 = torch.randn(n, device="cuda", dtype=torch.float32)
        c = _fused_or_skip(lambda: pipeline_mlir.gemm(a, b, bias=bias32))
        fused_close(c, fused_ref(a, b, bias32), a)
        c = res.clone()
        assert _fused_or_skip(lambda: pipeline_mlir.gemm(a, b, residual=c, out=c)) is c
        fused_close(c, fused_ref(a, b, residual=res), a)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_split_k_variant_with_fewer_k_blocks_than_splits(dtype, device, gemm_cache):
    """A split-K variant called directly with K of fewer 64-wide blocks
    than its S runs min(S, K blocks) splits, none empty, and the reduction
    of that many (the cache holds 2..S): right on a ragged shape, a shape
    of one K block, and through a prepared launch on new values."""
    from pipeline_mlir.ops import gemm as ops_gemm

    g = ops_gemm.variant_gemm("128x128_sk8", dtype)
    dt = getattr(torch, {"bf16": "bfloat16", "f16": "float16"}[dtype])
    for m, n, k in ((1000, 1032, 200), (333, 200, 64), (256, 512, 9000)):
        a = torch.randn(m, k, device="cuda", dtype=dt)
        b = torch.randn(n, k, device="cuda", dtype=dt)
        c = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
        for _ in range(2):
            a.normal_()
            assert g.launch(a, b, c, (), None, True) is c
            close(c, a, b)
    a = torch.randn(333, 64, device="cuda", dtype=dt)
    b = torch.randn(200, 64, device="cuda", dtype=dt)
    with pytest.raises(ValueError, match="out must be a contiguous 333 x 200"):
        g.launch(a, b, torch.empty(200, 333, device="cuda", dtype=dt), (), None, False)


# --- stream-K -------------------------------------------------------------------------

# Ragged shapes whose tiles leave the last wave part-empty (4544 x 1008 x 7784:
# 144 tiles of 128x256 on 132 SMs), fewer tiles than SMs with a long K
# (1664 x 1112 x 12456), a few K blocks (1000 x 1032 x 520), K under one
# block and M, N under one tile (333 x 200 x 72, 100 x 136 x 4104), and a
# shape of whole waves (4096 x 4096 x 1024: no stream-K run, all tiles whole).
STREAMK_SHAPES = [(4544, 1008, 7784), (1664, 1112, 12456), (2040, 2752, 6744),
                  (1000, 1032, 520), (333, 200, 72), (100, 136, 4104), (4096, 4096, 1024),
                  (224, 168, 14872)]


def _counters_zero():
    from pipeline_mlir.ops import streamk_host

    for ws, counters in streamk_host._buffers.values():
        assert int(counters.abs().sum()) == 0, "a stream-K launch left a counter set"


def _stream_k_variants_repeat_bitwise(variants, shapes, dtype):
    """Each variant on each shape: within the bound of torch on a NaN-filled
    C, the same bits on a second call and after the other shapes ran, the
    arrival counters back at zero after each launch."""
    from pipeline_mlir.ops import gemm as ops_gemm

    dt = getattr(torch, {"bf16": "bfloat16", "f16": "float16"}[dtype])
    torch.manual_seed(0)
    for v in variants:
        g = ops_gemm.variant_gemm(v, dtype)
        firsts = []
        for m, n, k in shapes:
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(n, k, device="cuda", dtype=dt)
            c = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
            assert g.launch(a, b, c, (), None, True) is c
            err = close(c, a, b)
            _counters_zero()
            again = g.launch(a, b, None, (), None, True)
            assert torch.equal(again, c), f"{v} {m}x{n}x{k}: two runs differ"
            firsts.append((a, b, c))
            print(f"{v} {dtype} {m}x{n}x{k}: err {err:.3g}")
        for a, b, c in firsts:
            assert torch.equal(g.launch(a, b, None, (), None, True), c)
        _counters_zero()


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_stream_k_variants_match_torch_and_repeat_bitwise(dtype, device, gemm_cache):
    """Every stream-K variant on every shape: within the GEMM's bound of
    torch in fp32 (a NaN-filled C: every element written), the same bits
    on a second call and after the other shapes ran in between (whichever
    CTA arrives last, the partials are summed in K order), and the arrival
    counters back at zero after each launch."""
    from pipeline_mlir.ops import gemm_configs

    # the shared fix-up's variants too (every contributor sums a share), and
    # those with one arrival a warp the pick takes (the last arrival resets)
    _stream_k_variants_repeat_bitwise(
        (*gemm_configs.STREAM_K_VARIANTS, *gemm_configs.STREAM_K_SHARE_VARIANTS,
         *gemm_configs.SHARE1_PICKS),
        STREAMK_SHAPES, dtype)


# Narrow outputs of a long K (the cluster stream-K's class: 6144 x 176 x 7680,
# 2376 x 312 x 9808), a ragged mid-size one, and shapes under one unit.
CLUSTER_STREAMK_SHAPES = [(6144, 176, 7680), (2376, 312, 9808), (1816, 248, 9512),
                          (600, 1176, 10136), (333, 200, 72), (100, 136, 4104)]


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_cluster_stream_k_variants_match_torch_and_repeat_bitwise(dtype, device, gemm_cache):
    """Stream-K on the clusters along N and 2x2 (every CTA of a cluster has
    its own workspace slots and counters): within the GEMM's bound of torch
    in fp32 on a NaN-filled C, bitwise equal on a second call and after the
    other shapes ran, and the counters back at zero after each launch."""
    from pipeline_mlir.ops import gemm_configs

    _stream_k_variants_repeat_bitwise(gemm_configs.CLUSTER_STREAM_K_VARIANTS,
                                      CLUSTER_STREAMK_SHAPES, dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_gemm_picks_stream_k_on_a_part_empty_last_wave(dtype, device, gemm_cache):
    """pipeline_mlir.gemm on 4544 x 1008 x 7784 (plain: two waves, the
    second 9% full at 128x256) takes a stream-K variant; right, bitwise the
    same into out= and on a side stream (its own workspace and counters)."""
    import pipeline_mlir
    from pipeline_mlir.ops import gemm as ops_gemm
    from pipeline_mlir.ops import gemm_configs

    dt = getattr(torch, dtype)
    m, n, k = 4544, 1008, 7784
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(n, k, device="cuda", dtype=dt)
    c = pipeline_mlir.gemm(a, b)
    v = ops_gemm.chosen(a, b)
    assert gemm_configs.is_stream_k(v), f"took {v}"
    close(c, a, b)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
    assert pipeline_mlir.gemm(a, b, out=out) is out and torch.equal(out, c)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        other = pipeline_mlir.gemm(a, b)
    side.synchronize()
    assert torch.equal(other, c)
    _counters_zero()


# --- the fused epilogue -------------------------------------------------------------

# The shapes (ragged M; N and K multiples of 8, as TMA needs) and the
# epilogues of scripts/bundle_common.EPILOGUE_TEST_SHAPES and
# gemm_configs.PREBUILT_EPILOGUES: what the bundle's cache carries.
EPILOGUE_SHAPES = [(256, 256, 256), (1000, 1032, 520), (333, 200, 72)]


def _act(name):
    F = torch.nn.functional
    return {None: lambda x: x, "relu": F.relu, "silu": F.silu, "gelu_erf": F.gelu,
            "gelu_tanh": lambda x: F.gelu(x, approximate="tanh")}[name]


def fused_ref(a, b, bias=None, activation=None, residual=None, alpha=1.0):
    """torch in fp32: act(alpha * F.linear(a, b) + bias + residual)."""
    r = alpha * torch.nn.functional.linear(a.float(), b.float())
    if bias is not None:
        r = r + bias.float()
    if residual is not None:
        r = r + residual.float()
    return _act(activation)(r)


def fused_close(c, ref, a, alpha=1.0):
    """The GEMM's stated bound (REL_ERROR_BOUND: fp32 accumulation, one
    rounding to the output dtype) relative to |ref| + |alpha| sqrt(K) + 1
    (the size of the pre-activation sum: the product's, the bias's and the
    residual's, all O(1) here). The activations are at most 1.13-Lipschitz
    and their fp32 formulas (kernel/fragment.py) within 1e-6, far below it."""
    from pipeline_mlir.ops.hopper_gemm_host import REL_ERROR_BOUND

    scale = abs(alpha) * a.shape[1] ** 0.5 + 1
    err = ((c.float() - ref).abs() / (ref.abs() + scale)).max().item()
    bound = REL_ERROR_BOUND["bf16" if a.dtype == torch.bfloat16 else "f16"]
    assert err <= bound, f"max relative error {err:.3g} > {bound}"   # NaN fails too
    return err


def _fused_or_skip(fn):
    """Run ``fn``; an epilogue variant that the cache lacks (a GPU host
    without MLIR, a bundle built without --epilogues) skips with the
    command that fills it."""
    try:
        return fn()
    except LookupError as err:
        pytest.skip(f"epilogue variant not in the cache: {err}")


@pytest.mark.parametrize("activation", ["relu", "gelu_tanh", "gelu_erf", "silu"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_gemm_fused_epilogue_matches_torch(activation, dtype, device, gemm_cache):
    """gemm(a, b, bias, activation, residual, alpha) against torch in fp32
    (F.linear + bias + residual, then the activation), on an even shape and
    two ragged ones (the M and N edges mask the bias and residual loads);
    then out=, the bias alone (another variant), and two alphas through one
    compiled kernel (alpha is an argument, not a constant)."""
    import pipeline_mlir
    from pipeline_mlir.ops import gemm as ops_gemm

    dt = getattr(torch, dtype)
    torch.manual_seed(0)
    for m, n, k in EPILOGUE_SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=dt)
        b = torch.randn(n, k, device="cuda", dtype=dt)
        bias = torch.randn(n, device="cuda", dtype=dt)
        res = torch.randn(m, n, device="cuda", dtype=dt)
        for alpha in (0.5, -1.25):
            c = _fused_or_skip(lambda: pipeline_mlir.gemm(
                a, b, bias=bias, activation=activation, residual=res, alpha=alpha))
            err = fused_close(c, fused_ref(a, b, bias, activation, res, alpha), a, alpha)
        out = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
        assert pipeline_mlir.gemm(a, b, bias=bias, activation=activation, residual=res,
                                  alpha=0.5, out=out) is out
        fused_close(out, fused_ref(a, b, bias, activation, res, 0.5), a, 0.5)
        c = _fused_or_skip(lambda: pipeline_mlir.gemm(a, b, bias=bias, activation=activation))
        fused_close(c, fused_ref(a, b, bias, activation), a)
        print(f"gemm+{activation} {dtype} {m}x{n}x{k}: err {err:.3g}")
    # the plain call still takes its own variant, unchanged
    close(pipeline_mlir.gemm(a, b), a, b)
    assert "_" not in ops_gemm.chosen(a, b)


def test_gemm_epilogue_single_steps_and_arguments(device, gemm_cache):
    """alpha alone, the residual alone (also in place: residual is out), an
    fp32 bias; then the argument checks, with their messages."""
    import pipeline_mlir

    dt = torch.bfloat16
    torch.manual_seed(1)
    m, n, k = 1000, 1032, 520
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(n, k, device="cuda", dtype=dt)
    res = torch.randn(m, n, device="cuda", dtype=dt)
    bias32 = torch.randn(n, device="cuda", dtype=torch.float32)
    c = _fused_or_skip(lambda: pipeline_mlir.gemm(a, b, alpha=3.0))
    fused_close(c, fused_ref(a, b, alpha=3.0), a, 3.0)
    c = _fused_or_skip(lambda: pipeline_mlir.gemm(a, b, residual=res))
    fused_close(c, fused_ref(a, b, residual=res), a)
    inplace = res.clone()
    assert pipeline_mlir.gemm(a, b, residual=inplace, out=inplace) is inplace
    fused_close(inplace, fused_ref(a, b, residual=res), a)
    c = _fused_or_skip(lambda: pipeline_mlir.gemm(a, b, bias=bias32))
    fused_close(c, fused_ref(a, b, bias=bias32), a)

    bias = torch.randn(n, device="cuda", dtype=dt)
    with pytest.raises(ValueError, match="activation must be None or one of relu, gelu_tanh, "
                                         "gelu_erf, silu"):
        pipeline_mlir.gemm(a, b, activation="gelu")
    with pytest.raises(ValueError, match=rf"bias must be a contiguous vector of N = {n} values"):
        pipeline_mlir.gemm(a, b, bias=bias[:-8])
    with pytest.raises(TypeError, match="bias must be torch.bfloat16 .* or torch.float32"):
        pipeline_mlir.gemm(a, b, bias=bias.half())
    with pytest.raises(ValueError, match=rf"residual must be a contiguous M x N = {m} x {n}"):
        pipeline_mlir.gemm(a, b, residual=res.T.contiguous().T)
    with pytest.raises(TypeError, match="residual must be torch.bfloat16"):
        pipeline_mlir.gemm(a, b, residual=res.float())
    with pytest.raises(TypeError, match="alpha must be a Python number"):
        pipeline_mlir.gemm(a, b, alpha=torch.tensor(2.0))


def test_compiled_model_fuses_its_epilogue(device, gemm_cache):
    """torch.compile(fullgraph=True) traces gemm with an epilogue as one
    node (the custom op's fake implementation gives the shapes)."""
    import pipeline_mlir

    w = torch.randn(1032, 520, device="cuda", dtype=torch.bfloat16) / 16
    bias = torch.randn(1032, device="cuda", dtype=torch.bfloat16)

    def layer(x, r):
        return pipeline_mlir.gemm(x, w, bias=bias, activation="gelu_erf", residual=r,
                                  alpha=0.5)

    compiled = torch.compile(layer, fullgraph=True)
    x = torch.randn(1000, 520, device="cuda", dtype=torch.bfloat16)
    r = torch.randn(1000, 1032, device="cuda", dtype=torch.bfloat16)
    y = _fused_or_skip(lambda: compiled(x, r))
    fused_close(y, fused_ref(x, w, bias, "gelu_erf", r, 0.5), x, 0.5)
    explain = torch._dynamo.explain(layer)(x, r)
    assert explain.graph_break_count == 0 and explain.graph_count == 1


# --- CUDA graphs -----------------------------------------------------------------

def test_torch_cuda_graph_replays_with_new_inputs(fill, device, gemm_cache):
    import pipeline_mlir

    n = 4096
    out = torch.zeros(n, dtype=torch.int32, device="cuda")
    a = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(384, 256, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(512, 384, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):                     # warm-up, as torch recommends
        fill(out, 1, n, grid=n // 256)
        pipeline_mlir.gemm(a, b, out=c)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    out.zero_()
    g = torch.cuda.graph
    graph = torch.cuda.CUDAGraph()
    with g(graph):
        run = fill(out, 5, n, grid=n // 256)          # recorded, not run
        pipeline_mlir.gemm(a, b, out=c)
        c2 = pipeline_mlir.gemm(a, b)                  # allocated inside the capture
    assert run.captured
    torch.cuda.synchronize()
    assert not out.any(), "a captured launch ran during capture"
    for step in range(3):
        a.copy_(torch.randn_like(a))
        b.copy_(torch.randn_like(b))
        out.zero_()
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, filled(n, 5)), f"replay {step}"
        close(c, a, b)
        close(c2, a, b)


def test_graph_replay_survives_the_descriptor_ring_wrapping(device, gemm_cache):
    """A captured GEMM names its descriptor slots for the graph's life: after
    thousands of calls with fresh tensors on the capture stream (three puts
    each, the 2,048-slot ring wrapped several times), the graph still reads
    its own tensor maps, and the calls in between are right too."""
    import pipeline_mlir
    from pipeline_mlir import runtime

    a = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(384, 256, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(512, 384, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        pipeline_mlir.gemm(a, b, out=c)                # prepared outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):         # fired into the capture: pinned
        pipeline_mlir.gemm(a, b, out=c)
    pool = [torch.randn(128, 256, device="cuda", dtype=torch.bfloat16) for _ in range(40)]
    outs = [torch.empty(128, 384, device="cuda", dtype=torch.bfloat16) for _ in range(40)]
    arenas = runtime.device_arena(runtime.default_device())
    reuses = arenas.stats()["reuses"]
    with torch.cuda.stream(side):
        for i in range(3000):                          # 40 x 40 address pairs, then again
            x, o = pool[i % 40], outs[(i // 40) % 40]
            pipeline_mlir.gemm(x, b, out=o)
    torch.cuda.synchronize()
    assert arenas.stats()["reuses"] - reuses > 2048    # the ring went round
    assert arenas.stats()["pinned"] >= 3
    close(outs[(2999 // 40) % 40], pool[2999 % 40], b)
    for _ in range(2):
        a.copy_(torch.randn_like(a))
        graph.replay()
        torch.cuda.synchronize()
        close(c, a, b)


def test_driver_stream_capture_replays_with_new_inputs(fill, device, gemm_cache):
    from cuda.bindings import driver as drv

    import pipeline_mlir

    def ok(ret):
        err = ret[0] if isinstance(ret, tuple) else ret
        assert int(err) == 0, ret
        return ret[1] if isinstance(ret, tuple) and len(ret) > 1 else None

    n = 8192
    out = torch.zeros(n, dtype=torch.int32, device="cuda")
    a = torch.randn(256, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, 512, device="cuda", dtype=torch.float16)
    c = torch.empty(256, 1024, device="cuda", dtype=torch.float16)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        pipeline_mlir.gemm(a, b, out=c)               # warm-up: module, plan, descriptors
    torch.cuda.synchronize()
    handle = drv.CUstream(s.cuda_stream)
    ok(drv.cuStreamBeginCapture(handle,
                                drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))
    fill(out, 9, n, grid=n // 256, stream=s.cuda_stream)
    with torch.cuda.stream(s):
        pipeline_mlir.gemm(a, b, out=c)
    graph = ok(drv.cuStreamEndCapture(handle))
    exe = ok(drv.cuGraphInstantiate(graph, 0))
    assert not out.any()
    for step in range(3):
        a.copy_(torch.randn_like(a))
        out.zero_()
        torch.cuda.synchronize()
        ok(drv.cuGraphLaunch(exe, handle))
        ok(drv.cuStreamSynchronize(handle))
        assert torch.equal(out, filled(n, 9)), f"launch {step}"
        close(c, a, b)
    ok(drv.cuGraphExecDestroy(exe))
    ok(drv.cuGraphDestroy(graph))


# --- torch.compile ---------------------------------------------------------------

def test_compiled_model_calls_our_gemm(device, gemm_cache):
    import pipeline_mlir

    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16) / 16
            self.w2 = torch.randn(256, 1024, device="cuda", dtype=torch.bfloat16) / 32

        def forward(self, x):
            h = torch.nn.functional.gelu(pipeline_mlir.gemm(x, self.w1))
            return pipeline_mlir.gemm(h, self.w2) + 1

    model = Mlp()
    compiled = torch.compile(model, fullgraph=True)
    for _ in range(2):
        x = torch.randn(384, 512, device="cuda", dtype=torch.bfloat16)
        y = compiled(x)
        h = torch.nn.functional.gelu(torch.matmul(x, model.w1.T))
        want = torch.matmul(h, model.w2.T) + 1
        err = ((y.float() - want.float()).abs() / (want.float().abs() + 1)).max().item()
        assert y.shape == (384, 256) and err < 3e-2, err
    # the op is one node of the graph, not a graph break
    explain = torch._dynamo.explain(model.forward)(x)
    assert explain.graph_break_count == 0 and explain.graph_count == 1


def test_compiled_kernel_as_torch_op(fill, device):
    op = fill.as_torch_op("pipeline_mlir_test::fill", mutates=("out",),
                          grid=lambda out, value, n: ((n + 255) // 256,))

    @torch.compile(fullgraph=True)
    def f(out, n):
        op(out, 4, n)
        return out * 2

    n = 3000
    out = torch.zeros(n, dtype=torch.int32, device="cuda")
    y = f(out, n)
    assert torch.equal(out, filled(n, 4)) and torch.equal(y, filled(n, 4) * 2)
