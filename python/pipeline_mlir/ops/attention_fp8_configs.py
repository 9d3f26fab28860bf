"""The FP8 attention forward's configurations: what
``pipeline_mlir.attention_fp8`` runs per head dim and causality
(``variant``), and every one of them (``VARIANTS``, what the kernel cache
builds in family ``attention_fwd``, dtype ``e4m3``). Pure Python: the
benchmarks' bundle builder reads it where torch is not installed.

Each is the bf16 forward's structure (two ping-pong consumer warpgroups of
64 query rows, intra-warpgroup overlap) on e4m3 operands with 128-key
blocks (one 128-byte box row of V^T), and more K/V stages than bf16 fits:
the operands take half the bytes. d 128: three stages (131 KiB); d 256:
three with one Q buffer (225 KiB). Measured on an H200 against two stages
(two Q buffers), same process, alternating rounds: d 128 +0.2% to +7%,
d 256 +1% to +11% over the 8 rows of docs/attention.md ("FP8 forward").
"""

HEAD_DIMS = (128, 256)
DTYPE = "e4m3"
TUNED = {128: dict(stages=3), 256: dict(q_stages=1, stages=3)}


def variant(head_dim, causal):
    """(name, AttentionConfig overrides, without the dtype) of the FP8
    forward for this head dim and causality."""
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"attention_fp8: head_dim must be one of {HEAD_DIMS}, got {head_dim}")
    return (f"fp8_d{head_dim}{'c' if causal else ''}",
            dict(head_dim=head_dim, causal=bool(causal), **TUNED[head_dim]))


VARIANTS = dict(variant(d, c) for d in HEAD_DIMS for c in (False, True))
