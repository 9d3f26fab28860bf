"""Our attention forward as the benchmark calls it: ``load_ours(folder)``
returns ``fn(q, k, v, causal) -> (o, lse)`` on (b, s, h, d) bf16 CUDA
tensors, O of the same shape and layout, LSE as (b, h, s) fp32 natural-log
(the layout FlashAttention returns and the benchmark checks).

It runs the attention bundle (benchmarks/attention/build_bundle.py): the
kernels compiled ahead of time, listed in the bundle's ``manifest.json``,
launched by the example's host module (``attention_fwd_host.AttentionFwd``,
copied into the bundle); the GPU host has no MLIR. Each (head dim, causal)
uses the bundle's chosen variant, tagged ``best``. This file is the one place
the benchmark knows that interface.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load_ours(folder=HERE):
    """The adapter; raises FileNotFoundError / ImportError (with the reason)
    when ``folder`` is not an attention bundle."""
    manifest_path = os.path.join(folder, "manifest.json")
    if not os.path.exists(manifest_path):
        raise FileNotFoundError(
            f"{manifest_path} is missing: run the benchmark from an attention bundle "
            "(benchmarks/attention/build_bundle.py)")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    from attention_fwd_host import AttentionFwd

    with open(manifest_path) as f:
        manifest = json.load(f)
    chosen = {}
    for meta in manifest["variants"]:
        if meta["tag"].startswith("best"):
            key = (meta["head_dim"], bool(meta["causal"]))
            with open(os.path.join(folder, meta["image"]), "rb") as f:
                chosen[key] = AttentionFwd(f.read(), meta)

    def ours(q, k, v, causal):
        key = (q.shape[3], bool(causal))
        if key not in chosen:
            raise KeyError(f"the bundle has no 'best' variant for head_dim {key[0]}, "
                           f"causal={key[1]} (it has {sorted(chosen)})")
        return chosen[key](q, k, v)

    return ours
