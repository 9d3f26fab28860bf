"""``pipeline_mlir.gemm(a, b, bias=None, activation=None, residual=None,
alpha=1.0, out=None)``: one call for a matrix product on a Hopper GPU, the
kernel variant chosen by shape and dtype, with an optional fused epilogue.

    c = pipeline_mlir.gemm(a, b)          # C = A @ B^T: a is M x K, b is N x K
    pipeline_mlir.gemm(a, b, out=c)       # into an M x N tensor
    c = pipeline_mlir.gemm(a, b, bias=bias, activation="gelu_erf", residual=x, alpha=0.5)
    #   C = gelu(0.5 * (A @ B^T) + bias + x), in the kernel's registers

The epilogue (``epilogues.Epilogue``): ``alpha`` a number (an f32 kernel
argument: one compiled kernel serves every value), ``bias`` an (N,) tensor
of the inputs' dtype or float32, ``residual`` an M x N contiguous tensor of
the output's dtype (it may be ``out`` itself; other overlaps are not
allowed), ``activation`` one of ``ACTIVATIONS`` ('relu', 'gelu_tanh' =
``gelu(approximate='tanh')``, 'gelu_erf' = ``gelu``, 'silu'). Each
combination is its own kernel variant, compiled on demand where MLIR is
installed (``scripts/build-gemm-cache.py --epilogue`` fills a cache for a
GPU host without it). A call without an epilogue takes the same path, at
the same cost, as before epilogues existed.

The layout is ``torch.nn.functional.linear``'s (``b`` holds one output
column per row, K contiguous), which is what the tensor cores read without
a transpose: ``gemm(a, b)`` equals ``torch.matmul(a, b.T)``. For a
``torch.matmul``-style K x N ``b``, pass ``b.T.contiguous()``. bf16 or fp16
in and out, fp32 accumulation; K and N multiples of 8 (TMA row strides),
tensors contiguous, on an sm_90 GPU.

The variant (tile shape, stages, cluster) comes from ``gemm_configs.choose``
and its cubin from the persistent cache (``kernel_cache``); both are looked
up once per (shapes, dtype, device), so later calls cost a few microseconds
of host time. It runs on torch's current stream and returns at once. A
narrow output with a long K may take a split-K variant: two launches, the
GEMM into an fp32 workspace and a reduction (with the epilogue, if any)
into C, bitwise the same every run (``splitk_host``; docs/gemm.md). A
shape whose tiles leave the last wave part-empty may take a stream-K
variant: one launch, the leftover tiles' K blocks shared by all SMs, their
partial sums added in a fixed order (``streamk_host``; bitwise the same
every run too). A fused epilogue (no residual) on a shape of at least four
128x128 tiles per SM with K rows of whole L2 sectors runs the ping-pong
kernel: two consumer warpgroups on their own tiles, one's mainloop during
the other's epilogue (``gemm_configs.choose_pingpong``); other fused gelu
tanh or silu calls of enough tiles may run two CTAs of 128x128 per SM
(``gemm_configs.choose_two_ctas``).

With torch it is also the custom op ``torch.ops.pipeline_mlir.gemm`` (and
``gemm_out``), with a fake implementation, so ``torch.compile`` (even
``fullgraph=True``) traces it as one node; ``gemm`` itself switches to the
op while torch compiles.
"""

from typing import Optional

import torch

from pipeline_mlir import runtime
from pipeline_mlir.runtime.bounded import put_bounded

from . import gemm_configs, kernel_cache
from .epilogues import ACTIVATIONS, ALPHA_PARAM, Epilogue
from .hopper_gemm_host import HopperGemm
from .splitk_host import Reducer, SplitKGemm
from .streamk_host import StreamKGemm

DTYPES = {torch.bfloat16: "bf16", torch.float16: "f16"}
CHIPS = {(9, 0): "sm_90a"}
_variants = {}   # (variant name, dtype, ordinal) -> HopperGemm (SplitKGemm for split-K)
_picks = {}      # (a.shape, b.shape, dtype, ordinal) -> HopperGemm, at most _PICKS
_fused_picks = {}  # the same key + the epilogue's -> (HopperGemm, extra names), bounded too
_PICKS = 4096    # ragged shapes (a serving loop's batch sizes) come and go
_FUSED_PICKS = 1024


def variant_gemm(variant, dtype, device=None, epilogue=None):
    """The loaded HopperGemm of one variant (``gemm_configs.VARIANTS``
    name) and dtype ('bf16' / 'f16') on ``device`` (default GPU 0), with
    the fused ``epilogue`` (an ``epilogues.Epilogue``) if given."""
    device = device or runtime.default_device()
    if gemm_configs.splits_of(variant) > 1 and epilogue is not None \
            and not epilogue.is_identity:
        return _split_fused(variant, dtype, device, epilogue)
    name, overrides = gemm_configs.fused(variant, epilogue)
    key = (name, dtype, device.ordinal)
    found = _variants.get(key)
    if found is None:
        chip = CHIPS.get(tuple(device.cc))
        if chip is None:
            raise RuntimeError(f"pipeline_mlir.gemm runs on Hopper (sm_90) GPUs; "
                               f"{device.name} is {device.sm}")
        image, meta = kernel_cache.get(name, overrides, dtype, chip)
        found = HopperGemm(image, meta, device=device)
        if overrides.get("split_k", 1) > 1:
            found = SplitKGemm(found, lambda s: _reducer(s, dtype, chip, device),
                               getattr(torch, _TORCH_DTYPES[dtype]))
        elif overrides.get("stream_k"):
            found = StreamKGemm(found)
        _variants[key] = found
    return found


_TORCH_DTYPES = {"bf16": "bfloat16", "f16": "float16"}


def _reducer(splits, dtype, chip, device, epilogue=None):
    """The loaded split-K reduction summing ``splits`` partials into
    ``dtype``, with the fused ``epilogue`` if any (kernels/splitk_reduce.py,
    from the kernel cache: ``gemm_configs.reduction``)."""
    name, overrides = gemm_configs.reduction(splits, epilogue)
    image, meta = kernel_cache.get(name, overrides, dtype, chip, kernel="splitk_reduce")
    return Reducer(image, meta, device)


def _split_fused(variant, dtype, device, epilogue):
    """A split-K variant with a fused epilogue: the same GEMM kernel as
    without it (the epilogue is not linear: it cannot run on partial sums),
    the epilogue in the reduction."""
    key = (f"{variant}_{epilogue.tag}", dtype, device.ordinal)
    found = _variants.get(key)
    if found is None:
        plain = variant_gemm(variant, dtype, device)
        chip = CHIPS[tuple(device.cc)]
        found = _variants[key] = SplitKGemm(
            plain.gemm, lambda s: _reducer(s, dtype, chip, device, epilogue),
            getattr(torch, _TORCH_DTYPES[dtype]), epilogue.param_names())
    return found


def _select(a, b):
    return variant_gemm(*_variant_of(a, b))


def _variant_of(a, b, split=None, stream_k=None, fused=False, activation=None,
                residual=False):
    """(variant name, dtype, device) for these operands, every check run;
    ``split=False``: never a split-K variant; ``stream_k=False``: never a
    stream-K one; ``fused``: the pick of a call with a fused epilogue, with
    this ``activation`` and ``residual`` or not (``gemm_configs.choose``)."""
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
    variant = gemm_configs.choose(m, n, k, dtype, device.limits.multiprocessors, split,
                                  stream_k, fused, activation, residual)
    return variant, dtype, device


def _gemm(a, b, out):
    try:
        key = (a.shape, b.shape, a.dtype, a.get_device())
        g = _picks.get(key)
    except AttributeError:  # not tensors: _select says so
        g = key = None
    if g is None:
        g = put_bounded(_picks, key, _select(a, b), _PICKS)
    return g.launch(a, b, out, (), None, False)


def _epilogue_of(a, b, bias, activation, residual, alpha):
    """The Epilogue these arguments ask for, every argument checked (the
    messages name the rule); the shapes of ``bias`` and ``residual`` are
    checked per call by ``_check_epilogue_tensors``."""
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"gemm: activation must be None or one of {', '.join(ACTIVATIONS)} "
                         f"(gelu_erf is torch's gelu, gelu_tanh its approximate='tanh'), "
                         f"got {activation!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise TypeError(f"gemm: alpha must be a Python number (it is passed to the kernel as "
                        f"an f32), got {type(alpha).__name__}")
    bias_dtype = ""
    if bias is not None:
        if not isinstance(bias, torch.Tensor):
            raise TypeError(f"gemm: bias must be a torch tensor, got {type(bias).__name__}")
        if bias.dtype == torch.float32:
            bias_dtype = "f32"
        elif bias.dtype != a.dtype:
            raise TypeError(f"gemm: bias must be {a.dtype} (the output's dtype) or "
                            f"torch.float32, got {bias.dtype}")
    if residual is not None and not isinstance(residual, torch.Tensor):
        raise TypeError(f"gemm: residual must be a torch tensor, got {type(residual).__name__}")
    return Epilogue(alpha=1.0 if alpha == 1 else ALPHA_PARAM,
                    bias=None if bias is None else "col", bias_dtype=bias_dtype,
                    activation=activation, residual=residual is not None)


def _check_epilogue_tensors(a, b, bias, residual):
    """Per call (the tensors change, the kernel's cached launch does not
    see their shapes): shapes, contiguity, device."""
    m, n = a.shape[0], b.shape[0]
    if bias is not None:
        if tuple(bias.shape) != (n,) or not bias.is_contiguous():
            raise ValueError(f"gemm: bias must be a contiguous vector of N = {n} values (one "
                             f"per output column), got shape {tuple(bias.shape)}"
                             f"{'' if bias.is_contiguous() else ', not contiguous'}")
        if bias.device != a.device:
            raise ValueError(f"gemm: bias is on {bias.device}, a on {a.device}")
    if residual is not None:
        if tuple(residual.shape) != (m, n) or not residual.is_contiguous():
            raise ValueError(f"gemm: residual must be a contiguous M x N = {m} x {n} tensor "
                             f"(the output's shape), got shape {tuple(residual.shape)}"
                             f"{'' if residual.is_contiguous() else ', not contiguous'}")
        if residual.dtype != a.dtype:
            raise TypeError(f"gemm: residual must be {a.dtype} (the output's dtype), got "
                            f"{residual.dtype}")
        if residual.device != a.device:
            raise ValueError(f"gemm: residual is on {residual.device}, a on {a.device}")


def _gemm_fused(a, b, out, bias, activation, residual, alpha):
    """``_gemm`` with an epilogue: the variant of the shape (the same pick
    as without one) built with the epilogue, found once per (shapes,
    dtype, device, epilogue); the extra arguments passed by name."""
    try:
        key = (a.shape, b.shape, a.dtype, a.get_device(), activation,
               None if bias is None else bias.dtype, residual is None, alpha == 1)
        found = _fused_picks.get(key)
    except (AttributeError, TypeError):  # not tensors, unhashable: the checks say so
        found = key = None
    if found is None:
        # The pick without an epilogue (for split-K, the reduction applies
        # it), stream-K and the tiles that spill with an epilogue aside, or
        # two CTAs per SM for an activation (gemm_configs.choose_two_ctas)
        variant, dtype, device = _variant_of(a, b, fused=True, activation=activation,
                                             residual=residual is not None)
        epi = _epilogue_of(a, b, bias, activation, residual, alpha)
        _check_epilogue_tensors(a, b, bias, residual)  # before a compile on demand
        g = variant_gemm(variant, dtype, device, epi)
        found = (g, g.extra_names)
        if key is not None:
            put_bounded(_fused_picks, key, found, _FUSED_PICKS)
    else:
        _check_epilogue_tensors(a, b, bias, residual)
    g, names = found
    given = {"alpha": float(alpha), "bias": bias, "residual": residual}
    return g.launch(a, b, out, {name: given[name] for name in names}, None, False)


def gemm(a, b, bias=None, activation=None, residual=None, alpha=1.0, out=None):
    """C = act(alpha * A @ B^T + bias + residual) (see the module doc);
    returns ``out`` or a new tensor."""
    if torch.compiler.is_compiling():
        if out is None:
            return torch.ops.pipeline_mlir.gemm(a, b, bias, activation, residual, alpha)
        torch.ops.pipeline_mlir.gemm_out(a, b, out, bias, activation, residual, alpha)
        return out
    if bias is None and activation is None and residual is None and alpha == 1.0:
        return _gemm(a, b, out)
    return _gemm_fused(a, b, out, bias, activation, residual, alpha)


def chosen_variant(g):
    """The variant name (with its epilogue's tag, if any) of a loaded
    HopperGemm of this module."""
    return next(v for (v, _, _), x in _variants.items() if x is g)


def chosen(a, b):
    """The variant name ``gemm(a, b)`` runs (for reports)."""
    return chosen_variant(_picks.get((a.shape, b.shape, a.dtype, a.get_device()))
                          or _select(a, b))


def _gemm_any(a, b, out, bias, activation, residual, alpha):
    if bias is None and activation is None and residual is None and alpha == 1.0:
        return _gemm(a, b, out)
    return _gemm_fused(a, b, out, bias, activation, residual, alpha)


@torch.library.custom_op("pipeline_mlir::gemm", mutates_args=())
def _gemm_op(a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor] = None,
             activation: Optional[str] = None, residual: Optional[torch.Tensor] = None,
             alpha: float = 1.0) -> torch.Tensor:
    return _gemm_any(a, b, None, bias, activation, residual, alpha)


def _fake_checks(a, b, bias, activation, residual):
    torch._check(a.shape[1] == b.shape[1], lambda: "gemm: b must be N x K")
    torch._check(activation is None or activation in ACTIVATIONS,
                 lambda: f"gemm: activation must be None or one of {', '.join(ACTIVATIONS)}")
    if bias is not None:
        torch._check(bias.dim() == 1 and bias.shape[0] == b.shape[0],
                     lambda: "gemm: bias must have N values (one per output column)")
    if residual is not None:
        torch._check(residual.dim() == 2 and residual.shape[0] == a.shape[0]
                     and residual.shape[1] == b.shape[0],
                     lambda: "gemm: residual must be M x N (the output's shape)")


@_gemm_op.register_fake
def _gemm_fake(a, b, bias=None, activation=None, residual=None, alpha=1.0):
    _fake_checks(a, b, bias, activation, residual)
    return a.new_empty(a.shape[0], b.shape[0])


@torch.library.custom_op("pipeline_mlir::gemm_out", mutates_args=("out",))
def _gemm_out_op(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
                 bias: Optional[torch.Tensor] = None, activation: Optional[str] = None,
                 residual: Optional[torch.Tensor] = None, alpha: float = 1.0) -> None:
    _gemm_any(a, b, out, bias, activation, residual, alpha)


@_gemm_out_op.register_fake
def _gemm_out_fake(a, b, out, bias=None, activation=None, residual=None, alpha=1.0):
    _fake_checks(a, b, bias, activation, residual)
    return None
