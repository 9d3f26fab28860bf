"""The FP8 attention forward's configurations: what
``pipeline_mlir.attention_fp8`` runs per head dim and causality
(``variant``), and every one of them (``VARIANTS``, what the kernel cache
builds in family ``attention_fwd``, dtype ``e4m3``). Pure Python: the
benchmarks' bundle builder reads it where torch is not installed.

Each is the bf16 forward's default (two ping-pong consumer warpgroups of
64 query rows, intra-warpgroup overlap, two K/V stages) on e4m3 operands
with 128-key blocks: one 128-byte box row of V^T, the smallest block V^T's
K-major layout allows with the 128-byte swizzle. Not tuned by a sweep yet;
docs/attention.md ("FP8 forward") has the measured rows.
"""

HEAD_DIMS = (128, 256)
DTYPE = "e4m3"


def variant(head_dim, causal):
    """(name, AttentionConfig overrides, without the dtype) of the FP8
    forward for this head dim and causality."""
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"attention_fp8: head_dim must be one of {HEAD_DIMS}, got {head_dim}")
    return (f"fp8_d{head_dim}{'c' if causal else ''}",
            dict(head_dim=head_dim, causal=bool(causal)))


VARIANTS = dict(variant(d, c) for d in HEAD_DIMS for c in (False, True))
