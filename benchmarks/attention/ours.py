"""Our attention forward as the benchmark calls it: ``load_ours()`` returns
``fn(q, k, v, causal) -> (o, lse)`` on (b, s, h, d) bf16 CUDA tensors, O of
the same shape and layout, LSE as (b, h, s) fp32 natural-log (the layout
FlashAttention returns and the benchmark checks).

It calls ``attention_forward(q, k, v, causal=...)`` of the attention
example's host module (``attention_fwd_host`` in examples/), which runs the
cubins compiled ahead of time (the GPU host has no MLIR). This file is the one place the benchmark
knows that interface; a change there is adapted here.
"""

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(REPO, "examples")


def load_ours():
    """The adapter; raises ImportError (with the reason) when the host side
    of the attention example is not there."""
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    try:
        import attention_fwd_host
    except ImportError as e:
        raise ImportError(f"examples/attention_fwd_host.py does not import: {e}") from e

    def ours(q, k, v, causal):
        o, lse = attention_fwd_host.attention_forward(q, k, v, causal=causal)
        b, s, h, _ = q.shape
        if lse is not None and tuple(lse.shape) == (b, s, h):
            lse = lse.permute(0, 2, 1)
        return o, lse

    return ours
