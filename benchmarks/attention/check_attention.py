#!/usr/bin/env python3
"""On a GPU host, in a bundle built by build_bundle.py: check every attention
variant against fp32 attention over a grid of shapes (ragged sequence
lengths, GQA/MQA, seqlen_q != seqlen_k), then a quick timing of the best
variants next to torch SDPA (cuDNN), same tensors, alternating rounds.

    python3 check_attention.py [--out DIR] [--no-timing]
"""

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# The benchmark's rows and timing (run_attention.py, in the same bundle).
from run_attention import ITERS, WARMUP, ROWS as TIMED  # noqa: E402
from timing import time_interleaved  # noqa: E402

# (batch, seqlen_q, seqlen_k, heads, heads_kv)
GRID = [(2, 512, 512, 4, 4), (1, 1000, 1000, 3, 3), (1, 333, 517, 4, 2),
        (2, 256, 256, 8, 1), (1, 127, 255, 2, 2), (1, 300, 77, 2, 1), (1, 1, 64, 2, 2)]


def load(meta):
    from attention_fwd_host import AttentionFwd
    with open(os.path.join(HERE, meta["image"]), "rb") as f:
        return AttentionFwd(f.read(), meta)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-timing", action="store_true")
    args = ap.parse_args()
    import torch
    from attention_fwd_host import check

    with open(os.path.join(HERE, "manifest.json")) as f:
        manifest = json.load(f)
    results, failed = [], 0
    print(f"GPU: {torch.cuda.get_device_name()}")
    for meta in manifest["variants"]:
        attn = load(meta)
        group = meta.get("pack_gqa", 0)
        for shape in GRID:
            if group:
                # A packed variant runs g query heads per K/V head only.
                b, sq, sk, h, hk = shape
                shape = (b, sq, sk, group * hk, hk)
            try:
                err, lerr = check(attn, *shape)
                status = "ok"
            except AssertionError as e:
                status, err, lerr = f"FAIL {e}", None, None
                failed += 1
            except Exception as e:  # a launch error names the variant
                status, err, lerr = f"ERROR {type(e).__name__}: {e}", None, None
                failed += 1
            print(f"CHECK {meta['tag']:28s} {str(shape):28s} {status} "
                  f"o_err={err} lse_err={lerr}", flush=True)
            results.append({"tag": meta["tag"], "shape": shape, "status": status})
    if not args.no_timing:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        by_row = {}
        for m in manifest["variants"]:
            if m["tag"].startswith(("best", "sweep")):
                by_row.setdefault((m["head_dim"], m["causal"]), []).append(m)
        ladder = [m for m in manifest["variants"] if m["tag"].startswith("ladder")]
        for b, h, s, d in TIMED:
            q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
            v = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
            qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
            for causal in (False, True):
                metas = by_row.get((d, causal))
                if not metas:
                    continue
                fns, names = [], []
                for meta in metas:
                    a1 = load(meta)
                    fns.append(lambda a1=a1: a1(q, k, v))
                    names.append("ours" if meta["tag"].startswith("best") else
                                 meta["tag"].split()[0] + ":" + meta["name"])
                for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                                      ("fa2", SDPBackend.FLASH_ATTENTION)):
                    def f(backend=backend):
                        with sdpa_kernel(backend):
                            return torch.nn.functional.scaled_dot_product_attention(
                                qt, kt, vt, is_causal=causal)
                    try:
                        f()
                        fns.append(f)
                        names.append(name)
                    except Exception as e:
                        print(f"  {name} unavailable: {e}")
                if d == 128 and not causal and (b, h, s) == (4, 16, 4096):
                    for m in ladder:
                        a2 = load(m)
                        fns.append(lambda a2=a2: a2(q, k, v))
                        names.append(m["tag"])
                times = time_interleaved(dict(zip(names, fns)),
                                         3 if len(fns) > 4 else 5, ITERS, WARMUP)
                ms = [statistics.median(times[n]) for n in names]
                flops = 4 * b * h * s * s * d / (2 if causal else 1)
                tf = [flops / (t * 1e-3) / 1e12 for t in ms]
                line = " ".join(f"{n}={t:.0f}" for n, t in zip(names, tf))
                ratios = " ".join(f"ours/{n}={tf[0] / t:.3f}" for n, t in zip(names[1:], tf[1:]))
                print(f"TIME b={b} h={h} s={s} d={d} causal={causal}: TFLOP/s {line}; {ratios}",
                      flush=True)
    print(f"{len(results) - failed} passed, {failed} failed")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "attention-check.json"), "w") as f:
            json.dump(results, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
