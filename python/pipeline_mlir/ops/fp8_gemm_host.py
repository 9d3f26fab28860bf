"""Host side of pipeline_mlir/kernels/fp8_gemm.py: quantize, launch, and check against an
fp64 reference of the dequantized inputs with a stated error bound.

Needs only ``pipeline_mlir.runtime``, ``pipeline_mlir.layout`` and torch (no
MLIR), like ``hopper_gemm_host.py``, whose launcher it extends with the two
scale pointers:

    gemm = Fp8Gemm(cubin_bytes, meta)           # meta: hopper_gemm_host.meta_of
    a8, sa = quantize(a); b8, sb = quantize(b)
    c = gemm(a8, b8, sa, sb)                    # = torch._scaled_mm(a8, b8.T, sa, sb,
                                                #     out_dtype=torch.bfloat16)

The error bound (``error_bound``), for C = bf16(s * sum_k a_k b_k) with the
reference r computed in fp64 from the same e4m3 values (products of two e4m3
values are exact in fp32, so only the sums and the output round):

- the output's rounding to bf16: at most 2^-8 |r| (8 significant bits);
- the accumulation: the tensor core adds each wgmma's k32 products into an
  accumulator that, for FP8, keeps about 13 mantissa bits and truncates
  (DeepSeek-V3's measurement on the H800: ~14 bits of precision), so each
  of the S steps that feed one accumulator loses up to 2^-13 of the partial
  sum, biased one way: the error grows linearly, S * 2^-13 of a typical
  partial sum, whose size is ``sigma * sqrt(K)`` (``sigma``: the rms of the
  dequantized products). ``fast``: S = K / 32 steps on one accumulator;
  ``promoted``: S = 128 / 32 = 4 steps per k-block, then fp32 additions
  (2^-24 each, K / 128 of them). The 32 (K of one wgmma) and the 128 (K of
  one k-block) are the kernel's A tile's (``OperandLayout.k_per_instruction``
  and ``.k``), read from the launcher's layouts, not written here.

So ``|c - r| <= 2^-8 |r| + (S * 2^-13 + (K/128) * 2^-24) * sigma * sqrt(K)``,
checked as ``max |c - r| / (|r| + sigma * sqrt(K)) <= 2^-8 + S 2^-13 + ...``.
A missing or doubled k-block moves an output by about ``sigma * sqrt(128)``,
more than the bound for every K here (checked: ``bound_detects_a_k_block``).
"""

import math

from pipeline_mlir.layout import DTYPES, FP8_MAX, OperandLayout
from pipeline_mlir.ops.hopper_gemm_host import HopperGemm
from pipeline_mlir.ops.splitk_host import SplitKGemm

OUTPUT_ROUNDING = 2.0 ** -8          # bf16
FP8_ACCUMULATOR_LOSS = 2.0 ** -13    # per wgmma step into the tensor core's accumulator
FP32_ROUNDING = 2.0 ** -24
# The A tile of every variant of fp8_configs (e4m3, K-major, one 128-byte
# swizzle span of K per k-block; the rows do not matter here): the layout
# the module-level bound uses when no launcher is at hand. A launcher
# (``Fp8Gemm.error_bound``) uses its kernel's own, from the meta;
# test_fp8_gemm.py checks that every variant's kernel has this K geometry.
E4M3_A = OperandLayout.one_box("e4m3", "K", 128, 64)


def error_bound(k, accumulation, a_layout=E4M3_A):
    """The bound on ``max |c - r| / (|r| + sigma sqrt(K))`` (module doc),
    for a kernel whose A tile is ``a_layout``."""
    per_wgmma, k_block = a_layout.k_per_instruction, a_layout.k
    if accumulation == "fast":
        steps, promotions = math.ceil(k / per_wgmma), 0
    elif accumulation == "promoted":
        steps, promotions = k_block // per_wgmma, math.ceil(k / k_block)
    else:
        raise ValueError(f"accumulation must be 'fast' or 'promoted', got {accumulation!r}")
    return OUTPUT_ROUNDING + steps * FP8_ACCUMULATOR_LOSS + promotions * FP32_ROUNDING


def bound_detects_a_k_block(k, accumulation, a_layout=E4M3_A):
    """A k-block lost (or added twice) moves outputs by ~sigma sqrt(k-block),
    i.e. sqrt(k-block / K) / 2 in the normalized error at |r| ~ sigma
    sqrt(K): the check must see it."""
    return math.sqrt(a_layout.k / k) / 2 > error_bound(k, accumulation, a_layout)


class Fp8Gemm(HopperGemm):
    """A loaded FP8 GEMM variant (``pipeline_mlir/kernels/fp8_gemm.py``)."""

    def error_bound(self, k):
        """``error_bound`` for this kernel: its A tile and accumulation."""
        return error_bound(k, self.meta["accumulation"], self.layouts["a"])

    def __call__(self, a, b, scale_a, scale_b, c=None, stream=None, sync=False, bias=None):
        """``c = scale_a * scale_b * (a @ b^T) [+ bias]``; ``bias`` (N values
        of C's dtype) only for a variant built with the fused bias
        (``fp8_configs.BIAS``), which needs it."""
        extra = scales(self.meta["name"], scale_a, scale_b)
        if bias is not None:
            extra["bias"] = bias
        return self.launch(a, b, c, extra, stream, sync)


class Fp8SplitKGemm(SplitKGemm):
    """A split-K FP8 variant (``split_k`` in its meta): the GEMM, given
    the scales, stores scaled fp32 partials into the workspace
    (kernels/fp8_gemm.py), and the 16-bit GEMM's reduction sums them into
    C (ops/splitk_host.py); called as ``Fp8Gemm`` is. No fused bias: the
    bias is not linear in the splits (``fp8_configs.fused`` refuses it)."""

    def __init__(self, gemm, reducer, out_dtype):
        # its K blocks are its A tile's (128 e4m3), not the 16-bit 64
        super().__init__(gemm, reducer, out_dtype, k_block=gemm.layouts["a"].k)

    def error_bound(self, k):
        """The GEMM's: a split runs fewer wgmma steps into one accumulator,
        and the reduction's fp32 additions replace the promotions' (below
        2^-24 each, the bound's last term)."""
        return self.gemm.error_bound(k)

    def __call__(self, a, b, scale_a, scale_b, c=None, stream=None, sync=False, bias=None):
        if bias is not None:
            raise ValueError(f"{self.meta['name']}: a split-K variant takes no bias (it would "
                             "be added to every split); run a plain variant")
        return self.launch(a, b, c, scales(self.meta["name"], scale_a, scale_b), stream, sync)

    def launch(self, a, b, out, extra_args, stream, sync):
        """``extra_args``: the scales (the GEMM's arguments); the reduction
        takes none."""
        return super().launch(a, b, out, (), stream, sync, gemm_args=extra_args)


def scales(name, scale_a, scale_b):
    """The GEMM's extra arguments {scale_a, scale_b}, each checked."""
    import torch

    for which, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if not (isinstance(s, torch.Tensor) and s.dtype == torch.float32
                and s.numel() == 1 and s.is_cuda):
            raise TypeError(f"{name}: {which} must be a one-element float32 CUDA tensor "
                            f"(torch._scaled_mm's per-tensor scale)")
    return {"scale_a": scale_a, "scale_b": scale_b}


def quantize(x, dtype="e4m3"):
    """(x / scale in ``dtype``, scale) with the per-tensor scale amax / max
    representable (``OperandLayout.finite_max``), as a one-element fp32
    tensor; ``dtype`` may be an ``OperandLayout`` (a launcher's
    ``layouts['a']``) or an 8-bit type's name."""
    import torch

    name = dtype.dtype if isinstance(dtype, OperandLayout) else dtype
    scale = (x.abs().max().float() / FP8_MAX[name]).clamp(min=1e-12).reshape(1)
    q = (x.float() / scale).to(getattr(torch, DTYPES[name][1]))
    return q, scale


def reference(a8, scale_a, b8, scale_b):
    """(fp64 reference of the dequantized product, sigma = rms of the
    dequantized a times rms of the dequantized b)."""
    a = a8.double() * scale_a.double()
    b = b8.double() * scale_b.double()
    sigma = (a.square().mean().sqrt() * b.square().mean().sqrt()).item()
    return a @ b.T, sigma


def normalized_error(c, ref, sigma, k):
    return ((c.double() - ref).abs() / (ref.abs() + sigma * math.sqrt(k))).max().item()


def check(gemm, m, n, k, accumulation, seed=0):
    """Run ``gemm`` on quantized gaussian inputs and compare with the fp64
    reference; return the normalized error (AssertionError over the bound)."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    a8, sa = quantize(torch.randn(m, k, device="cuda", generator=g), gemm.layouts["a"])
    b8, sb = quantize(torch.randn(n, k, device="cuda", generator=g), gemm.layouts["b"])
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    gemm(a8, b8, sa, sb, c, sync=True)
    ref, sigma = reference(a8, sa, b8, sb)
    err = normalized_error(c, ref, sigma, k)
    bound = error_bound(k, accumulation, gemm.layouts["a"])
    if not err <= bound:  # also catches NaN (unwritten outputs)
        raise AssertionError(f"{gemm.meta['name']} {m}x{n}x{k}: normalized error "
                             f"{err:.3g} > {bound:.3g}")
    return err
