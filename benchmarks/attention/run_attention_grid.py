#!/usr/bin/env python3
"""Attention forward over a broad grid of shapes (GQA ratios, short and long
sequences, seqlen_q != seqlen_k): the configuration ``attention_configs.pick``
chooses ("ours", what ``pipeline_mlir.attention`` runs) and the other
candidates of the row (the other configurations of the op's table and the
bundle's extra candidates that run it) vs
FlashAttention-4 and cuDNN, in one process, on the same tensors.

    python3 run_attention_grid.py --out DIR [--rows quick] [--only ours,fa4] [--no-variants]
                                  [--pick-only] [--rounds N]

Run from a grid bundle (``build_bundle.py --grid``: every configuration of
``attention_configs.VARIANTS``, tagged ``cfg <name>``, and the candidates
of ``variants.grid_extra``, tagged ``cand <name>``). First every variant
of the bundle is checked against fp32 attention
(``attention_fwd_host.check``) on ragged shapes its GQA packing accepts
(``VARIANT_SHAPES``), causal or not as built. Then per row of ``ROWS``, full
and/or causal: one set of ``torch.randn`` bf16 tensors; every contender's
output is checked against fp32 attention on sampled query rows (the first,
middle and last ``SAMPLE`` rows of every batch entry and head, against all
keys: exact, and a full fp32 reference of the long rows would take minutes;
one outside the bound is reported, counted and not timed); then the
contenders are timed in alternating rounds (timing.py).
"ours@graph" is ours replayed from a CUDA graph (the host's share of a
short row). TFLOP/s = 4 b h sq sk d / time (causal: the visible share,
bottom-right);
``ours/peer`` = median over rounds of peer time / our time.

cuDNN is torch SDPA's cuDNN backend with ``enable_gqa``; where that
backend refuses it, K and V are expanded to the query heads beforehand
(outside the timing) and the log says so. Causal rows have seqlen_q ==
seqlen_k (SDPA's causal mask is top-left aligned, FlashAttention's and ours
bottom-right: the same only for square rows).
Writes DIR/attention-grid.json and DIR/attention-grid.log.
"""

import argparse
import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# (batch, seqlen_q, seqlen_k, heads, kv_heads, head_dim, modes): the rows
# an earlier comparison measured weak, then GQA ratios 1 / 4 / 8 over
# 512 .. 8192 and head dims 64 / 128.
ROWS = [
    (2, 8192, 8192, 16, 2, 64, ("causal", "full")),
    (8, 1024, 1024, 16, 16, 64, ("full", "causal")),
    (16, 512, 512, 16, 16, 128, ("causal", "full")),
    (4, 2048, 2048, 8, 8, 256, ("causal",)),
    (4, 512, 8192, 16, 16, 128, ("full",)),
    (2, 4096, 4096, 32, 4, 128, ("full", "causal")),
    (2, 3000, 3000, 16, 16, 128, ("full", "causal")),
    (1, 16384, 16384, 8, 8, 128, ("causal",)),
    (4, 4096, 4096, 16, 16, 128, ("full", "causal")),
    (8, 512, 512, 32, 4, 128, ("full", "causal")),
    (4, 2048, 2048, 32, 8, 128, ("full", "causal")),
    (16, 512, 512, 32, 8, 64, ("full", "causal")),
    (2, 2048, 2048, 32, 4, 64, ("full", "causal")),
    (1, 8192, 8192, 32, 8, 128, ("causal",)),
    (1, 1024, 1024, 8, 8, 128, ("full", "causal")),
]
QUICK_ROWS = [(2, 512, 512, 8, 2, 128, ("full", "causal"))]
# (batch, seqlen_q, seqlen_k, kv_heads) of the variant checks; heads =
# kv_heads x the variant's packed group (x 2 for an unpacked one: GQA).
VARIANT_SHAPES = [(1, 333, 517, 2), (2, 200, 200, 1), (1, 1, 64, 1), (1, 1000, 77, 1)]
SAMPLE = 128            # query rows sampled at the start, middle and end
ROUNDS = 7
CHECK_BOUND = {"o_max_abs": 2.0 ** -5, "lse_max_abs": 1e-3}


def flops(b, sq, sk, h, d, causal):
    """4 b h d x the (query, key) pairs computed: all of them, or causal
    (bottom-right) the visible ones."""
    if not causal:
        return 4 * b * h * sq * sk * d
    offset = sk - sq
    pairs = sum(max(0, min(sk, r + 1 + offset)) for r in range(sq))
    return 4 * b * h * pairs * d


def candidates(configs, d, causal, b, h, hk, sq, sk, sms, metas):
    """[(label, variant name)]: the pick first ("ours"), then every other
    configuration of ``metas`` ({name: meta} of the bundle: head_dim,
    causal, pack_gqa) for this head dim and mask that runs the row: one
    head per tile, or packed over the row's GQA group."""
    pick, _ = configs.pick(d, causal, b, h, hk, sq, sk, sms=sms)
    packs = {0, h // hk}
    out = [("ours", pick)]
    for name, meta in sorted(metas.items()):
        if (name != pick and meta["head_dim"] == d and bool(meta["causal"]) == bool(causal)
                and meta.get("pack_gqa", 0) in packs):
            out.append((name, name))
    return out


def sample_rows(sq):
    """Query rows checked: the first, middle and last SAMPLE (all if fewer)."""
    if sq <= 3 * SAMPLE:
        return list(range(sq))
    mid = sq // 2 - SAMPLE // 2
    return (list(range(SAMPLE)) + list(range(mid, mid + SAMPLE))
            + list(range(sq - SAMPLE, sq)))


def sampled_reference(q, k, v, causal, rows):
    """fp32 O (b, len(rows), h, d) and LSE (b, h, len(rows)) of query
    ``rows`` against all keys (bottom-right causal), GQA by head index."""
    import torch

    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    idx = torch.tensor(rows, device=q.device)
    qf = q[:, idx].float().transpose(1, 2)                       # b h r d
    group = h // hk
    o = torch.empty(b, h, len(rows), d, device=q.device)
    lse = torch.empty(b, h, len(rows), device=q.device)
    for kh in range(hk):
        hs = slice(kh * group, (kh + 1) * group)
        kf = k[:, :, kh].float()                                 # b sk d
        vf = v[:, :, kh].float()
        s = torch.matmul(qf[:, hs], kf.transpose(-1, -2).unsqueeze(1)) / math.sqrt(d)
        if causal:
            c = torch.arange(sk, device=q.device)[None, :]
            s = s.masked_fill(c > idx[:, None] + (sk - sq), float("-inf"))
        lse[:, hs] = torch.logsumexp(s, dim=-1)
        o[:, hs] = torch.matmul(torch.softmax(s, dim=-1).nan_to_num(0.0), vf.unsqueeze(1))
    return o.transpose(1, 2), lse


def check_sampled(name, out, rows, ref):
    """Errors of one contender's (O, LSE or None) on the sampled rows;
    raises over CHECK_BOUND (a wrong result is never timed)."""
    import torch

    o, lse = out
    idx = torch.tensor(rows, device=o.device)
    ref_o, ref_lse = ref
    result = {"o_max_abs": (o[:, idx].float() - ref_o).abs().max().item()}
    if lse is not None:
        lse = lse.float()[:, :, idx]
        finite = torch.isfinite(ref_lse)
        result["lse_max_abs"] = ((lse[finite] - ref_lse[finite]).abs().max().item()
                                 if finite.any() else 0.0)
    bad = {k: v for k, v in result.items() if not v <= CHECK_BOUND[k]}
    if bad:
        raise AssertionError(f"{name}: outside the bound {CHECK_BOUND}: {bad}")
    return result


def load_variants(folder):
    """{name: AttentionFwd} of the bundle's ``cfg`` (the op's table) and
    ``cand`` (extra candidates) entries."""
    from attention_fwd_host import AttentionFwd

    with open(os.path.join(folder, "manifest.json")) as f:
        manifest = json.load(f)
    out = {}
    for meta in manifest["variants"]:
        if meta["tag"].startswith(("cfg ", "cand ")):
            with open(os.path.join(folder, meta["image"]), "rb") as f:
                out[meta["tag"].split(" ", 1)[1]] = AttentionFwd(f.read(), meta)
    return out


def check_variants(variants, log):
    """Every variant against fp32 attention on VARIANT_SHAPES; returns the
    number that failed."""
    from attention_fwd_host import check

    failed = 0
    for name, attn in sorted(variants.items()):
        group = attn.meta.get("pack_gqa", 0) or 2
        for b, sq, sk, hk in VARIANT_SHAPES:
            shape = (b, sq, sk, hk * group, hk)
            try:
                err, lerr = check(attn, *shape)
                status = f"ok o_err={err:.2e} lse_err={lerr:.2e}"
            except Exception as e:   # reported per variant and shape, then counted
                status, failed = f"FAIL {type(e).__name__}: {e}", failed + 1
            log(f"CHECK {name:20s} b,sq,sk,h,hk={shape}: {status}")
    return failed


def graph_of(fn, q, k, v, causal, log):
    """``fn`` on these tensors captured in a CUDA graph, as a contender
    (replay): its time against ``fn``'s shows the host's share of a short
    row's time. None (logged) where capture fails."""
    import torch

    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn(q, k, v, causal)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn(q, k, v, causal)
        return lambda q, k, v, causal: graph.replay()
    except Exception as e:   # diagnostic only: the row is measured without it
        log(f"ours@graph: not measured ({type(e).__name__}: {str(e)[:120]})")
        return None


def peers(only, log):
    """{name: fn(q, k, v, causal) -> (O, LSE or None)} of FA4 and cuDNN."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    fns = {}
    if "fa4" in only:
        try:
            from flash_attn.cute.interface import flash_attn_func

            def fa4(q, k, v, causal):
                out = flash_attn_func(q, k, v, causal=causal, return_lse=True)
                return (out[0], out[1]) if isinstance(out, tuple) else (out, None)
            fns["fa4"] = fa4
        except Exception as e:
            log(f"fa4: not measured ({type(e).__name__}: {e})")
    if "cudnn" in only:
        def cudnn(q, k, v, causal):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                if k.shape[2] == q.shape[2]:
                    o = F.scaled_dot_product_attention(
                        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                        is_causal=causal)
                else:
                    o = F.scaled_dot_product_attention(
                        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                        is_causal=causal, enable_gqa=True)
            return o.transpose(1, 2), None
        fns["cudnn"] = cudnn
    return fns


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", choices=("all", "quick"), default="all")
    ap.add_argument("--only", default="ours,fa4,cudnn")
    ap.add_argument("--no-variants", action="store_true", help="skip the variant checks")
    ap.add_argument("--pick-only", action="store_true",
                    help="of ours, only the pick (and its CUDA-graph replay)")
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--bundle", default=HERE)
    args = ap.parse_args(argv)
    only = {n.strip() for n in args.only.split(",") if n.strip()}

    import torch
    if not torch.cuda.is_available():
        print("run_attention_grid: no CUDA GPU: nothing to measure")
        return 0
    from pipeline_mlir.ops import attention_configs as configs
    from run_attention import ITERS, WARMUP
    from timing import ratios_over, time_interleaved

    os.makedirs(args.out, exist_ok=True)
    fh = open(os.path.join(args.out, "attention-grid.log"), "w")

    def log(msg):
        print(msg, flush=True)
        fh.write(msg + "\n")
        fh.flush()

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    log(f"device: {torch.cuda.get_device_name()} ({sms} SMs), torch {torch.__version__}")
    variants = load_variants(os.path.abspath(args.bundle))
    failed = 0 if args.no_variants else check_variants(variants, log)
    log(f"variant checks: {failed} failed")
    peer_fns = peers(only, log)
    results, wrong = [], 0

    def save(results):
        # after every row: a run stopped early keeps what it measured
        with open(os.path.join(args.out, "attention-grid.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "sms": sms,
                       "variant_checks_failed": failed, "wrong_outputs": wrong,
                       "results": results}, f, indent=1)

    torch.manual_seed(0)
    for b, sq, sk, h, hk, d, modes in (QUICK_ROWS if args.rows == "quick" else ROWS):
        q = torch.randn(b, sq, h, d, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(b, sk, hk, d, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(b, sk, hk, d, dtype=torch.bfloat16, device="cuda")
        rows = sample_rows(sq)
        for mode in modes:
            causal = mode == "causal"
            label = f"{b},{sq},{sk},{h}/{hk},{d} {mode}"
            cands = candidates(configs, d, causal, b, h, hk, sq, sk, sms,
                               {n: a.meta for n, a in variants.items()})
            fns = {}
            if args.pick_only:
                cands = cands[:1]
            if "ours" in only:
                for tag, name in cands:
                    fns[tag] = lambda q, k, v, causal, a=variants[name]: a(q, k, v)
            fns.update(peer_fns)
            ref = sampled_reference(q, k, v, causal, rows)
            errors, skipped = {}, {}
            for n, fn in list(fns.items()):
                try:
                    try:
                        out = fn(q, k, v, causal)
                    except RuntimeError as e:
                        if n != "cudnn" or hk == h:
                            raise
                        # No GQA in this cuDNN backend: K and V expanded to
                        # the query heads once, outside the timing.
                        ke, ve = (t.repeat_interleave(h // hk, dim=2) for t in (k, v))
                        fns[n] = fn = (lambda q, k, v, causal, f=fn, ke=ke, ve=ve:
                                       f(q, ke, ve, causal))
                        log(f"{label}: cudnn with K/V expanded ({str(e)[:80]})")
                        out = fn(q, k, v, causal)
                    errors[n] = check_sampled(n, out, rows, ref)
                except AssertionError as e:   # wrong: never timed, counted
                    skipped[n] = f"WRONG {e}"
                    wrong += 1
                    del fns[n]
                except Exception as e:   # a peer that refuses the shape is left out
                    skipped[n] = f"{type(e).__name__}: {str(e)[:160]}"
                    del fns[n]
            del ref
            for n, why in skipped.items():
                log(f"{label}: {n} not measured ({why})")
            if "ours" in fns:
                graphed = graph_of(fns["ours"], q, k, v, causal, log)
                if graphed is not None:
                    fns["ours@graph"] = graphed
            times = time_interleaved({n: (lambda fn=fn: fn(q, k, v, causal))
                                      for n, fn in fns.items()}, args.rounds, ITERS, WARMUP)
            f = flops(b, sq, sk, h, d, causal)
            ms = {n: statistics.median(t) for n, t in times.items()}
            tflops = {n: f / (t * 1e-3) / 1e12 for n, t in ms.items()}
            over = ratios_over(times) if "ours" in times else {}
            ratios = {n: over[n] for n in ("fa4", "cudnn") if n in over}
            r = {"row": [b, sq, sk, h, hk, d], "mode": mode, "pick": cands[0][1],
                 "candidates": dict(cands), "ms": ms, "rounds_ms": times, "tflops": tflops,
                 "ours_over": ratios, "errors": errors, "skipped": skipped}
            results.append(r)
            save(results)
            cells = " ".join(f"{n}={tflops[n]:.0f}" for n in tflops)
            log(f"ROW {label} pick={cands[0][1]}: TFLOP/s {cells}; "
                + " ".join(f"ours/{n}={x:.3f}" for n, x in ratios.items()))
        del q, k, v
        torch.cuda.empty_cache()
    save(results)
    log(f"variant checks failed: {failed}; wrong outputs on the rows: {wrong}")
    fh.close()
    return 1 if failed or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
