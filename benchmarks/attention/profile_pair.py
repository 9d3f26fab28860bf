#!/usr/bin/env python3
"""Launch our attention forward and FlashAttention-4's on the same tensors,
a few times each, for a profiler to compare them kernel by kernel:

    ncu --kernel-name regex:attn_fwd --launch-skip 2 --launch-count 1 \\
        --section SpeedOfLight --section WarpStateStats python3 profile_pair.py ours 4 16 4096 128
    ncu --kernel-name regex:flash --launch-skip 2 --launch-count 1 ... profile_pair.py fa4 4 16 4096 128

Run from an attention bundle (build_bundle.py); FA4 needs flash-attn-4 importable.
"""

import sys

from ours import load_ours


def main():
    import torch

    who, b, h, s, d = sys.argv[1], *map(int, sys.argv[2:6])
    causal = len(sys.argv) > 6 and sys.argv[6] == "causal"
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    if who == "ours":
        fn = load_ours()
        call = lambda: fn(q, k, v, causal)  # noqa: E731
    else:
        from flash_attn.cute.interface import flash_attn_func
        call = lambda: flash_attn_func(q, k, v, causal=causal)  # noqa: E731
    for _ in range(4):
        call()
    torch.cuda.synchronize()
    print(f"ran {who} x4")


if __name__ == "__main__":
    main()
