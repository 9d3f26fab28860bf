#!/usr/bin/env python3
"""Launch one attention variant of a bundle a few times (for a profiler such
as Nsight Compute to attach to): ``python3 profile_one.py TAG B H S D``."""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    import torch
    from check_attention import load

    tag, b, h, s, d = sys.argv[1], *map(int, sys.argv[2:6])
    with open(os.path.join(HERE, "manifest.json")) as f:
        metas = [m for m in json.load(f)["variants"] if m["tag"] == tag]
    if not metas:
        raise SystemExit(f"no variant tagged {tag!r}")
    attn = load(metas[0])
    q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        attn(q, k, v)
    torch.cuda.synchronize()
    print(f"ran {metas[0]['name']}")


if __name__ == "__main__":
    main()
