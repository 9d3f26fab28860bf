#!/usr/bin/env python3
"""Launch attention forwards on one shape for a profiler to compare them
kernel by kernel: ours (the bundle's 'best' variant of the head dim),
FlashAttention-4's, or any of the bundle's variants by tag (FP8 ones on
e4m3 inputs quantized per tensor, V^T made first). Each is called once per
mode (a profiler replays the kernel it records), in the order given:

    python3 profile_pair.py WHO B H S D [MODES]

WHO: ``ours``, ``fa4``, or ``tags:TAG[,TAG..]`` (bundle tags, e.g.
``tags:fp8 d128,fp8cand d128 px4``: a tag's mode is its own, MODES is not
read); MODES: ``full``, ``causal`` or ``full,causal`` (default ``full``).
With Nsight Compute, the source counters (stall samples per SASS
instruction), warp states and pipe use of each:

    ncu --clock-control none --import-source no -k regex:attn_fwd \\
        --section SourceCounters --section WarpStateStats --section ComputeWorkloadAnalysis \\
        --launch-count 2 -o ours python3 profile_pair.py ours 4 16 4096 128 full,causal
    ncu ... -k regex:Forward --launch-count 2 -o fa4 python3 profile_pair.py fa4 4 16 4096 128 full,causal
    ncu --import ours.ncu-rep --page source --csv --print-source sass > ours-source.csv
    python3 ncu_source_summary.py ours-source.csv      # stall samples by instruction class

Run from an attention bundle (build_bundle.py); FA4 needs flash-attn-4
importable.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def bundle_variant(tag):
    from attention_fwd_host import AttentionFwd

    with open(os.path.join(HERE, "manifest.json")) as f:
        metas = [m for m in json.load(f)["variants"] if m["tag"] == tag]
    if not metas:
        raise SystemExit(f"no variant tagged {tag!r} in the bundle")
    with open(os.path.join(HERE, metas[0]["image"]), "rb") as f:
        return AttentionFwd(f.read(), metas[0])


def main():
    import torch

    who, b, h, s, d = sys.argv[1], *map(int, sys.argv[2:6])
    modes = (sys.argv[6] if len(sys.argv) > 6 else "full").split(",")
    torch.manual_seed(0)
    x = [torch.randn(b, s, h, d, device="cuda") for _ in range(3)]
    q, k, v = (t.to(torch.bfloat16) for t in x)
    calls = []
    if who == "ours":
        from ours import load_ours

        fn = load_ours()
        calls = [(m, lambda c=(m == "causal"): fn(q, k, v, c)) for m in modes]
    elif who == "fa4":
        from flash_attn.cute.interface import flash_attn_func

        calls = [(m, lambda c=(m == "causal"): flash_attn_func(q, k, v, causal=c))
                 for m in modes]
    elif who.startswith("tags:"):
        from attention_fwd_host import fp8_quantize, fp8_v_operand

        (q8, qd), (k8, kd), (v8, vd) = (fp8_quantize(t, torch.float8_e4m3fn) for t in x)
        vt = fp8_v_operand(v8)
        for tag in who[len("tags:"):].split(","):
            attn = bundle_variant(tag)
            if attn.fp8:
                calls.append((tag, lambda a=attn: a(q8, k8, vt, descales=(qd, kd, vd))))
            else:
                calls.append((tag, lambda a=attn: a(q, k, v)))
    else:
        raise SystemExit(f"profile_pair.py: WHO is ours, fa4 or tags:..., got {who!r}")
    for name, call in calls:
        call()
        torch.cuda.synchronize()
        print(f"ran {who if not who.startswith('tags:') else 'bundle'} {name} on "
              f"{(b, h, s, d)}", flush=True)


if __name__ == "__main__":
    main()
