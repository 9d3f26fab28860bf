"""``pipeline_mlir.scaled_mm``: FP8 matrix product with per-tensor scales,
``torch._scaled_mm``'s contract, on a Hopper GPU.

    out = pipeline_mlir.scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16,
                                  use_fast_accum=True)

``a``: M x K, row-major, ``float8_e4m3fn`` (or ``float8_e5m2``); ``b``:
K x N, column-major (``w.t()`` of an N x K row-major ``w``, as
``torch._scaled_mm`` requires), the same type; ``scale_a`` / ``scale_b``:
one-element float32 CUDA tensors. The result is
``(a.float() * scale_a) @ (b.float() * scale_b)`` rounded to ``out_dtype``
(bfloat16 or float16); ``bias`` (N values of ``out_dtype``) is added to
every row in the kernel's epilogue, after the scales and before the
rounding (``fp8_configs.BIAS``: the epilogue hook of ``pipeline_mlir.gemm``;
each variant with it is its own cache entry). ``use_fast_accum``
picks fast accumulation (every K block's products in one fp32 accumulator,
as cuBLASLt's fast mode) or promoted accumulation (each K block's partial
sum added into a separate fp32 total: more exact at large K).

The variant (tile, stages, accumulation) comes from ``fp8_configs.choose``
by shape. Where ``fp8_configs.SPLIT_K_IN_RULE`` is on (it is off: measured
slower than the plain tiles on the short calls it was for), an output of
too few tiles to fill the SMs takes a split-K variant (not with a bias):
two launches on the stream, the GEMM storing
scaled fp32 partials into a workspace kept per (device, stream, shape)
and the 16-bit GEMM's reduction summing them, in a fixed order, into the
output (``fp8_gemm_host.Fp8SplitKGemm``, ``splitk_host``; bitwise the same
every run). Its cubin from the kernel cache (``kernel_cache``, family
``fp8_gemm``: compiled on demand where MLIR is installed, else read from
``PIPELINE_MLIR_CACHE_DIR`` as ``scripts/build-gemm-cache.py --kernel
fp8_gemm --all`` filled it). It runs on torch's current stream, is the
torch custom op ``torch.ops.pipeline_mlir.scaled_mm`` (``torch.compile``
traces it) and can be captured in CUDA graphs.
"""

import torch

from pipeline_mlir import runtime
from pipeline_mlir.runtime.bounded import put_bounded

from . import fp8_configs, gemm_configs, kernel_cache
from .fp8_gemm_host import Fp8Gemm, Fp8SplitKGemm
from .splitk_host import Reducer

CHIPS = {(9, 0): "sm_90a"}
OPERAND_DTYPES = {torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2"}
OUT_DTYPES = {torch.bfloat16: "bf16", torch.float16: "f16"}
_variants = {}    # (cache-entry name, dtype key, ordinal) -> Fp8Gemm
_picks = {}       # (a.shape, b.shape, dtypes, fast, ordinal, bias?) -> Fp8Gemm
_PICKS = 4096


def variant_gemm(variant, operands="e4m3", out="bf16", device=None, epilogue=None):
    """The loaded ``Fp8Gemm`` of one ``fp8_configs.VARIANTS`` name, with
    the fused ``epilogue`` (``fp8_configs.BIAS``) if given."""
    device = device or runtime.default_device()
    dtype = f"{operands}-{out}"
    name, overrides = fp8_configs.fused(variant, epilogue)
    key = (name, dtype, device.ordinal)
    found = _variants.get(key)
    if found is None:
        chip = CHIPS.get(tuple(device.cc))
        if chip is None:
            raise RuntimeError(f"pipeline_mlir.scaled_mm runs on Hopper (sm_90) GPUs; "
                               f"{device.name} is {device.sm}")
        image, meta = kernel_cache.get(name, overrides, dtype, chip, kernel="fp8_gemm")
        found = Fp8Gemm(image, meta, device=device)
        if overrides.get("split_k", 1) > 1:
            found = Fp8SplitKGemm(found, lambda s: _reducer(s, out, chip, device),
                                  _TORCH_OUT[out])
        _variants[key] = found
    return found


_TORCH_OUT = {name: dtype for dtype, name in OUT_DTYPES.items()}


def _reducer(splits, out, chip, device):
    """The split-K reduction of ``splits`` scaled partials into ``out``
    ('bf16' / 'f16'): the 16-bit GEMM's (kernels/splitk_reduce.py, its
    cache entry ``gemm_configs.reduction``), no scale (the partials carry
    it)."""
    name, overrides = gemm_configs.reduction(splits)
    image, meta = kernel_cache.get(name, overrides, out, chip, kernel="splitk_reduce")
    return Reducer(image, meta, device)


def _check(a, b, scale_a, scale_b, out_dtype):
    for name, t in (("a", a), ("b", b), ("scale_a", scale_a), ("scale_b", scale_b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"scaled_mm: {name} must be a torch tensor, got {type(t).__name__}")
        if not t.is_cuda:
            raise ValueError(f"scaled_mm: {name} must be on a CUDA device, got {t.device}")
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"scaled_mm: a and b must be 2-D, got {tuple(a.shape)} and "
                         f"{tuple(b.shape)}")
    operands = OPERAND_DTYPES.get(a.dtype)
    if operands is None or b.dtype != a.dtype:
        raise TypeError(f"scaled_mm: a and b must both be float8_e4m3fn or both "
                        f"float8_e5m2, got {a.dtype} and {b.dtype}")
    out = OUT_DTYPES.get(out_dtype)
    if out is None:
        raise TypeError(f"scaled_mm: out_dtype must be torch.bfloat16 or torch.float16, "
                        f"got {out_dtype}")
    (m, k), (kb, n) = a.shape, b.shape
    if kb != k:
        raise ValueError(f"scaled_mm: a is {tuple(a.shape)} (M x K) and b is "
                         f"{tuple(b.shape)}; b must be K x N")
    if not a.is_contiguous():
        raise ValueError("scaled_mm: a must be row-major (contiguous)")
    if not b.t().is_contiguous():
        raise ValueError("scaled_mm: b must be column-major (b.t() contiguous), as "
                         "torch._scaled_mm requires: pass w.t() of an N x K row-major w")
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s.dtype != torch.float32 or s.numel() != 1:
            raise ValueError(f"scaled_mm: {name} must be a one-element float32 tensor (a "
                             "per-tensor scale)")
    if k % 16 or n % 8 or m == 0 or n == 0 or k == 0:
        raise ValueError(f"scaled_mm: K ({k}) must be a multiple of 16 and N ({n}) of 8, "
                         "none zero (TMA needs 16-byte aligned rows)")
    return operands, out


def _check_bias(a, b, bias, out_dtype):
    """``bias``: a contiguous vector of N values of ``out_dtype`` on a's
    device (what the kernel's epilogue reads, one value per column)."""
    n = b.shape[1]
    if not isinstance(bias, torch.Tensor):
        raise TypeError(f"scaled_mm: bias must be a torch tensor, got {type(bias).__name__}")
    if tuple(bias.shape) != (n,) or bias.dtype != out_dtype or not bias.is_contiguous():
        raise ValueError(f"scaled_mm: bias must be a contiguous vector of {n} values of "
                         f"{out_dtype}, got {tuple(bias.shape)} {bias.dtype}"
                         f"{'' if bias.is_contiguous() else ', not contiguous'}")
    if bias.device != a.device:
        raise ValueError(f"scaled_mm: bias is on {bias.device}, a on {a.device}")


def _select(a, b, scale_a, scale_b, out_dtype, fast, bias):
    operands, out = _check(a, b, scale_a, scale_b, out_dtype)
    if bias is not None:       # before a bias variant is built for it
        _check_bias(a, b, bias, out_dtype)
    device = runtime.default_device(a.get_device())
    variant = _variant(a, b, fast, device, bias is not None)
    return variant_gemm(variant, operands, out, device,
                        None if bias is None else fp8_configs.BIAS)


def _scaled_mm(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum, out):
    try:
        key = (a.shape, b.shape, a.dtype, out_dtype, bool(use_fast_accum), a.get_device(),
               bias is not None)
        g = _picks.get(key)
    except AttributeError:   # not tensors: _select says so
        g = key = None
    if g is None:
        g = put_bounded(_picks, key, _select(a, b, scale_a, scale_b, out_dtype,
                                             bool(use_fast_accum), bias), _PICKS)
    w = b.t()     # N x K, row-major: what the launcher takes
    # A pick of these shapes and types was checked; what it does not key is
    # checked here, once (the launcher's own scale checks would repeat it:
    # on a short call each costs as much as the kernel's last wave).
    try:
        ok = (scale_a.dtype == torch.float32 and scale_b.dtype == torch.float32
              and scale_a.numel() == 1 and scale_b.numel() == 1 and scale_a.is_cuda
              and scale_b.is_cuda and w.is_contiguous())
    except AttributeError:   # a scale that is not a tensor
        ok = False
    if not ok:
        _check(a, b, scale_a, scale_b, out_dtype)   # raises the message
    extra = {"scale_a": scale_a, "scale_b": scale_b}
    if bias is not None:
        _check_bias(a, b, bias, out_dtype)
        extra["bias"] = bias
    return g.launch(a, w, out, extra, None, False)


def scaled_mm(a, b, scale_a, scale_b, bias=None, out_dtype=torch.bfloat16,
              use_fast_accum=False, out=None):
    """``(a * scale_a) @ (b * scale_b)`` in ``out_dtype`` (see the module doc)."""
    if torch.compiler.is_compiling():
        return torch.ops.pipeline_mlir.scaled_mm(a, b, scale_a, scale_b, bias, out_dtype,
                                                 use_fast_accum)
    return _scaled_mm(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum, out)


def chosen(a, b, use_fast_accum=False, out_dtype=torch.bfloat16, bias=False):
    """The variant name ``scaled_mm`` runs for these operands (for
    reports); ``bias``: of a call with one (never split-K; the variant
    then runs with ``fp8_configs.BIAS``)."""
    return _variant(a, b, use_fast_accum, runtime.default_device(a.get_device()), bias)


def _variant(a, b, fast, device, bias):
    """The pick for ``a @ b`` on ``device``; a call with a bias never takes
    split-K (the bias would be added to every split's partial)."""
    (m, k), n = a.shape, b.shape[1]
    return fp8_configs.choose(m, n, k, "fast" if fast else "promoted",
                              device.limits.multiprocessors, split=not bias)


@torch.library.custom_op("pipeline_mlir::scaled_mm", mutates_args=())
def _scaled_mm_op(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
                  scale_b: torch.Tensor, bias: torch.Tensor | None, out_dtype: torch.dtype,
                  use_fast_accum: bool) -> torch.Tensor:
    return _scaled_mm(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum, None)


@_scaled_mm_op.register_fake
def _scaled_mm_fake(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum):
    torch._check(a.shape[1] == b.shape[0], lambda: "scaled_mm: b must be K x N")
    return a.new_empty(a.shape[0], b.shape[1], dtype=out_dtype)
