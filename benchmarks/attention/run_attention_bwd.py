#!/usr/bin/env python3
"""Attention backward on a Hopper GPU: ``pipeline_mlir.attention``'s backward
vs torch SDPA's cuDNN backward (and FlashAttention-4's CuTe DSL backward
where ``flash_attn.cute`` imports), in one process, on the same tensors.

    python3 run_attention_bwd.py --out DIR [--rows quick] [--only ours,cudnn,fa4] [--dq-split]
        [--options dq_overlap+dq_store_spread,dq_overlap,...] [--head-dims 64,128] [--bwd-only]

Run it from the folder benchmarks/attention/build_bwd_bundle.py makes (its
``gemm-cache/`` holds the compiled kernels; no MLIR needed there).

For every row (b, h, s, d), full and causal: one set of ``torch.randn`` bf16
tensors q, k, v, dO of shape (b, s, h, d). Each contender's forward runs once
with autograd recording; its gradients are checked against fp32 gradients
of the same tensors (``REL_BOUND``: max |error| / max |reference| per
gradient), then ``torch.autograd.grad(o, (q, k, v), dO, retain_graph=True)``
-- the backward alone -- is timed in alternating rounds (``ROUNDS`` after
warm-up, ``ITERS`` calls each, CUDA events), and so is forward + backward.
TFLOP/s by FlashAttention's convention: forward 4 b h s^2 d, backward 2.5
times that, causal half of each; a ratio is the median over rounds of
(peer time / our time).

``--dq-split``: our d 128 backward runs the candidate that splits dQ by
columns between its consumer warpgroups (``attention_configs.BWD_CANDIDATES``)
instead of the default; the other rows are unchanged.

``--options``: each comma-separated set of ``attention_configs.BWD_OPTIONS``
(joined by '+') is one more contender, our backward with those switches on
at every head dim (``attention_configs.BWD_CANDIDATES``), named ``ours_`` and
the options' tags (``ours_dqo_dqw``), timed in the same alternating rounds
as the default: an A/B of a candidate against the default and the peers.
``--head-dims``: only the rows of these head dims (the d 64 option sets of
``attention_configs.BWD_D64_OPTION_SETS`` are built for d 64 alone).

``--bwd-only``: time the backward alone, not forward + backward too (half
the GPU time of an A/B of backward candidates).

Writes DIR/attention_bwd.json and DIR/attention_bwd.log.
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
QUICK_ROWS = [(1, 4, 1024, 128), (1, 4, 1024, 64), (1, 4, 1024, 256)]
CONTENDERS = ("ours", "cudnn", "fa4")
ROUNDS, ITERS, WARMUP = 7, 5, 2
# max |grad - ref| / max |ref| per gradient: P and dS are rounded to bf16
# before the gradient GEMMs (2^-8 relative each), the result once more.
REL_BOUND = 2e-2


def fwd_flops(b, h, s, d, causal):
    total = 4 * b * h * s * s * d
    return total // 2 if causal else total


def log(msg, fh=None):
    print(msg, flush=True)
    if fh is not None:
        fh.write(msg + "\n")
        fh.flush()


def reference_grads(q, k, v, do, causal, heads_per_chunk=2):
    """fp32 (dq, dk, dv) of attention's O with upstream dO, chunked over
    heads so the fp32 score matrices stay small."""
    import torch

    b, s, h, d = q.shape
    out = [torch.empty(t.shape, dtype=torch.float32, device=t.device) for t in (q, k, v)]
    scale = 1.0 / math.sqrt(d)
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).tril() if causal else None
    for bi in range(b):
        for h0 in range(0, h, heads_per_chunk):
            hs = slice(h0, min(h, h0 + heads_per_chunk))
            qc, kc, vc = (t[bi, :, hs].transpose(0, 1).float().requires_grad_()
                          for t in (q, k, v))
            sc = torch.matmul(qc, kc.transpose(-1, -2)) * scale
            if mask is not None:
                sc = sc.masked_fill(~mask, float("-inf"))
            o = torch.matmul(torch.softmax(sc, -1), vc)
            gq, gk, gv = torch.autograd.grad(o, (qc, kc, vc),
                                             do[bi, :, hs].transpose(0, 1).float())
            for dst, g in zip(out, (gq, gk, gv)):
                dst[bi, :, hs] = g.transpose(0, 1)
            del sc, o
    return out


def option_sets(spec):
    """``--options``' sets: [(contender name, options tuple)]."""
    from pipeline_mlir.ops import attention_configs

    out = []
    for item in filter(None, (x.strip() for x in spec.split(","))):
        opts = tuple(o.strip() for o in item.split("+"))
        if opts[0] == "default":                 # each row's default and the rest
            extra = opts[1:]
            unknown = sorted(set(extra) - set(attention_configs.BWD_OPTIONS))
            if unknown:
                raise ValueError(f"--options: unknown {unknown}")
            tags = [tag for o, tag in attention_configs.BWD_OPTIONS.items() if o in extra]
            out.append(("ours_def_" + "_".join(tags), ("default",) + extra))
            continue
        unknown = sorted(set(opts) - set(attention_configs.BWD_OPTIONS))
        if unknown:
            raise ValueError(f"--options: unknown {unknown}; known: "
                             f"{sorted(attention_configs.BWD_OPTIONS)}")
        tags = [tag for o, tag in attention_configs.BWD_OPTIONS.items() if o in opts]
        out.append(("ours_" + "_".join(tags), opts))
    return out


def resolved(options, head_dim, causal):
    """``options`` for a row: a set that starts with 'default' is the row's
    default (``bwd_default_options``) with the rest added."""
    from pipeline_mlir.ops import attention_configs as ac

    if options and options[0] == "default":
        return ac.bwd_default_options(head_dim, causal) + tuple(options[1:])
    return options


def built_for(head_dim, options):
    """Whether our backward with ``options`` is a variant of ``head_dim``
    in the bundle's kernel cache (an option set may be of one head dim:
    its contender then skips the other rows)."""
    from pipeline_mlir.ops import attention_configs as ac

    try:
        names = [ac.bwd_variant(head_dim, c, options=resolved(options, head_dim, c))[0]
                 for c in (False, True)]
    except ValueError:
        return False
    return all(n in ac.BWD_VARIANTS or n in ac.BWD_CANDIDATES for n in names)


def with_options(options, fn):
    """``fn()`` with our backward's ``BWD_OPTIONS`` set to ``options`` (the
    op reads them when the backward runs; None: each head dim's default,
    ``()``: the plain configuration)."""
    import importlib

    op = importlib.import_module("pipeline_mlir.ops.attention")
    before, op.BWD_OPTIONS = op.BWD_OPTIONS, options
    try:
        return fn()
    finally:
        op.BWD_OPTIONS = before


def load_contenders(only):
    """{name: fn(q, k, v, causal) -> o (autograd recorded)}, {name: why not}."""
    fns, missing = {}, {}
    if "ours" in only:
        try:
            os.environ.setdefault("PIPELINE_MLIR_CACHE_DIR", os.path.join(HERE, "gemm-cache"))
            import pipeline_mlir

            fns["ours"] = lambda q, k, v, causal: pipeline_mlir.attention(q, k, v,
                                                                          causal=causal)
        except Exception as e:
            missing["ours"] = f"{type(e).__name__}: {e}"
    if "cudnn" in only:
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def cudnn(q, k, v, causal):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                   v.transpose(1, 2), is_causal=causal)
            return o.transpose(1, 2)
        fns["cudnn"] = cudnn
    if "fa4" in only:
        try:
            from flash_attn.cute.interface import flash_attn_func

            def fa4(q, k, v, causal):
                out = flash_attn_func(q, k, v, causal=causal)
                return out[0] if isinstance(out, tuple) else out
            fns["fa4"] = fa4
        except Exception as e:
            missing["fa4"] = f"{type(e).__name__}: {e}"
    return fns, missing


def summarize(flop, times):
    out = {"ms": {n: statistics.median(t) for n, t in times.items()}}
    out["tflops"] = {n: flop / (ms * 1e-3) / 1e12 for n, ms in out["ms"].items()}
    if "ours" in times:
        out["ours_over"] = ratios_over(times)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", choices=("all", "quick"), default="all")
    ap.add_argument("--only", default=",".join(CONTENDERS))
    ap.add_argument("--dq-split", action="store_true",
                    help="d 128: the backward candidate with dQ split by columns")
    ap.add_argument("--options", default="",
                    help="candidates: sets of BWD_OPTIONS joined by '+', comma-separated; "
                         "a set that starts with 'default' adds its options to each row's "
                         "default (its head dim's and mask's)")
    ap.add_argument("--head-dims", default="",
                    help="only the rows of these head dims, comma-separated (default: all)")
    ap.add_argument("--masks", choices=("both", "full", "causal"), default="both",
                    help="only the full or the causal rows (default: both)")
    ap.add_argument("--bwd-only", action="store_true",
                    help="time the backward alone (not forward + backward)")
    args = ap.parse_args(argv)
    only = [n.strip() for n in args.only.split(",") if n.strip()]

    import torch
    if not torch.cuda.is_available():
        print("run_attention_bwd: no CUDA GPU: nothing to measure (run it on a Hopper GPU)")
        return 0
    os.makedirs(args.out, exist_ok=True)
    fh = open(os.path.join(args.out, "attention_bwd.log"), "w")
    log(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", fh)
    fns, missing = load_contenders(only)
    if args.dq_split and "ours" in fns:
        import importlib

        importlib.import_module("pipeline_mlir.ops.attention").BWD_DQ_SPLIT = True
        log("ours: d 128 backward with dQ split by columns (dq_split)", fh)
    options = {}                                  # contender -> our backward's options
    if args.options and "ours" in fns:
        for name, opts in option_sets(args.options):
            fns[name], options[name] = fns["ours"], opts
            log(f"{name}: our backward with {'+'.join(opts)}", fh)
    for name, why in missing.items():
        log(f"{name}: not measured ({why})", fh)
    names = [n for n in CONTENDERS if n in fns] + list(options)

    def grad(n, o, retain_graph=True):
        # None: the op's own choice (each head dim's default options)
        return with_options(resolved(options.get(n), d, causal), lambda: torch.autograd.grad(
            o, (q, k, v), do, retain_graph=retain_graph))
    results = []
    torch.manual_seed(0)
    head_dims = {int(x) for x in args.head_dims.split(",") if x.strip()}
    rows = [r for r in (QUICK_ROWS if args.rows == "quick" else ROWS)
            if not head_dims or r[3] in head_dims]
    for row in rows:
        b, h, s, d = row
        q, k, v, do = (torch.randn(b, s, h, d, dtype=torch.bfloat16, device="cuda")
                       for _ in range(4))
        for t in (q, k, v):
            t.requires_grad_()
        for causal in {"both": (False, True), "full": (False,), "causal": (True,)}[args.masks]:
            ref = reference_grads(q, k, v, do, causal)
            outs, errors = {}, {}
            row_fns = {n: fn for n, fn in fns.items()
                       if n not in options or built_for(d, options[n])}
            for n, fn in row_fns.items():
                o = fn(q, k, v, causal)
                grads = grad(n, o)
                errors[n] = [(g.float() - r).abs().max().item() / r.abs().max().item()
                             for g, r in zip(grads, ref)]
                if max(errors[n]) > REL_BOUND:
                    if n in options:             # a candidate: reported, not timed
                        log(f"{n} {row} causal={causal}: WRONG, relative errors "
                            f"(dq, dk, dv) {errors[n]} > {REL_BOUND}: not timed", fh)
                        continue
                    raise AssertionError(f"{n} {row} causal={causal}: relative errors "
                                         f"(dq, dk, dv) {errors[n]} > {REL_BOUND}")
                outs[n] = o
            del ref
            log(f"{row} causal={causal} checked (dq, dk, dv rel. err): " + ", ".join(
                f"{n} " + "/".join(f"{e:.1e}" for e in errs) for n, errs in errors.items()), fh)
            bwd = time_interleaved({n: (lambda n=n, o=o: grad(n, o)) for n, o in outs.items()},
                                  ROUNDS, ITERS, WARMUP)
            f = fwd_flops(b, h, s, d, causal)
            r = {"row": list(row), "causal": causal, "errors": errors,
                 "bwd": summarize(2.5 * f, bwd)}
            if not args.bwd_only:
                fwd_bwd = time_interleaved({n: (lambda n=n, fn=fn, causal=causal: grad(
                    n, fn(q, k, v, causal), retain_graph=False))
                    for n, fn in row_fns.items() if n in outs},
                    ROUNDS, ITERS, WARMUP)
                r["fwd_bwd"] = summarize(3.5 * f, fwd_bwd)
            results.append(r)
            for what in ("bwd",) if args.bwd_only else ("bwd", "fwd_bwd"):
                cells = [f"{b},{h},{s},{d} {'causal' if causal else 'full  '} {what:7s}"]
                cells += [f"{n} {r[what]['tflops'][n]:6.1f}" for n in names
                          if n in r[what]["tflops"]]
                cells += [f"ours/{n} {x:5.3f}x" for n, x in r[what].get("ours_over", {}).items()]
                log(" | ".join(cells), fh)
            del outs
        del q, k, v, do
        torch.cuda.empty_cache()
    with open(os.path.join(args.out, "attention_bwd.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rel_bound": REL_BOUND,
                   "dq_split": args.dq_split,
                   "options": {n: list(o) for n, o in options.items()},
                   "not_measured": missing, "results": results}, f, indent=1)
    fh.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
