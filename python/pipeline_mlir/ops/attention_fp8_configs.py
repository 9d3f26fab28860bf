"""The FP8 attention forward's configurations: what
``pipeline_mlir.attention_fp8`` runs per head dim and causality
(``variant``), and every one of them (``VARIANTS``, what the kernel cache
builds in family ``attention_fwd``, dtype ``e4m3``). Pure Python: the
benchmarks' bundle builder reads it where torch is not installed.

Each is the bf16 forward's structure (two ping-pong consumer warpgroups of
64 query rows, intra-warpgroup overlap) on e4m3 operands, with more K/V
stages than bf16 fits (the operands take half the bytes):

- d 128: 192-key blocks (V^T in three 64-byte swizzled boxes), three stages
  (176 KiB). On an H200 (run 2 of docs/attention.md, "FP8 forward"), same
  process, alternating rounds, against 128-key blocks with three stages:
  +3% to +13% on the 4 rows (b 2-4, s 8192-16384, full and causal); 256-key
  blocks and three consumer warpgroups spill registers.
- d 256: 128-key blocks (one 128-byte box row of V^T), three stages with one
  Q buffer (225 KiB). Against two stages with two Q buffers the two runs
  disagree (run 1: +1% to +11% on the 4 rows; run 2: -0.4% to -2%): a
  difference within what changes between machines.
"""

HEAD_DIMS = (128, 256)
DTYPE = "e4m3"
TUNED = {128: dict(block_n=192, stages=3), 256: dict(q_stages=1, stages=3)}


def variant(head_dim, causal):
    """(name, AttentionConfig overrides, without the dtype) of the FP8
    forward for this head dim and causality."""
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"attention_fp8: head_dim must be one of {HEAD_DIMS}, got {head_dim}")
    return (f"fp8_d{head_dim}{'c' if causal else ''}",
            dict(head_dim=head_dim, causal=bool(causal), **TUNED[head_dim]))


VARIANTS = dict(variant(d, c) for d in HEAD_DIMS for c in (False, True))
