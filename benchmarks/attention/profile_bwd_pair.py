#!/usr/bin/env python3
"""Run our attention backward or FlashAttention-4's a few times on the same
kind of tensors, for a profiler to compare the two main kernels:

    ncu --clock-control none --set full -k regex:attn_bwd_d --launch-skip 1 --launch-count 1 \\
        -o ours python3 profile_bwd_pair.py ours 4 16 4096 128
    ncu --clock-control none --set full -k regex:BackwardSm90 --launch-skip 1 --launch-count 1 \\
        -o fa4 python3 profile_bwd_pair.py fa4 4 16 4096 128

(``attn_bwd_d``: our main kernel, not its preprocess ``attn_bwd_prep``;
``BackwardSm90``: FA4's main backward kernel, not its pre/postprocess.)
``ours+OPTION+...`` runs our backward with ``attention_configs.BWD_OPTIONS``
on, one of the kernel cache's candidates (``bwd_option_sets`` of the head
dim), e.g. ``ours+dq_split+dq_deferred+dq_double_buffer+min_ctas`` at d 128.
Run it from the backward bundle (build_bwd_bundle.py); FA4 needs
flash-attn-4 importable. ``causal`` as a sixth argument masks.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    import torch

    who, b, h, s, d = sys.argv[1], *map(int, sys.argv[2:6])
    causal = len(sys.argv) > 6 and sys.argv[6] == "causal"
    torch.manual_seed(0)
    q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
                   for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_()
    if who.split("+")[0] == "ours":
        import importlib

        os.environ.setdefault("PIPELINE_MLIR_CACHE_DIR", os.path.join(HERE, "gemm-cache"))
        import pipeline_mlir

        options = tuple(who.split("+")[1:])
        if options:
            from pipeline_mlir.ops import attention_configs

            if set(options) not in [set(o) for o in attention_configs.bwd_option_sets(d)]:
                raise SystemExit(f"profile_bwd_pair: {'+'.join(options)} is no candidate at "
                                 f"d {d}: {attention_configs.bwd_option_sets(d)}")
            # The op reads its options when the backward runs.
            importlib.import_module("pipeline_mlir.ops.attention").BWD_OPTIONS = options
        o = pipeline_mlir.attention(q, k, v, causal=causal)
    else:
        from flash_attn.cute.interface import flash_attn_func

        o = flash_attn_func(q, k, v, causal=causal)
        o = o[0] if isinstance(o, tuple) else o
    # Three backward passes: the profiler skips the first (a cold start
    # for the peer's compiled kernel cache) and records the second.
    for _ in range(3):
        torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
    torch.cuda.synchronize()
    print(f"ran {who} backward x3 on {(b, h, s, d)} causal={causal}")


if __name__ == "__main__":
    main()
