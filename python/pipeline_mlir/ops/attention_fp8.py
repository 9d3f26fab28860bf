"""``pipeline_mlir.attention_fp8``: the FP8 (e4m3) attention forward on a
Hopper GPU, in ``flash_attn_func``'s layout.

    o = pipeline_mlir.attention_fp8(q8, k8, v8, q_descale, k_descale, v_descale,
                                    causal=True)

``q8``: (batch, seqlen_q, heads, head_dim), ``k8``, ``v8``: (batch,
seqlen_k, kv_heads, head_dim), ``torch.float8_e4m3fn``, head_dim 128 or 256,
``heads`` a multiple of ``kv_heads``; the descales are per tensor (``x ~ x8 *
x_descale``: floats or one-element fp32 CUDA tensors, read on the device, so
no host sync). The result is attention of the dequantized inputs::

    O = softmax(softmax_scale * (q_descale Q8)(k_descale K8)^T [+ causal]) (v_descale V8)

``o`` is bfloat16 with q's shape; ``lse`` (``return_lse=True``) is (batch,
heads, seqlen_q) float32, natural log. Without ``return_lse`` (the
default) head dim 128 runs a faster kernel (P's row sum on the tensor
pipe, over P as rounded to e4m3: O within the same bound, the LSE it
would give not within 0.01), so O with and without ``return_lse`` may
differ in the last bits. ``causal`` is bottom-right aligned
and ``softmax_scale`` defaults to 1/sqrt(head_dim), as ``attention``'s.
Forward only (no autograd).

V's contract: an 8-bit wgmma reads its B operand K-major only, and P V's K
is the keys, so the kernel reads V^T (keys contiguous) with its keys
permuted within every 32 so that P's register operand needs no shuffles
(``kernels/attention_fwd/__init__.py``, "FP8"). The op makes that operand from
``v8`` (``attention_fwd_host.fp8_v_operand``: one pass over V, a transpose
and a gather); a caller that reuses V (a KV cache) makes it once and passes
``vt=fp8_v_operand(v8)`` with ``v8=None``.

The kernel is ``pipeline_mlir.kernels.attention_fwd`` with ``dtype='e4m3'``
in the configuration ``attention_fp8_configs.variant`` gives for the head
dim and causality; its cubin comes from the kernel cache (family
``attention_fwd``, dtype ``e4m3``).
"""

import math

import torch

from pipeline_mlir import runtime

from .attention import load_variant
from .attention_fp8_configs import DTYPE, HEAD_DIMS, VARIANTS, variant
from .attention_fwd_host import AttentionFwd, fp8_v_operand


def variant_attention_fp8(head_dim, causal, device=None, lse=True):
    """The loaded FP8 ``AttentionFwd`` of this head dim and causality;
    ``lse=False``: the configuration for callers that do not take the LSE
    (``attention_fp8_configs.variant``)."""
    device = device or runtime.default_device()
    name, overrides = variant(head_dim, causal, lse)
    return load_variant(name, overrides, DTYPE, "attention_fwd", device,
                        lambda image, meta, chip: AttentionFwd(image, meta, device=device),
                        op="pipeline_mlir.attention_fp8")


def _descale(x, name, device):
    if isinstance(x, torch.Tensor):
        if x.numel() != 1:
            raise ValueError(f"attention_fp8: {name} must be per tensor (one element), got "
                             f"shape {tuple(x.shape)}")
        return x.to(device=device, dtype=torch.float32).reshape(1)
    if isinstance(x, (int, float)):
        return torch.full((1,), float(x), dtype=torch.float32, device=device)
    raise TypeError(f"attention_fp8: {name} must be a float or a one-element tensor, got "
                    f"{type(x).__name__}")


def _check(q, k, v, vt):
    e4m3 = torch.float8_e4m3fn
    for name, t in (("q", q), ("k", k), ("v", v), ("vt", vt)):
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"attention_fp8: {name} must be a torch tensor, got "
                            f"{type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"attention_fp8: {name} must be 4-D, got shape {tuple(t.shape)}")
        if t.dtype != e4m3:
            raise TypeError(f"attention_fp8: {name} must be float8_e4m3fn, got {t.dtype}")
        if not t.is_cuda:
            raise ValueError(f"attention_fp8: {name} must be on a CUDA device, got {t.device}")
    if (v is None) == (vt is None):
        raise ValueError("attention_fp8: give v (batch, seqlen_k, kv_heads, head_dim) or "
                         "vt=fp8_v_operand(v), one of them")
    d = q.shape[3]
    if d not in HEAD_DIMS:
        raise ValueError(f"attention_fp8: head_dim must be one of {HEAD_DIMS}, got {d}")
    if k.shape[3] != d or k.shape[0] != q.shape[0] or (v is not None and v.shape != k.shape):
        raise ValueError(f"attention_fp8: q {tuple(q.shape)}, k {tuple(k.shape)} and v "
                         f"must share batch and head_dim, k and v their shape")
    if q.shape[2] % k.shape[2]:
        raise ValueError(f"attention_fp8: heads ({q.shape[2]}) must be a multiple of the "
                         f"K/V heads ({k.shape[2]})")
    if 0 in q.shape or 0 in k.shape:
        raise ValueError("attention_fp8: empty q, k or v")


def attention_fp8(q, k, v, q_descale, k_descale, v_descale, causal=False,
                  softmax_scale=None, return_lse=False, vt=None):
    """O (and LSE with ``return_lse``) of attention over the dequantized
    q, k, v (module doc); ``vt``: V already as ``fp8_v_operand(v)`` (then
    ``v`` is None)."""
    _check(q, k, v, vt)
    q, k = (t if t.is_contiguous() else t.contiguous() for t in (q, k))
    device = q.device
    descales = tuple(_descale(x, n, device) for x, n in (
        (q_descale, "q_descale"), (k_descale, "k_descale"), (v_descale, "v_descale")))
    if vt is None:
        vt = fp8_v_operand(v)
    # Without return_lse the d 128 kernel sums P on the tensor pipe (O holds
    # its bound, the LSE it stores does not: attention_fp8_configs).
    attn = variant_attention_fp8(q.shape[3], causal, runtime.default_device(q.get_device()),
                                 lse=bool(return_lse))
    scale = 1.0 / math.sqrt(q.shape[3]) if softmax_scale is None else float(softmax_scale)
    o, lse = attn(q, k, vt, softmax_scale=scale, descales=descales)
    return (o, lse) if return_lse else o


__all__ = ["attention_fp8", "fp8_v_operand", "VARIANTS", "variant"]
