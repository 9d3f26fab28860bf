#!/usr/bin/env python3
"""The FP8 (e4m3) attention forward on a Hopper GPU: checked against fp32
attention of its dequantized inputs, then timed next to our bf16 forward on
the same shapes, in one process.

    python3 run_attention_fp8.py --out DIR [--rows quick] [--bundle DIR]
        [--candidates NAME,...] [--head-dims 128]

Run from (or point ``--bundle`` at) an attention bundle built with
``benchmarks/attention/build_bundle.py --fp8``: the FP8 variants (tagged
``fp8 d<d>[ causal]``; ``fp8nolse d<d>[ causal]`` the op's where its caller
takes no LSE), candidates (``fp8cand ...``), the bf16 forward's
chosen ones (``best ...``) and bf16 candidates (``bf16cand ...``, checked
against fp32 and timed beside them). ``--candidates hwdb,px4hwdb`` checks
and times only the candidates of those names (the last word of their tag;
``none``: none), beside the op's configurations and the bf16 ones;
``--head-dims 128`` times only the rows of those head dims;
``--check-all`` checks each candidate on every ``CHECKS`` shape of its head
dim and mode too (by default on one GQA shape).

Correctness (``CHECKS``: ragged lengths, GQA, sq != sk, causal and full):
gaussian q, k, v quantized per tensor to e4m3
(``attention_fwd_host.fp8_quantize``), the kernel's O against fp32
attention of the dequantized tensors, every element within its row's bound
``max|V| (2^-4 + 2^-10 seqlen_k / L) + 2^-9 |O|`` (P rounded to e4m3 before
P V; ``attention_fwd_host.check_fp8``), LSE within ``FP8_LSE_ERROR_BOUND``.
The ``fp8nolse`` variants and the candidates with the row sum on the tensor
pipe (``_rsm`` in their name) are checked on O alone (their LSE error is
logged, not bounded: the op does not return it).

Timing: per row one set of ``torch.randn`` tensors, quantized for the FP8
kernel and cast to bf16 for the bf16 one; alternating rounds (``ROUNDS``
rounds of ``ITERS`` back-to-back calls, CUDA events), TFLOP/s = 4 b h s^2 d /
median time (half for causal), the ratio the median over rounds of bf16
time / FP8 time. The FP8 kernel gets V already as ``fp8_v_operand(v)``
(what a KV cache keeps); that pass over V is timed on its own (``v prep``).
Also reported: whether torch's SDPA takes e4m3 inputs (cuDNN's FP8 SDPA);
and with ``--cache DIR`` (the bundle's ``cache``), that the library op
``pipeline_mlir.attention_fp8`` (V given as (b, s, h, d), transposed by the
op) returns the bundled kernel's O and LSE bit for bit (``return_lse=True``;
without it, the ``fp8nolse`` kernel's O where the head dim has one).
Writes DIR/attention_fp8.json and DIR/attention_fp8.log.
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

# (b, h, hk, sq, sk, d, causal)
CHECKS = [(1, 4, 4, 1000, 1000, 128, False), (1, 4, 4, 1000, 1000, 128, True),
          (2, 8, 2, 777, 1500, 128, True), (1, 4, 4, 2048, 2048, 256, False),
          (1, 8, 2, 1536, 700, 256, True), (1, 2, 2, 4096, 4096, 128, True)]
# (b, h, s, d)
ROWS = [(4, 16, 8192, 128), (2, 16, 16384, 128), (4, 8, 8192, 256), (2, 8, 16384, 256)]
QUICK_ROWS = [(2, 16, 4096, 128), (2, 8, 4096, 256)]
ROUNDS, ITERS, WARMUP = 5, 5, 2


def log(msg, fh):
    print(msg, flush=True)
    fh.write(msg + "\n")
    fh.flush()


def flops(b, h, s, d, causal):
    total = 4 * b * h * s * s * d
    return total // 2 if causal else total


def load(bundle, candidates=None):
    """{tag: AttentionFwd} of the bundle's FP8 variants, candidates and
    bf16 'best' ones; with ``candidates`` (a set of names) only the
    candidates (``fp8cand``, ``bf16cand``) whose tag ends in one of them."""
    if bundle not in sys.path:
        sys.path.insert(0, bundle)
    from attention_fwd_host import AttentionFwd

    with open(os.path.join(bundle, "manifest.json")) as f:
        manifest = json.load(f)
    out = {}
    for meta in manifest["variants"]:
        kind, name = meta["tag"].split()[0], meta["tag"].split()[-1]
        if kind in ("fp8cand", "bf16cand") and candidates is not None and \
                name not in candidates:
            continue
        if kind in ("fp8", "fp8nolse", "fp8cand", "best", "bf16cand"):
            with open(os.path.join(bundle, meta["image"]), "rb") as f:
                out[meta["tag"]] = AttentionFwd(f.read(), meta)
    return out


def sdpa_fp8_status():
    """Whether torch's SDPA (the cuDNN backend) runs on e4m3 inputs here."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    x = torch.randn(1, 2, 256, 128, device="cuda").to(torch.float8_e4m3fn)
    try:
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            F.scaled_dot_product_attention(x, x, x)
        return "torch SDPA ran on e4m3 inputs"
    except Exception as e:
        return f"torch SDPA does not take e4m3 inputs: {type(e).__name__}: {str(e)[:160]}"


def check_fp8_o(attn, b, sq, sk, h, hk, seed=0):
    """``check_fp8`` on O alone (its bound per row), for a kernel whose LSE
    the op does not return: (max |O error|, the largest error / bound
    ratio, max |LSE error| logged but not bounded)."""
    import torch
    from attention_fwd_host import fp8_errors, fp8_quantize, fp8_v_operand, reference

    d = attn.meta["head_dim"]
    f8 = torch.float8_e4m3fn
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(b, s, n, d, device="cuda", generator=g)
               for s, n in ((sq, h), (sk, hk), (sk, hk)))
    (q8, qd), (k8, kd), (v8, vd) = (fp8_quantize(t, f8) for t in (q, k, v))
    out = torch.full((b, sq, h, d), float("nan"), dtype=torch.bfloat16, device="cuda")
    o, lse = attn(q8, k8, fp8_v_operand(v8), out=out, sync=True, descales=(qd, kd, vd))
    _, rlse = reference(q8.float() * qd, k8.float() * kd, v8.float() * vd, attn.meta["causal"])
    # The reference's LSE in the kernel's place: O is checked against its
    # bound, the LSE not.
    emax, ratio, _ = fp8_errors(o, rlse, (q8, qd), (k8, kd), (v8, vd), attn.meta["causal"],
                                name=attn.meta["name"])
    finite = torch.isfinite(rlse)
    return emax, ratio, (lse[finite] - rlse[finite]).abs().max().item()


def check_op(kernels, fp8_quantize, fp8_v_operand):
    """``pipeline_mlir.attention_fp8`` against the bundled kernel, bit for
    bit, on a ragged GQA shape per head dim, causal and full."""
    import torch

    sys.path.insert(0, os.path.abspath(HERE))
    import pipeline_mlir

    f8 = torch.float8_e4m3fn
    done = []
    for d in (128, 256):
        x = [torch.randn(2, s, n, d, device="cuda") for s, n in ((600, 8), (900, 2), (900, 2))]
        (q8, qd), (k8, kd), (v8, vd) = (fp8_quantize(t, f8) for t in x)
        for causal in (False, True):
            o, lse = pipeline_mlir.attention_fp8(q8, k8, v8, qd, kd, vd.item(), causal=causal,
                                                 return_lse=True)
            tag = f"fp8 d{d}{' causal' if causal else ''}"
            ko, klse = kernels[tag](q8, k8, fp8_v_operand(v8), descales=(qd, kd, vd))
            if not (torch.equal(o, ko) and torch.equal(lse, klse)):
                raise AssertionError(f"attention_fp8 differs from the bundled {tag}")
            done.append(tag)
            # Without return_lse: the no-LSE configuration where there is one.
            o = pipeline_mlir.attention_fp8(q8, k8, v8, qd, kd, vd.item(), causal=causal)
            nl = f"fp8nolse d{d}{' causal' if causal else ''}"
            ntag = nl if nl in kernels else tag
            ko, _ = kernels[ntag](q8, k8, fp8_v_operand(v8), descales=(qd, kd, vd))
            if not torch.equal(o, ko):
                raise AssertionError(f"attention_fp8 (no LSE) differs from the bundled {ntag}")
            done.append(f"{ntag} (O, no LSE)")
    return f"op pipeline_mlir.attention_fp8 == bundled kernel, bitwise: {', '.join(done)}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", choices=("all", "quick"), default="all")
    ap.add_argument("--bundle", default=HERE)
    ap.add_argument("--cache", help="a kernel cache with the FP8 entries: check the op too")
    ap.add_argument("--candidates",
                    help="comma-separated candidate names (fp8cand/bf16cand tags' last word) "
                         "to check and time; 'none' for none (default: all in the bundle)")
    ap.add_argument("--head-dims", default="128,256",
                    help="comma-separated head dims whose rows are timed (default: both)")
    ap.add_argument("--check-all", action="store_true",
                    help="check each candidate on every CHECKS shape of its head dim and "
                         "mode too (default: one GQA shape)")
    args = ap.parse_args(argv)
    head_dims = {int(d) for d in args.head_dims.split(",")}
    if args.cache:
        os.environ["PIPELINE_MLIR_CACHE_DIR"] = os.path.abspath(args.cache)

    import torch
    if not torch.cuda.is_available():
        print("run_attention_fp8: no CUDA GPU: nothing to measure (run it on a Hopper GPU)")
        return 0
    os.makedirs(args.out, exist_ok=True)
    fh = open(os.path.join(args.out, "attention_fp8.log"), "w")
    log(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", fh)
    kernels = load(os.path.abspath(args.bundle),
                   None if args.candidates is None else set(args.candidates.split(",")))
    from attention_fwd_host import check_fp8, fp8_quantize, fp8_v_operand

    log(sdpa_fp8_status(), fh)
    result = {"device": torch.cuda.get_device_name(), "checks": [], "rows": []}
    for b, h, hk, sq, sk, d, causal in CHECKS:
        tag = f"fp8 d{d}{' causal' if causal else ''}"
        try:
            emax, ratio, lerr = check_fp8(kernels[tag], b, sq, sk, h, hk)
        except AssertionError as e:
            # Reported and counted; the timings below are then of a kernel
            # that failed its check (the log says so first).
            log(f"CHECK FAILED {tag}: {e}", fh)
            result["failed"] = result.get("failed", 0) + 1
            continue
        log(f"check {tag}: b={b} h={h}/{hk} sq={sq} sk={sk}: max|dO| {emax:.3e} "
            f"(<= {ratio:.3f} of its bound), max|dLSE| {lerr:.2e}", fh)
        result["checks"].append(dict(tag=tag, shape=[b, h, hk, sq, sk, d], o_max_abs=emax,
                                     bound_ratio=ratio, lse_max_abs=lerr))
        torch.cuda.empty_cache()
        nl = f"fp8nolse d{d}{' causal' if causal else ''}"
        if nl not in kernels:
            continue
        try:
            emax, ratio, lerr = check_fp8_o(kernels[nl], b, sq, sk, h, hk)
        except AssertionError as e:
            log(f"CHECK FAILED {nl}: {e}", fh)
            result["failed"] = result.get("failed", 0) + 1
            continue
        log(f"check {nl}: b={b} h={h}/{hk} sq={sq} sk={sk}: max|dO| {emax:.3e} "
            f"(<= {ratio:.3f} of its bound), max|dLSE| {lerr:.2e} (not returned)", fh)
        result["checks"].append(dict(tag=nl, shape=[b, h, hk, sq, sk, d], o_max_abs=emax,
                                     bound_ratio=ratio, lse_max_abs=lerr, lse_checked=False))
        torch.cuda.empty_cache()

    # Every candidate is checked too (one GQA shape each): none is timed
    # unchecked.
    from attention_fwd_host import check

    for tag, attn in kernels.items():
        if tag.startswith("bf16cand"):
            try:
                err, lerr = check(attn, 2, 777, 1500, 8, 2)
                log(f"check {tag}: b=2 h=8/2 sq=777 sk=1500: max|dO| {err:.3e}, "
                    f"max|dLSE| {lerr:.2e}", fh)
            except AssertionError as e:
                log(f"CHECK FAILED {tag}: {e}", fh)
                result["failed"] = result.get("failed", 0) + 1
            continue
        if not tag.startswith("fp8cand"):
            continue
        o_only = "_rsm" in attn.meta["name"]
        shapes = [(2, 8, 2, 777, 1500)]
        if args.check_all:
            shapes += [(b, h, hk, sq, sk) for b, h, hk, sq, sk, d, causal in CHECKS
                       if d == attn.meta["head_dim"] and causal == bool(attn.meta["causal"])
                       and (b, h, hk, sq, sk) != shapes[0]]
        for b, h, hk, sq, sk in shapes:
            try:
                emax, ratio, lerr = (check_fp8_o if o_only else check_fp8)(attn, b, sq, sk, h,
                                                                           hk)
                log(f"check {tag}: b={b} h={h}/{hk} sq={sq} sk={sk}: max|dO| {emax:.3e} "
                    f"(<= {ratio:.3f} of its bound), max|dLSE| {lerr:.2e}"
                    f"{' (not bounded)' if o_only else ''}", fh)
            except AssertionError as e:
                log(f"CHECK FAILED {tag}: {e}", fh)
                result["failed"] = result.get("failed", 0) + 1
    f8 = torch.float8_e4m3fn
    if args.cache:
        try:
            log(check_op(kernels, fp8_quantize, fp8_v_operand), fh)
        except Exception as e:
            log(f"OP CHECK FAILED: {type(e).__name__}: {e}", fh)
            result["failed"] = result.get("failed", 0) + 1
    torch.manual_seed(0)
    for b, h, s, d in (QUICK_ROWS if args.rows == "quick" else ROWS):
        if d not in head_dims:
            continue
        x = [torch.randn(b, s, h, d, device="cuda") for _ in range(3)]
        bf = [t.to(torch.bfloat16) for t in x]
        (q8, qd), (k8, kd), (v8, vd) = (fp8_quantize(t, f8) for t in x)
        del x
        vt = fp8_v_operand(v8)
        for causal in (False, True):
            c = " causal" if causal else ""
            fns = {}
            for tag, attn in kernels.items():
                if attn.meta["head_dim"] != d or bool(attn.meta["causal"]) != causal:
                    continue
                if tag.startswith("best"):
                    fns["bf16"] = (lambda a=attn: a(*bf))
                elif tag.startswith("bf16cand"):
                    fns[tag] = (lambda a=attn: a(*bf))
                else:
                    fns[tag] = (lambda a=attn: a(q8, k8, vt, descales=(qd, kd, vd)))
            fns["v prep"] = lambda: fp8_v_operand(v8)
            times = time_interleaved(fns, ROUNDS, ITERS, WARMUP)
            f = flops(b, h, s, d, causal)
            ms = {n: statistics.median(t) for n, t in times.items()}
            tflops = {n: f / (m * 1e-3) / 1e12 for n, m in ms.items() if n != "v prep"}
            main_tag = f"fp8 d{d}{c}"
            over_op = ratios_over(times, ours=main_tag)
            ratio = over_op["bf16"]
            row = dict(row=[b, h, s, d], causal=causal, ms=ms, tflops=tflops,
                       fp8_over_bf16=ratio)
            # Each FP8 configuration's speed-up over the op's (LSE) one and,
            # where there is one, over the no-LSE one: the median over
            # rounds of op time / its time.
            nl = f"fp8nolse d{d}{c}"
            row["over_op"] = {n: 1.0 / r for n, r in over_op.items()
                              if n.startswith("fp8")}
            if nl in times:
                row["over_nolse"] = {n: 1.0 / r for n, r in
                                     ratios_over(times, ours=nl).items()
                                     if n.startswith("fp8") and n != main_tag}
            result["rows"].append(row)
            log(f"{b},{h},{s},{d}{c or ' full'}: " + ", ".join(
                f"{n} {t:.1f}" for n, t in tflops.items()) + f" TFLOP/s; fp8/bf16 "
                f"{ratio:.3f}x; v prep {ms['v prep']:.3f} ms (kernel {ms[main_tag]:.3f} ms)",
                fh)
            log("  speed-up over the op: " + ", ".join(
                f"{n.split()[-1] if n.startswith('fp8cand') else n} {r:.3f}"
                for n, r in row["over_op"].items()) + (
                "; over fp8nolse: " + ", ".join(f"{n.split()[-1]} {r:.3f}"
                                                for n, r in row["over_nolse"].items())
                if "over_nolse" in row else ""), fh)
        del q8, k8, v8, vt, bf
        torch.cuda.empty_cache()
    with open(os.path.join(args.out, "attention_fp8.json"), "w") as f:
        json.dump(result, f, indent=1)
    fh.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
