#!/usr/bin/env python3
"""Attention forward on the H100: ours vs FlashAttention-4's CuTe DSL forward
vs torch SDPA's cuDNN backend, in one process, on the same inputs.

    python3 benchmarks/attention/run_attention.py --out DIR [--rows quick] [--only a,b]

For every row (b, h, s, d), full and causal: one set of ``torch.randn`` bf16
tensors q, k, v of shape (b, s, h, d); every contender's output O (and its
log-sum-exp where it returns one) is checked against SDPA computed in fp32 on
the same tensors (``CHECK_BOUND``); then the contenders are timed in
alternating rounds (``ROUNDS`` after warm-up, ``ITERS`` back-to-back calls
each, CUDA events on torch's current stream) so that clock and power drift
hit all alike. TFLOP/s = 4 b h s^2 d / median time (half of that for causal);
a ratio is the median over rounds of (peer time / our time).

Contenders (``--only`` picks some; one that cannot load is reported with the
reason and left out):
- ``ours``: the attention bundle's chosen variants (``ours.py``; run this
  script from the bundle folder that benchmarks/attention/build_bundle.py
  makes, or give ``--bundle``);
- ``fa4``: ``flash_attn.cute.interface.flash_attn_func`` (flash-attn-4
  4.0.0b36 on nvidia-cutlass-dsl 4.8.1);
- ``cudnn``: ``torch.nn.functional.scaled_dot_product_attention`` under
  ``sdpa_kernel(SDPBackend.CUDNN_ATTENTION)``.

The peers are imported here only; nothing of the project imports them.
Writes DIR/attention.json and DIR/attention.log.
"""

import argparse
import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from timing import ratios_over, time_interleaved  # noqa: E402

ROWS = [(4, 16, 4096, 128), (2, 16, 8192, 128), (4, 32, 4096, 64), (4, 8, 4096, 256)]
QUICK_ROWS = [(1, 4, 1024, 128)]
CONTENDERS = ("ours", "fa4", "cudnn")
ROUNDS, ITERS, WARMUP = 9, 10, 3
# |O - O_ref|: bf16 O carries a relative rounding of 2^-8, and the
# reference's O entries of randn inputs stay below 1 in magnitude, so a
# correct kernel's worst element is a few 2^-8; 2^-5 leaves room for the
# bf16 rounding of P before P V and fails any real mistake (a wrong mask,
# a skipped block, a stale stage), which moves whole rows by far more.
CHECK_BOUND = {"o_max_abs": 2.0 ** -5, "o_mean_abs": 2.0 ** -9, "lse_max_abs": 1e-3}


def flops(b, h, s, d, causal):
    """4 b h s^2 d (two GEMMs of 2 b h s^2 d); causal computes half."""
    total = 4 * b * h * s * s * d
    return total // 2 if causal else total


def log(msg, fh=None):
    print(msg, flush=True)
    if fh is not None:
        fh.write(msg + "\n")
        fh.flush()


def reference(q, k, v, causal, heads_per_chunk=4):
    """fp32 SDPA of bf16 (b, s, h, d) inputs: O (b, s, h, d) fp32 and the
    natural-log LSE (b, h, s) fp32 of the scaled scores. Chunked over heads
    so that the fp32 score matrix stays within a few GiB."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, s, h, d = q.shape
    scale = 1.0 / math.sqrt(d)
    o = torch.empty(b, s, h, d, dtype=torch.float32, device=q.device)
    lse = torch.empty(b, h, s, dtype=torch.float32, device=q.device)
    mask = None
    if causal:
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device).tril()
    for bi in range(b):
        for h0 in range(0, h, heads_per_chunk):
            hs = slice(h0, min(h, h0 + heads_per_chunk))
            qc, kc, vc = (t[bi, :, hs].transpose(0, 1).float() for t in (q, k, v))
            with sdpa_kernel(SDPBackend.MATH):
                o[bi, :, hs] = F.scaled_dot_product_attention(
                    qc, kc, vc, is_causal=causal).transpose(0, 1)
            scores = torch.matmul(qc, kc.transpose(-1, -2)) * scale
            if mask is not None:
                scores.masked_fill_(~mask, float("-inf"))
            lse[bi, hs] = torch.logsumexp(scores, dim=-1)
            del scores
    return o, lse


def check(name, out, ref_o, ref_lse):
    """Errors of one contender against the reference; raises if a bound is
    exceeded (a wrong result is never timed)."""
    o, lse = out
    err = (o.float() - ref_o).abs()
    result = {"o_max_abs": err.max().item(), "o_mean_abs": err.mean().item()}
    if lse is not None:
        lse = lse.float()
        if lse.shape != ref_lse.shape:
            raise ValueError(f"{name}: LSE of shape {tuple(lse.shape)}, expected (b, h, s) = "
                             f"{tuple(ref_lse.shape)}")
        result["lse_max_abs"] = (lse - ref_lse).abs().max().item()
    bad = {k: v for k, v in result.items() if not v <= CHECK_BOUND[k]}
    if bad:
        raise AssertionError(f"{name}: outside the bound {CHECK_BOUND}: {bad}")
    return result


def load_contenders(only, bundle=HERE):
    """{name: fn(q, k, v, causal) -> (o, lse or None)} and {name: why not}."""
    fns, missing = {}, {}
    if "ours" in only:
        try:
            from ours import load_ours
            fns["ours"] = load_ours(bundle)
        except Exception as e:  # reported, not hidden: the row still runs the peers
            missing["ours"] = f"{type(e).__name__}: {e}"
    if "fa4" in only:
        try:
            from flash_attn.cute.interface import flash_attn_func

            def fa4(q, k, v, causal):
                out = flash_attn_func(q, k, v, causal=causal, return_lse=True)
                return (out[0], out[1]) if isinstance(out, tuple) else (out, None)
            fns["fa4"] = fa4
        except Exception as e:
            missing["fa4"] = f"{type(e).__name__}: {e}"
    if "cudnn" in only:
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def cudnn(q, k, v, causal):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                   v.transpose(1, 2), is_causal=causal)
            return o.transpose(1, 2), None
        fns["cudnn"] = cudnn
    return fns, missing


def summarize(row, causal, times):
    """TFLOP/s per contender and ratios ours/peer (median over rounds of
    peer time / our time)."""
    b, h, s, d = row
    f = flops(b, h, s, d, causal)
    out = {"row": list(row), "causal": causal,
           "ms": {n: statistics.median(t) for n, t in times.items()}}
    out["tflops"] = {n: f / (ms * 1e-3) / 1e12 for n, ms in out["ms"].items()}
    if "ours" in times:
        out["ours_over"] = ratios_over(times)
    return out


def format_row(r, names):
    b, h, s, d = r["row"]
    cells = [f"{b},{h},{s},{d} {'causal' if r['causal'] else 'full  '}"]
    cells += [f"{r['tflops'][n]:7.1f}" if n in r["tflops"] else "      -" for n in names]
    cells += [f"{r['ours_over'][n]:5.3f}x" for n in names if n != "ours" and n in
              r.get("ours_over", {})]
    return " | ".join(cells)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", choices=("all", "quick"), default="all")
    ap.add_argument("--only", default=",".join(CONTENDERS),
                    help=f"contenders, comma-separated, of {CONTENDERS}")
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--bundle", default=HERE,
                    help="the attention bundle folder (default: this script's folder)")
    args = ap.parse_args(argv)
    only = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = sorted(set(only) - set(CONTENDERS))
    if unknown:
        ap.error(f"--only: unknown contender(s) {unknown}; choose from {CONTENDERS}")

    import torch
    if not torch.cuda.is_available():
        print("run_attention: no CUDA GPU: nothing to measure (run it on a Hopper GPU)")
        return 0
    os.makedirs(args.out, exist_ok=True)
    fh = open(os.path.join(args.out, "attention.log"), "w")
    log(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", fh)
    fns, missing = load_contenders(only, os.path.abspath(args.bundle))
    for name, why in missing.items():
        log(f"{name}: not measured ({why})", fh)
    names = [n for n in CONTENDERS if n in fns]
    log("b,h,s,d mode | " + " | ".join(f"{n} TFLOP/s" for n in names)
        + "".join(f" | ours/{n}" for n in names if n != "ours" and "ours" in fns), fh)

    results = []
    torch.manual_seed(0)
    for row in (QUICK_ROWS if args.rows == "quick" else ROWS):
        b, h, s, d = row
        q, k, v = (torch.randn(b, s, h, d, dtype=torch.bfloat16, device="cuda")
                   for _ in range(3))
        for causal in (False, True):
            ref_o, ref_lse = reference(q, k, v, causal)
            errors = {n: check(n, fn(q, k, v, causal), ref_o, ref_lse) for n, fn in fns.items()}
            del ref_o, ref_lse
            log(f"{row} causal={causal} checked: " + ", ".join(
                f"{n} max|dO| {e['o_max_abs']:.2e}" for n, e in errors.items()), fh)
            if args.check_only:
                results.append({"row": list(row), "causal": causal, "errors": errors})
                continue
            times = time_interleaved({n: (lambda fn=fn, q=q, k=k, v=v, causal=causal:
                                          fn(q, k, v, causal))
                                      for n, fn in fns.items()}, ROUNDS, ITERS, WARMUP)
            r = summarize(row, causal, times)
            r["errors"] = errors
            results.append(r)
            log(format_row(r, names), fh)
        del q, k, v
        torch.cuda.empty_cache()
    with open(os.path.join(args.out, "attention.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "bound": CHECK_BOUND,
                   "not_measured": missing, "results": results}, f, indent=1)
    fh.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
