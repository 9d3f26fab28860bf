"""``pipeline_mlir.gemm(a, b, out=None)``: one call for a matrix product on
a Hopper GPU, the kernel variant chosen by shape and dtype.

    c = pipeline_mlir.gemm(a, b)          # C = A @ B^T: a is M x K, b is N x K
    pipeline_mlir.gemm(a, b, out=c)       # into an M x N tensor

The layout is ``torch.nn.functional.linear``'s (``b`` holds one output
column per row, K contiguous), which is what the tensor cores read without
a transpose: ``gemm(a, b)`` equals ``torch.matmul(a, b.T)``. For a
``torch.matmul``-style K x N ``b``, pass ``b.T.contiguous()``. bf16 or fp16
in and out, fp32 accumulation; K and N multiples of 8 (TMA row strides),
tensors contiguous, on an sm_90 GPU.

The variant (tile shape, stages, cluster) comes from ``gemm_configs.choose``
and its cubin from the persistent cache (``kernel_cache``); both are looked
up once per (shapes, dtype, device), so later calls cost a few microseconds
of host time. It runs on torch's current stream and returns at once.

With torch it is also the custom op ``torch.ops.pipeline_mlir.gemm`` (and
``gemm_out``), with a fake implementation, so ``torch.compile`` (even
``fullgraph=True``) traces it as one node; ``gemm`` itself switches to the
op while torch compiles.
"""

import torch

from pipeline_mlir import runtime
from pipeline_mlir.runtime.bounded import put_bounded

from . import gemm_configs, kernel_cache
from .hopper_gemm_host import HopperGemm

DTYPES = {torch.bfloat16: "bf16", torch.float16: "f16"}
CHIPS = {(9, 0): "sm_90a"}
_variants = {}   # (variant, dtype, ordinal) -> HopperGemm
_picks = {}      # (a.shape, b.shape, dtype, ordinal) -> HopperGemm, at most _PICKS
_PICKS = 4096    # ragged shapes (a serving loop's batch sizes) come and go


def variant_gemm(variant, dtype, device=None):
    """The loaded HopperGemm of one variant (``gemm_configs.VARIANTS``
    name) and dtype ('bf16' / 'f16') on ``device`` (default GPU 0)."""
    device = device or runtime.default_device()
    key = (variant, dtype, device.ordinal)
    found = _variants.get(key)
    if found is None:
        chip = CHIPS.get(tuple(device.cc))
        if chip is None:
            raise RuntimeError(f"pipeline_mlir.gemm runs on Hopper (sm_90) GPUs; "
                               f"{device.name} is {device.sm}")
        image, meta = kernel_cache.get(variant, gemm_configs.VARIANTS[variant], dtype, chip)
        found = _variants[key] = HopperGemm(image, meta, device=device)
    return found


def _select(a, b):
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"gemm: {name} must be a torch tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"gemm: {name} must be 2-D, got shape {tuple(t.shape)}")
        if not t.is_cuda:
            raise ValueError(f"gemm: {name} must be on a CUDA device, got {t.device}")
    dtype = DTYPES.get(a.dtype)
    if dtype is None or b.dtype != a.dtype:
        raise TypeError(f"gemm: a and b must both be bfloat16 or both float16, got "
                        f"{a.dtype} and {b.dtype}")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"gemm: a is {tuple(a.shape)} (M x K) and b is {tuple(b.shape)}; b "
                         "must be N x K (C = A @ B^T; for a K x N b pass b.T.contiguous())")
    device = runtime.default_device(a.get_device())
    (m, k), n = a.shape, b.shape[0]
    variant = gemm_configs.choose(m, n, k, dtype, device.limits.multiprocessors)
    return variant_gemm(variant, dtype, device)


def _gemm(a, b, out):
    try:
        key = (a.shape, b.shape, a.dtype, a.get_device())
        g = _picks.get(key)
    except AttributeError:  # not tensors: _select says so
        g = key = None
    if g is None:
        g = put_bounded(_picks, key, _select(a, b), _PICKS)
    return g.launch(a, b, out, (), None, False)


def gemm(a, b, out=None):
    """C = A @ B^T (see the module doc); returns ``out`` or a new tensor."""
    if torch.compiler.is_compiling():
        if out is None:
            return torch.ops.pipeline_mlir.gemm(a, b)
        torch.ops.pipeline_mlir.gemm_out(a, b, out)
        return out
    return _gemm(a, b, out)


def chosen(a, b):
    """The variant name ``gemm(a, b)`` runs (for reports)."""
    g = _picks.get((a.shape, b.shape, a.dtype, a.get_device())) or _select(a, b)
    return next(v for (v, _, _), x in _variants.items() if x is g)


@torch.library.custom_op("pipeline_mlir::gemm", mutates_args=())
def _gemm_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _gemm(a, b, None)


@_gemm_op.register_fake
def _gemm_fake(a, b):
    torch._check(a.shape[1] == b.shape[1], lambda: "gemm: b must be N x K")
    return a.new_empty(a.shape[0], b.shape[0])


@torch.library.custom_op("pipeline_mlir::gemm_out", mutates_args=("out",))
def _gemm_out_op(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    _gemm(a, b, out)


@_gemm_out_op.register_fake
def _gemm_out_fake(a, b, out):
    return None
