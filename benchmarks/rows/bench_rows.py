#!/usr/bin/env python3
"""Row softmax and RMSNorm (examples/row_softmax.py, examples/rmsnorm.py)
against torch.softmax, F.rms_norm and a device-to-device copy of the same
bytes, in one process on the same tensors.

Here (MLIR installed), compile the kernels into a bundle:

    .venv/bin/python benchmarks/rows/bench_rows.py --build .gpu-bundle/rows-bench

On the GPU host (torch, cuda-bindings; no MLIR):

    cd .gpu-bundle/rows-bench && python3 bench_rows.py [--rounds 10] [--mib 256]

A CTA per row takes its rows through a ring of shared-memory stages
(``RowRing``) where ``ring_stages`` says so; ``--build ... --alt`` also
builds each without it (``_regs``) and with half and twice the threads.

For each row length N, M = (MiB of input) / (N * 2 bytes) rows of
``torch.randn`` bf16 (ragged N included); ours, torch's op and
``y.copy_(x)`` are timed in alternating rounds (each round: CUDA events
around ``--iters`` launches of each), the median round reported. Bandwidth
counts the bytes read and written once each (x, y, and the weight for
RMSNorm): ``(read + written) / time``; ``of copy`` is that over the copy's
bandwidth, the ceiling of a kernel that reads and writes each byte once.
Every kernel's output is checked against the fp32 reference first, on the
benchmark's rows and on 1, 3 and 37 rows (with a row after the output that
must stay untouched).
"""

import argparse
import json
import math
import os
import shutil
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# Row lengths: powers of two through the regimes (a warp per row up to
# 2048, a CTA per row beyond, a ring of rows in shared memory from 16 KiB
# rows, a ring of parts of rows past 32768 columns) and ragged ones (not a
# multiple of a chunk).
NS = [512, 1000, 1024, 2048, 3000, 4096, 5120, 8192, 12288, 16384, 20000, 24576, 32768,
      40000, 65536]
OPS = ("row_softmax", "rmsnorm")


def _variants(module, n, alt):
    """Keyword arguments of ``module.build`` per kernel built for rows of
    ``n``: the defaults (``row_plan``: ``{}``) and, with ``alt``, for a CTA
    per row, the choices' checks: without the ring where the default has
    one (stages 0), with it where it has none, other depths (two stages, as
    many as fit two rings per SM, as many as fit one), half and twice the
    threads, a row in one part or two, and for the softmax the other way
    of holding the row (``stream``)."""
    from pipeline_mlir.kernel import row_plan, row_stages
    from pipeline_mlir.kernel.row_ring import MAX_RING, MAX_STAGES
    from pipeline_mlir.kernel.rows import MAX_VALUES, widest_vec

    most = getattr(module, "RING_STAGES", None)
    rows, parts, stages = row_plan(n, "bf16", most=most)
    out = [{}]
    if not alt or rows.per_warp:
        return out
    deepest = row_stages(n, "bf16", parts)
    deep = min(max(MAX_STAGES, parts + 1), MAX_RING // (rows.n * 2))
    for s in (0 if stages else deepest, 2 if stages > 2 else deepest, deep):
        if s != stages and {"stages": s} not in out and (s == 0 or s >= parts + (parts > 1)):
            out.append({"stages": s})
    vec = widest_vec(rows.n, "bf16")
    out += [{"threads": h} for h in (rows.threads // 2, 2 * rows.threads)
            if 64 <= h <= 1024 and -(-rows.n // (h * vec)) * vec <= MAX_VALUES]
    if stages:
        other = 1 if parts > 1 else 2
        plan = row_plan(n, "bf16", most=most, parts=other)
        if plan[1] == other and plan[2]:
            out.append({"parts": other})
        if module.__name__ == "row_softmax" and parts == 1:
            out.append({"stream": True})
    return out


def _name(op, n, kw):
    suffix = {"threads": lambda v: f"_t{v}", "stages": lambda v: "_regs" if v == 0 else f"_s{v}",
              "parts": lambda v: f"_p{v}", "stream": lambda v: "_stream" if v else "_hold"}
    return f"{op}_bf16_{n}" + "".join(suffix[key](v) for key, v in kw.items())


def build(out, chip, alt=False):
    """Compile the kernels of NS for both ops into the bundle ``out``
    (``alt``: also the variants of ``_variants``)."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from bundle_common import new_bundle, save_cubin, write_manifest

    import rmsnorm
    import row_softmax
    import rows_host

    out = new_bundle(out)
    for f in ("row_softmax.py", "rmsnorm.py", "rows_host.py"):
        shutil.copy(os.path.join(ROOT, "examples", f), out)
    shutil.copy(os.path.join(ROOT, "test", "gpu", "rows_reference.py"), out)
    shutil.copy(os.path.abspath(__file__), out)
    kernels = []
    for op, module in (("row_softmax", row_softmax), ("rmsnorm", rmsnorm)):
        for n, kw in ((n, v) for n in NS for v in _variants(module, n, alt)):
            k = module.build(n, "bf16", chip=chip, name=_name(op, n, kw), **kw)
            fn = k.compile()
            kernels.append({"op": op, "name": k.name, "image": save_cubin(out, k.name, chip, fn),
                            "launch": fn.metadata(), "rows": rows_host.meta_of(k.rows, k)})
            print(f"built {k.name}: {k.rows!r}" + (f" x {k.parts} parts" if k.parts > 1 else "")
                  + f", block {k.block_dim[0]}, {k.stages} stages in shared memory")
    total = write_manifest(out, {"chip": chip, "kernels": kernels})
    if total is None:
        return 1
    print(f"{out}: {len(kernels)} kernels, {total / 1024:.0f} KiB; on the GPU host: "
          f"cd {os.path.relpath(out, ROOT)} && python3 bench_rows.py")
    return 0


def timed(torch, fn, iters):
    """Milliseconds per call of ``fn`` over ``iters`` back-to-back calls."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters


def _few_rows_wrong(torch, ref, kernel, op, n, w):
    """Elements beyond the bound for 1, 3 and 37 rows (fewer rows than
    CTAs: some CTAs' loops never run), or -1 when a launch wrote into the
    row after the output."""
    for m in (1, 3, 37):
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        buf = torch.full((m + 1, n), 7.0, device="cuda", dtype=torch.bfloat16)
        if op == "row_softmax":
            kernel(x, out=buf[:m])
            want = ref.softmax_ref(x)
        else:
            kernel(x, w, 1e-6, out=buf[:m])
            want = ref.rmsnorm_ref(x, w, 1e-6)
        torch.cuda.synchronize()
        if not (buf[m] == 7.0).all():
            return -1
        bad, _ = ref.beyond_bound(buf[:m], want)
        if bad:
            return bad
    return 0


def run(args):
    import torch

    sys.path.insert(0, HERE)
    import rows_reference as ref
    from rmsnorm import RmsNorm
    from row_softmax import RowSoftmax

    with open(os.path.join(HERE, "manifest.json")) as f:
        manifest = json.load(f)
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    print(f"{props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}; "
          f"{args.mib} MiB of input per case, {args.rounds} alternating rounds x "
          f"{args.iters} launches, median round")
    print(f"{'kernel':34s} {'N':>6s} {'M':>7s} {'ours GB/s':>10s} {'torch GB/s':>10s} "
          f"{'copy GB/s':>10s} {'ours/copy':>9s} {'torch/copy':>10s} {'ours/torch':>10s}")
    results = []
    for e in manifest["kernels"]:
        if args.ops and e["op"] not in args.ops:
            continue
        meta = e["rows"]
        with open(os.path.join(HERE, e["image"]), "rb") as f:
            image = f.read()
        n = meta["n"]
        m = max(1, (args.mib << 20) // (2 * n))
        gen = torch.Generator(device=dev).manual_seed(n)
        x = torch.randn(m, n, device=dev, dtype=torch.bfloat16, generator=gen)
        y = torch.empty_like(x)
        copy_dst = torch.empty_like(x)
        moved = 2 * x.numel() * x.element_size()
        if e["op"] == "row_softmax":
            kernel = RowSoftmax(image, meta, e["launch"])
            ours = lambda: kernel(x, out=y)  # noqa: E731
            theirs = lambda: torch.softmax(x, -1)  # noqa: E731
            want = ref.softmax_ref(x)
        else:
            kernel = RmsNorm(image, meta, e["launch"])
            w = (1 + 0.1 * torch.randn(n, device=dev, generator=gen)).bfloat16()
            moved += w.numel() * w.element_size()
            ours = lambda: kernel(x, w, 1e-6, out=y)  # noqa: E731
            theirs = lambda: torch.nn.functional.rms_norm(x, (n,), w, 1e-6)  # noqa: E731
            want = ref.rmsnorm_ref(x, w, 1e-6)
        ours()
        torch.cuda.synchronize()
        bad, worst = ref.beyond_bound(y, want)
        del want
        if not bad:
            bad = _few_rows_wrong(torch, ref, kernel, e["op"], n, w if e["op"] == "rmsnorm" else None)
        if bad:
            print(f"{e['name']}: WRONG: {bad} elements beyond the bound (worst {worst:.3g} of the bound)")
            results.append({"name": e["name"], "wrong": bad})
            continue
        copy = lambda: copy_dst.copy_(x)  # noqa: E731
        for fn in (ours, theirs, copy):         # warm-up (and torch's first-call work)
            timed(torch, fn, 2)
        t = {"ours": [], "torch": [], "copy": []}
        for _ in range(args.rounds):
            for key, fn in (("ours", ours), ("torch", theirs), ("copy", copy)):
                t[key].append(timed(torch, fn, args.iters))
        ms = {k: statistics.median(v) for k, v in t.items()}
        gbs = {k: (moved if k != "copy" else 2 * x.numel() * 2) / v / 1e6 for k, v in ms.items()}
        row = {"name": e["name"], "op": e["op"], "n": n, "threads": meta["threads"],
               "stages": meta.get("stages", 0), "m": m, "ms": ms, "gb_s": gbs,
               "ours_of_copy": gbs["ours"] / gbs["copy"],
               "torch_of_copy": gbs["torch"] / gbs["copy"],
               "ours_over_torch": ms["torch"] / ms["ours"], "worst_of_bound": worst}
        results.append(row)
        print(f"{e['name']:34s} {n:6d} {m:7d} {gbs['ours']:10.0f} {gbs['torch']:10.0f} "
              f"{gbs['copy']:10.0f} {row['ours_of_copy']:9.3f} {row['torch_of_copy']:10.3f} "
              f"{row['ours_over_torch']:9.2f}x", flush=True)
        del x, y, copy_dst
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": props.name, "results": results}, f, indent=1)
    return 1 if any("wrong" in r for r in results) else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", metavar="OUT", help="compile the kernels into the bundle OUT "
                    "(needs MLIR) instead of running")
    ap.add_argument("--chip", default="sm_90a")
    ap.add_argument("--alt", action="store_true", help="with --build: also build each CTA-per-"
                    "row kernel without its ring of rows, and with half and twice the threads "
                    "(the choices' checks)")
    ap.add_argument("--mib", type=int, default=256, help="MiB of input per case")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--ops", nargs="*", choices=OPS)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    if args.build:
        return build(args.build, args.chip, args.alt)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
