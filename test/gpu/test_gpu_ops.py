"""The GPU suite, part 3: the library ops PyTorch users call,
``pipeline_mlir.scaled_mm``, ``pipeline_mlir.attention`` and
``pipeline_mlir.attention_fp8``, against torch.

Their variants come from the bundle's kernel cache (``gemm-cache/``: every
family, filled by scripts/build-gpu-bundle.py). Without a GPU, torch or
cuda-bindings everything is skipped with the reason.

    cd .gpu-bundle && python3 -m pytest -q test_gpu_ops.py
"""

import math
import os

import pytest

from gpu_child import bundle_dir

torch = pytest.importorskip("torch", reason="these tests compare the ops with torch")
CACHE = os.path.join(bundle_dir() or ".", "gemm-cache")


@pytest.fixture(scope="module")
def cache():
    if not os.path.isdir(os.path.join(CACHE, "fp8_gemm")):
        pytest.skip(f"no FP8/attention kernel cache at {CACHE}: build the bundle with "
                    "scripts/build-gpu-bundle.py")
    os.environ["PIPELINE_MLIR_CACHE_DIR"] = CACHE


def quantized(rows, cols, seed):
    from pipeline_mlir.ops.fp8_gemm_host import quantize

    g = torch.Generator(device="cuda").manual_seed(seed)
    return quantize(torch.randn(rows, cols, device="cuda", generator=g))


FP8_SHAPES = [(256, 512, 128), (1000, 1032, 1040), (3072, 3072, 3072), (64, 8, 16),
              (128, 4096, 4096)]


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "promoted"])
def test_scaled_mm_matches_the_reference_and_torch(cache, device, fast):
    import pipeline_mlir
    from pipeline_mlir.ops.fp8_gemm_host import error_bound, normalized_error, reference

    for i, (m, n, k) in enumerate(FP8_SHAPES):
        a8, sa = quantized(m, k, i)
        w8, sw = quantized(n, k, 100 + i)
        out = pipeline_mlir.scaled_mm(a8, w8.t(), sa, sw, out_dtype=torch.bfloat16,
                                      use_fast_accum=fast)
        assert out.shape == (m, n) and out.dtype == torch.bfloat16
        ref, sigma = reference(a8, sa, w8, sw)
        err = normalized_error(out, ref, sigma, k)
        bound = error_bound(k, "fast" if fast else "promoted")
        print(f"scaled_mm {m}x{n}x{k} {'fast' if fast else 'promoted'} "
              f"({pipeline_mlir.ops.scaled_mm.chosen(a8, w8.t(), fast)}): error {err:.3g}")
        assert err <= bound, f"{m}x{n}x{k}: normalized error {err:.3g} > {bound:.3g}"
        if n % 16 == 0 and k % 16 == 0:
            peer = torch._scaled_mm(a8, w8.t(), sa, sw, out_dtype=torch.bfloat16,
                                    use_fast_accum=fast)
            assert normalized_error(peer, ref, sigma, k) <= 2 * bound + 1e-2


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "promoted"])
def test_scaled_mm_fuses_the_bias_as_torch_does(cache, device, fast):
    """``bias`` runs in the kernel's epilogue (fp8_configs.BIAS), after the
    scales: within the bound of the fp64 reference plus the bias, and next
    to torch._scaled_mm(bias=...) as close as each is to that reference."""
    import pipeline_mlir
    from pipeline_mlir.ops import scaled_mm as op
    from pipeline_mlir.ops.fp8_gemm_host import error_bound, normalized_error, reference

    for i, (m, n, k) in enumerate(FP8_SHAPES):
        a8, sa = quantized(m, k, 200 + i)
        w8, sw = quantized(n, k, 300 + i)
        g = torch.Generator(device="cuda").manual_seed(400 + i)
        bias = torch.randn(n, device="cuda", generator=g).to(torch.bfloat16)
        out = pipeline_mlir.scaled_mm(a8, w8.t(), sa, sw, bias=bias, out_dtype=torch.bfloat16,
                                      use_fast_accum=fast)
        assert out.shape == (m, n) and out.dtype == torch.bfloat16
        picked = op.variant_gemm(op.chosen(a8, w8.t(), fast, bias=True),
                                 epilogue=op.fp8_configs.BIAS)
        assert picked.meta["name"].endswith("_bias")       # fused, not a torch add
        assert "split_k" not in picked.meta                # a bias never splits K
        ref, sigma = reference(a8, sa, w8, sw)
        ref = ref + bias.double()
        err = normalized_error(out, ref, sigma, k)
        bound = error_bound(k, "fast" if fast else "promoted")
        print(f"scaled_mm+bias {m}x{n}x{k} {'fast' if fast else 'promoted'}: error {err:.3g}")
        assert err <= bound, f"{m}x{n}x{k}: normalized error {err:.3g} > {bound:.3g}"
        if n % 16 == 0 and k % 16 == 0:
            peer = torch._scaled_mm(a8, w8.t(), sa, sw, bias=bias, out_dtype=torch.bfloat16,
                                    use_fast_accum=fast)
            assert normalized_error(peer, ref, sigma, k) <= 2 * bound + 1e-2
            assert normalized_error(out, peer.double(), sigma, k) <= 3 * bound + 1e-2
    a8, sa = quantized(256, 512, 1)
    w8, sw = quantized(384, 512, 2)
    with pytest.raises(ValueError, match="bias must be a contiguous vector of 384"):
        pipeline_mlir.scaled_mm(a8, w8.t(), sa, sw, bias=torch.zeros(
            384, device="cuda", dtype=torch.float16))


# Outputs of fewer tiles than SMs: the pick splits K (fp8_configs.choose;
# 96 x 8192 x 8192 keeps its plain 64x128 in both modes, 128 tiles).
FP8_SPLIT_SHAPES = [(64, 4096, 4096, True), (64, 4096, 4096, False), (96, 2048, 8192, True),
                    (128, 4096, 4096, False), (72, 2048, 4112, True)]


@pytest.mark.parametrize("m, n, k, fast", FP8_SPLIT_SHAPES,
                         ids=[f"{m}x{n}x{k}-{'fast' if f else 'promoted'}"
                              for m, n, k, f in FP8_SPLIT_SHAPES])
def test_scaled_mm_split_k_matches_the_reference_and_torch(cache, device, m, n, k, fast,
                                                           monkeypatch):
    """A split-K pick (scaled fp32 partials, then the reduction): within
    the bound of the fp64 reference, as torch._scaled_mm is, in bf16 and
    f16; the same bits on a second call (the partials summed in a fixed
    order) and from a CUDA graph's replay; a call with a bias takes a plain
    variant."""
    import pipeline_mlir
    from pipeline_mlir.ops import scaled_mm as op
    from pipeline_mlir.ops.fp8_gemm_host import error_bound, normalized_error, reference

    # the split path, which the rule leaves out as measured slower
    monkeypatch.setattr(op.fp8_configs, "SPLIT_K_IN_RULE", True)
    a8, sa = quantized(m, k, 500 + m)
    w8, sw = quantized(n, k, 600 + n)
    variant = op.chosen(a8, w8.t(), fast)
    assert op.fp8_configs.splits_of(variant) > 1, variant
    ref, sigma = reference(a8, sa, w8, sw)
    bound = error_bound(k, "fast" if fast else "promoted")
    for out_dtype in (torch.bfloat16, torch.float16):
        out = pipeline_mlir.scaled_mm(a8, w8.t(), sa, sw, out_dtype=out_dtype,
                                      use_fast_accum=fast)
        assert out.shape == (m, n) and out.dtype == out_dtype
        err = normalized_error(out, ref, sigma, k)
        print(f"scaled_mm {m}x{n}x{k} {'fast' if fast else 'promoted'} ({variant}, "
              f"{out_dtype}): error {err:.3g}")
        assert err <= bound, f"{m}x{n}x{k}: normalized error {err:.3g} > {bound:.3g}"
        again = torch.full_like(out, float("nan"))
        pipeline_mlir.scaled_mm(a8, w8.t(), sa, sw, out_dtype=out_dtype, use_fast_accum=fast,
                                out=again)
        assert torch.equal(again, out)
    peer = torch._scaled_mm(a8, w8.t(), sa, sw, out_dtype=torch.bfloat16,
                            use_fast_accum=fast)
    assert normalized_error(peer, ref, sigma, k) <= 2 * bound + 1e-2
    want = pipeline_mlir.scaled_mm(a8, w8.t(), sa, sw, use_fast_accum=fast)
    # a side stream (its own workspace), then captured there and replayed
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        pipeline_mlir.scaled_mm(a8, w8.t(), sa, sw, use_fast_accum=fast, out=out)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        pipeline_mlir.scaled_mm(a8, w8.t(), sa, sw, use_fast_accum=fast, out=out)
    out.zero_()
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, want)
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    biased = pipeline_mlir.scaled_mm(a8, w8.t(), sa, sw, bias=bias, use_fast_accum=fast)
    assert normalized_error(biased, ref + bias.double(), sigma, k) <= bound
    assert op.fp8_configs.splits_of(op.chosen(a8, w8.t(), fast, bias=True)) == 1


def test_scaled_mm_options_and_errors(cache, device):
    import pipeline_mlir

    a8, sa = quantized(256, 512, 1)
    w8, sw = quantized(384, 512, 2)
    base = pipeline_mlir.scaled_mm(a8, w8.t(), sa, sw)
    half = pipeline_mlir.scaled_mm(a8, w8.t(), sa, sw, out_dtype=torch.float16)
    assert half.dtype == torch.float16
    assert (half.float() - base.float()).abs().max().item() <= 0.02 * base.float().abs().max()
    bias = torch.randn(384, device="cuda", dtype=torch.bfloat16)
    biased = pipeline_mlir.scaled_mm(a8, w8.t(), sa, sw, bias=bias)
    assert torch.allclose(biased.float(), base.float() + bias.float(), atol=0.06, rtol=0.01)
    with pytest.raises(ValueError, match="column-major"):
        pipeline_mlir.scaled_mm(a8, w8.t().contiguous(), sa, sw)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        pipeline_mlir.scaled_mm(a8.to(torch.bfloat16), w8.t(), sa, sw)
    with pytest.raises(ValueError, match="one-element float32"):
        pipeline_mlir.scaled_mm(a8, w8.t(), sa.repeat(2), sw)


def test_scaled_mm_compiles_and_captures(cache, device):
    import pipeline_mlir

    a8, sa = quantized(512, 256, 3)
    w8, sw = quantized(768, 256, 4)

    def f(x, w):
        return pipeline_mlir.scaled_mm(x, w.t(), sa, sw, use_fast_accum=True) * 2

    want = f(a8, w8)
    got = torch.compile(f, fullgraph=True)(a8, w8)
    assert torch.equal(got, want)
    out = torch.empty(512, 768, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        pipeline_mlir.scaled_mm(a8, w8.t(), sa, sw, use_fast_accum=True, out=out)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        pipeline_mlir.scaled_mm(a8, w8.t(), sa, sw, use_fast_accum=True, out=out)
    out.zero_()
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, want / 2)


ATTENTION_SHAPES = [  # b, sq, sk, h, hk, d, causal
    (2, 512, 512, 4, 4, 128, False), (1, 333, 517, 4, 2, 128, True),
    (2, 256, 256, 8, 1, 64, True), (1, 300, 77, 2, 1, 64, False),
    (1, 384, 384, 2, 2, 256, True), (1, 128, 640, 4, 1, 256, False),
    # what attention_configs.pick packs: GQA 8:1 and 4:1 at d 128 and 64,
    # causal and full; d 64 causal in 128-row tiles; d 128 causal with
    # fewer work units than SMs in 64-key blocks
    (1, 100, 300, 8, 1, 128, True), (2, 200, 200, 8, 2, 64, True),
    (4, 300, 4096, 32, 4, 128, False), (2, 333, 333, 4, 4, 64, True),
    (1, 500, 700, 4, 4, 128, True),
    # the plain tiles of one head, many work units
    (4, 600, 600, 8, 8, 128, True), (8, 256, 2048, 16, 16, 64, False)]


def test_the_attention_shapes_reach_every_kind_of_configuration():
    """The shapes above run the plain, GQA-packed and shape-specific
    configurations of the pick (for an H100's or H200's 132 SMs)."""
    from pipeline_mlir.ops import attention_configs

    names = {attention_configs.pick(d, c, b, h, hk, sq, sk)[0]
             for b, sq, sk, h, hk, d, c in ATTENTION_SHAPES}
    assert {"d128c_gqa8", "d64c_gqa4", "d128_gqa8", "d64c_m128", "d128c_bn64", "d128",
            "d128c", "d64", "d256c"} <= names


@pytest.mark.parametrize("shape", ATTENTION_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_attention_matches_fp32_attention(cache, device, shape):
    import pipeline_mlir
    from pipeline_mlir.ops.attention_fwd_host import (ABS_ERROR_BOUND, LSE_ERROR_BOUND,
                                                      reference)

    b, sq, sk, h, hk, d, causal = shape
    g = torch.Generator(device="cuda").manual_seed(sq + sk)
    q = torch.randn(b, sq, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16, generator=g)
    o, lse = pipeline_mlir.attention(q, k, v, causal=causal, return_lse=True)
    ro, rlse = reference(q, k, v, causal)
    err = (o.float() - ro).abs().max().item()
    finite = torch.isfinite(rlse)
    lerr = (lse[finite] - rlse[finite]).abs().max().item() if finite.any() else 0.0
    print(f"attention {shape}: max |O err| {err:.3g}, max |LSE err| {lerr:.3g}")
    assert err <= ABS_ERROR_BOUND and lerr <= LSE_ERROR_BOUND
    assert torch.equal(torch.isfinite(lse), finite)
    scale = 0.5 / math.sqrt(d)
    o2 = pipeline_mlir.attention(q, k, v, causal=causal, softmax_scale=scale)
    ro2, _ = reference(q, k, v, causal, softmax_scale=scale)
    assert (o2.float() - ro2).abs().max().item() <= ABS_ERROR_BOUND


def test_attention_compiles_and_refuses_bad_input(cache, device):
    import pipeline_mlir

    q = torch.randn(1, 256, 4, 128, device="cuda", dtype=torch.bfloat16)
    kv = torch.randn(1, 256, 2, 128, device="cuda", dtype=torch.bfloat16)

    def f(q, k, v):
        return pipeline_mlir.attention(q, k, v, causal=True) + 1

    want = f(q, kv, kv)
    assert torch.equal(torch.compile(f, fullgraph=True)(q, kv, kv), want)
    with pytest.raises(ValueError, match="head_dim must be one of"):
        pipeline_mlir.attention(q[..., :96].contiguous(), kv[..., :96].contiguous(),
                                kv[..., :96].contiguous())
    with pytest.raises(ValueError, match="multiple of the K/V heads"):
        pipeline_mlir.attention(q[:, :, :3].contiguous(), kv, kv)
    with pytest.raises(TypeError, match="bfloat16"):
        pipeline_mlir.attention(q.half(), kv.half(), kv.half())


# (b, sq, sk, h, hk, d, causal): both head dims, ragged, GQA, sq != sk.
FP8_ATTENTION_SHAPES = [(2, 1000, 1000, 4, 4, 128, True), (1, 777, 1500, 8, 2, 128, False),
                        (2, 1536, 700, 8, 2, 256, True), (1, 2048, 2048, 4, 4, 256, False)]


@pytest.mark.parametrize("shape", FP8_ATTENTION_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_attention_fp8_matches_fp32_of_the_dequantized_inputs(cache, device, shape):
    """``pipeline_mlir.attention_fp8`` (V given as (b, s, h, d), transposed
    by the op; descales as tensors and as floats) within the per-row bound
    of ``attention_fwd_host.fp8_errors``; V^T passed by the caller gives the
    same bits."""
    import pipeline_mlir
    from pipeline_mlir.ops.attention_fwd_host import fp8_errors, fp8_quantize, fp8_v_operand

    b, sq, sk, h, hk, d, causal = shape
    g = torch.Generator(device="cuda").manual_seed(sq + sk)
    x = [torch.randn(b, s, n, d, device="cuda", generator=g) for s, n in
         ((sq, h), (sk, hk), (sk, hk))]
    (q8, qd), (k8, kd), (v8, vd) = (fp8_quantize(t, torch.float8_e4m3fn) for t in x)
    o, lse = pipeline_mlir.attention_fp8(q8, k8, v8, qd, kd, vd, causal=causal,
                                         return_lse=True)
    assert o.dtype == torch.bfloat16 and o.shape == q8.shape and lse.shape == (b, h, sq)
    emax, ratio, lerr = fp8_errors(o, lse, (q8, qd), (k8, kd), (v8, vd), causal)
    print(f"attention_fp8 {shape}: max |O err| {emax:.3g} ({ratio:.3f} of its bound), "
          f"max |LSE err| {lerr:.3g}")
    o2, _ = pipeline_mlir.attention_fp8(q8, k8, None, qd.item(), kd.item(), vd.item(),
                                        causal=causal, vt=fp8_v_operand(v8), return_lse=True)
    assert torch.equal(o2, o)
    # Without the LSE (the default) d 128 runs its own kernel (P's row sum on
    # the tensor pipe: O may differ from the LSE kernel's in the last bits):
    # within the same bound, and the same bits with V^T given.
    o3 = pipeline_mlir.attention_fp8(q8, k8, v8, qd, kd, vd, causal=causal)
    emax3, ratio3, _ = fp8_errors(o3, lse, (q8, qd), (k8, kd), (v8, vd), causal)
    print(f"attention_fp8 {shape}, no LSE: max |O err| {emax3:.3g} ({ratio3:.3f} of its bound)")
    o4 = pipeline_mlir.attention_fp8(q8, k8, None, qd.item(), kd.item(), vd.item(),
                                     causal=causal, vt=fp8_v_operand(v8))
    assert torch.equal(o4, o3)


def test_attention_fp8_refuses_bad_input(cache, device):
    import pipeline_mlir

    q = torch.randn(1, 256, 4, 128, device="cuda").to(torch.float8_e4m3fn)
    kv = torch.randn(1, 256, 2, 128, device="cuda").to(torch.float8_e4m3fn)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        pipeline_mlir.attention_fp8(q.float(), kv, kv, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="head_dim must be one of"):
        pipeline_mlir.attention_fp8(q[..., :64].contiguous(), kv[..., :64].contiguous(),
                                    kv[..., :64].contiguous(), 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="per tensor"):
        pipeline_mlir.attention_fp8(q, kv, kv, torch.ones(4, device="cuda"), 1.0, 1.0)
    with pytest.raises(ValueError, match="one of them"):
        pipeline_mlir.attention_fp8(q, kv, None, 1.0, 1.0, 1.0)
