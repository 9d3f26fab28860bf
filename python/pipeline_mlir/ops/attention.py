"""``pipeline_mlir.attention``: scaled dot-product attention on a Hopper
GPU, in ``flash_attn_func``'s layout, forward and backward.

    o = pipeline_mlir.attention(q, k, v, causal=True)
    o, lse = pipeline_mlir.attention(q, k, v, return_lse=True)

``q``: (batch, seqlen_q, heads, head_dim); ``k``, ``v``: (batch, seqlen_k,
kv_heads, head_dim), bfloat16, contiguous, head_dim 64, 128 or 256;
``heads`` a multiple of ``kv_heads`` (grouped-query and multi-query
attention: query head h reads K/V head h // (heads / kv_heads)). ``o`` has
q's shape; ``lse`` is (batch, heads, seqlen_q) float32, the natural log of
each row's softmax denominator (what the backward pass takes). ``causal``
masks bottom-right aligned (query i sees keys up to i + seqlen_k - seqlen_q,
FlashAttention's convention); ``softmax_scale`` defaults to 1/sqrt(head_dim).

The kernel is ``pipeline_mlir.kernels.attention_fwd`` in the configuration
``attention_configs.pick`` chooses for the call's shape (head dim,
causality, GQA group, work units, keys per row); its cubin comes from
the kernel cache (family ``attention_fwd``: compiled on demand where MLIR is
installed, else read from ``PIPELINE_MLIR_CACHE_DIR``). It runs on torch's
current stream and is the torch custom op ``torch.ops.pipeline_mlir.attention``
(``torch.compile(fullgraph=True)`` traces it).

Autograd: the op's backward is registered (``register_autograd``); it is the
custom op ``torch.ops.pipeline_mlir.attention_backward`` (head dims 64, 128
and 256; ``pipeline_mlir.kernels.attention_bwd``, kernel cache family
``attention_bwd``), so ``torch.compile`` traces forward and backward as two
opaque ops. The gradients are those of ``o``: ``lse`` is an output without
a gradient (marked non-differentiable). dK and dV are summed over the query
heads of a GQA group in a fixed order; dQ is accumulated across key blocks
with fp32 atomic adds, so it is not bitwise repeatable.
"""

import math

import torch

from pipeline_mlir import runtime

from . import attention_configs, kernel_cache
from .attention_bwd_host import AttentionBwd
from .attention_fwd_host import AttentionFwd

CHIPS = {(9, 0): "sm_90a"}
_variants = {}   # (variant, dtype, ordinal) -> AttentionFwd / AttentionBwd
# Head dim 128's backward with dQ split by columns between the consumer
# warpgroups (attention_configs.BWD_CANDIDATES): off until measured faster;
# benchmarks/attention/run_attention_bwd.py --dq-split sets it.
BWD_DQ_SPLIT = False
# attention_configs.BWD_OPTIONS turned on in the backward of every head dim
# (the candidates of attention_configs.BWD_CANDIDATES), in place of each
# head dim's measured default (attention_configs.bwd_default_options) while
# not None; benchmarks/attention/run_attention_bwd.py --options sets them
# (() runs the plain configuration).
BWD_OPTIONS = None


def load_variant(name, overrides, dtype, family, device, make, op="pipeline_mlir.attention"):
    """The loaded launcher of one kernel-cache entry on ``device``, made once
    by ``make(image, meta, chip)`` (at most one per variant of the finite
    variant tables, so the table is bounded). Every attention op (bf16
    forward and backward, FP8 forward) loads through here."""
    key = (name, dtype, device.ordinal)
    found = _variants.get(key)
    if found is None:
        chip = CHIPS.get(tuple(device.cc))
        if chip is None:
            raise RuntimeError(f"{op} runs on Hopper (sm_90) GPUs; {device.name} is {device.sm}")
        image, meta = kernel_cache.get(name, overrides, dtype, chip, kernel=family)
        found = _variants[key] = make(image, meta, chip)
    return found


def variant_attention(head_dim, causal, device=None, shape=None):
    """The loaded ``AttentionFwd`` of this head dim and causality: the
    configuration ``attention_configs.pick`` chooses for ``shape`` (batch,
    heads, kv_heads, seqlen_q, seqlen_k), or the head dim's plain one
    without a shape."""
    device = device or runtime.default_device()
    if shape is None:
        name, overrides = attention_configs.variant(head_dim, causal)
    else:
        name, overrides = attention_configs.pick(
            head_dim, causal, *shape, sms=device.limits.multiprocessors)
    return load_variant(name, overrides, "bf16", "attention_fwd", device,
                        lambda image, meta, chip: AttentionFwd(image, meta, device=device))


def variant_attention_bwd(head_dim, causal, device=None, dq_split=False, options=()):
    """The loaded ``AttentionBwd`` of this head dim and causality
    (``dq_split``, ``options``: candidates of ``attention_configs.bwd_variant``)."""
    device = device or runtime.default_device()
    name, overrides = attention_configs.bwd_variant(head_dim, causal, dq_split=dq_split,
                                                    options=options)

    def make(image, meta, chip):
        prep = kernel_cache.get(*attention_configs.bwd_prep_for(head_dim, options), "bf16",
                                chip, kernel="attention_bwd")
        convert = None
        if meta.get("dq_acc_order"):            # its postprocess kernel
            convert = kernel_cache.get(
                *attention_configs.bwd_dq_convert_variant(head_dim, meta.get("block_m", 64)),
                "bf16", chip, kernel="attention_bwd")
        return AttentionBwd(image, meta, prep=prep, device=device, dq_convert=convert)

    return load_variant(name, overrides, "bf16", "attention_bwd", device, make)


def _check(q, k, v):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"attention: {name} must be a torch tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"attention: {name} must be 4-D (batch, seqlen, heads, head_dim), "
                             f"got shape {tuple(t.shape)}")
        if t.dtype != torch.bfloat16:
            raise TypeError(f"attention: {name} must be bfloat16, got {t.dtype}")
        if not t.is_cuda:
            raise ValueError(f"attention: {name} must be on a CUDA device, got {t.device}")
    d = q.shape[3]
    if d not in attention_configs.HEAD_DIMS:
        raise ValueError(f"attention: head_dim must be one of {attention_configs.HEAD_DIMS}, "
                         f"got {d}")
    if k.shape[3] != d or v.shape != k.shape or k.shape[0] != q.shape[0]:
        raise ValueError(f"attention: q {tuple(q.shape)}, k {tuple(k.shape)} and v "
                         f"{tuple(v.shape)} must share batch and head_dim, k and v their shape")
    if q.shape[2] % k.shape[2]:
        raise ValueError(f"attention: heads ({q.shape[2]}) must be a multiple of the K/V "
                         f"heads ({k.shape[2]})")
    if 0 in q.shape or 0 in k.shape:
        raise ValueError("attention: empty q, k or v")


def _attention(q, k, v, causal, softmax_scale):
    _check(q, k, v)
    q, k, v = (t if t.is_contiguous() else t.contiguous() for t in (q, k, v))
    b, sq, h, _ = q.shape
    attn = variant_attention(q.shape[3], causal, runtime.default_device(q.get_device()),
                             shape=(b, h, k.shape[2], sq, k.shape[1]))
    scale = 1.0 / math.sqrt(q.shape[3]) if softmax_scale is None else float(softmax_scale)
    return attn(q, k, v, softmax_scale=scale)


def _needs_grad(*ts):
    return torch.is_grad_enabled() and any(t.requires_grad for t in ts)


def attention(q, k, v, causal=False, softmax_scale=None, return_lse=False):
    """O (and LSE with ``return_lse``) of attention over q, k, v (module doc)."""
    if torch.compiler.is_compiling() or _needs_grad(q, k, v):
        # Through the custom op: autograd records it (and its backward).
        o, lse = torch.ops.pipeline_mlir.attention(q, k, v, causal, softmax_scale)
    else:
        o, lse = _attention(q, k, v, causal, softmax_scale)
    return (o, lse) if return_lse else o


@torch.library.custom_op("pipeline_mlir::attention", mutates_args=())
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                  softmax_scale: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    return _attention(q, k, v, causal, softmax_scale)


@_attention_op.register_fake
def _attention_fake(q, k, v, causal, softmax_scale):
    b, s, h, _ = q.shape
    return torch.empty_like(q), q.new_empty(b, h, s, dtype=torch.float32)


def _attention_backward(do, q, k, v, o, lse, causal, softmax_scale):
    d = q.shape[3]
    if d not in attention_configs.BWD_HEAD_DIMS:
        raise ValueError(f"attention backward: head_dim must be one of "
                         f"{attention_configs.BWD_HEAD_DIMS}, got {d}")
    do, q, k, v, o = (t if t.is_contiguous() else t.contiguous() for t in (do, q, k, v, o))
    options = (attention_configs.bwd_default_options(d, causal) if BWD_OPTIONS is None
               else BWD_OPTIONS)
    split = BWD_DQ_SPLIT and d == 128
    bwd = variant_attention_bwd(d, causal, runtime.default_device(q.get_device()),
                                dq_split=split,
                                # the dq_split candidate runs alone, as it was measured
                                options=() if split else options)
    scale = 1.0 / math.sqrt(d) if softmax_scale is None else float(softmax_scale)
    return bwd(q, k, v, o, lse, do.to(torch.bfloat16), softmax_scale=scale)


@torch.library.custom_op("pipeline_mlir::attention_backward", mutates_args=())
def _attention_backward_op(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor,
                           v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, causal: bool,
                           softmax_scale: float | None
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _attention_backward(do, q, k, v, o, lse, causal, softmax_scale)


@_attention_backward_op.register_fake
def _attention_backward_fake(do, q, k, v, o, lse, causal, softmax_scale):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    q, k, v, causal, softmax_scale = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.causal, ctx.softmax_scale = causal, softmax_scale
    ctx.mark_non_differentiable(lse)


def _backward(ctx, do, dlse):
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = torch.ops.pipeline_mlir.attention_backward(
        do, q, k, v, o, lse, ctx.causal, ctx.softmax_scale)
    return dq, dk, dv, None, None


_attention_op.register_autograd(_backward, setup_context=_setup_context)
