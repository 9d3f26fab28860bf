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
builds each without it (``_regs``) and with half and twice the threads,
other depths, parts and ways out (``_variants``); ``--alt-ns`` limits
those to some row lengths, ``--alt-ops`` to some ops; ``--diag`` adds
ring copies (``ring_copy``: the ring and its stores without the math).

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
OPS = ("row_softmax", "rmsnorm", "ring_copy")
# Row lengths of the ring copies (--diag).
DIAG_NS = [16384, 24576, 32768]


def _variants(module, n, alt):
    """Keyword arguments of ``module.build`` per kernel built for rows of
    ``n``: the defaults (``row_plan``: ``{}``) and, with ``alt``, for a CTA
    per row, the choices' checks: without the ring where the default has
    one (stages 0), with it where it has none, other depths (two stages, as
    many as fit two rings per SM, as many as fit one), half and twice the
    threads, a row in one part or two, and for the softmax the other way
    of holding the row (``stream``)."""
    from pipeline_mlir.kernel import row_cluster, row_plan, row_stages
    from pipeline_mlir.kernel.row_ring import MAX_RING, MAX_STAGES
    from pipeline_mlir.kernel.rows import MAX_VALUES, widest_vec

    most = getattr(module, "RING_STAGES", None)
    rows, parts, stages = row_plan(n, "bf16", most=most)
    out = [{}]
    if not alt or rows.per_warp:
        return out
    if module.__name__ == "row_softmax" and row_cluster(n, "bf16") > 1:
        # the default splits the row over a cluster: the whole row in one
        # CTA (the plan below), and other cluster sizes and ways
        c = row_cluster(n, "bf16")
        out += [{"cluster": 1}, {"stream": True}]
        out += [{"cluster": o} for o in (2, 4) if o != c and row_cluster_fits(n, o)]
        out += [{"cluster": o, "stream": True} for o in (2, 4)
                if o != c and row_cluster_fits(n, o)]
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
            out.append({"stream": True, "store": "bulk"})
    # ways out of a ring (a bulk store of the stage), an evict-first policy
    # on the ring's loads
    if not stages:
        out.append({"load_hint": "nc256"})
        if deepest > 2:
            out.append({"stages": 2})
    ring = {} if stages else ({"stages": deepest} if deepest else None)
    if ring is not None:
        out.append({**ring, "store": "bulk"})
        out.append({**ring, "load_hint": "evict_first"})
        if module.__name__ == "row_softmax" and stages and n * 2 > 32 * 1024:
            # each row split over a cluster of two (their max and sum through DSMEM)
            out.append({"cluster": 2})
    return out


def row_cluster_fits(n, c):
    """Whether rows of ``n`` bf16 split over ``c`` CTAs into slices that
    take a ring of whole slices."""
    from pipeline_mlir.kernel import row_plan

    if n % c or (n // c) % 8:
        return False
    _, parts, stages = row_plan(n // c, "bf16")
    return parts == 1 and bool(stages)


def _name(op, n, kw):
    suffix = {"threads": lambda v: f"_t{v}", "stages": lambda v: "_regs" if v == 0 else f"_s{v}",
              "parts": lambda v: f"_p{v}", "stream": lambda v: "_stream" if v else "_hold",
              "store": lambda v: {"global": "_st", "bulk": "_bulk"}[v],
              "load_hint": lambda v: {"evict_first": "_ldef", "nc256": "_ldnc"}[v],
              "cluster": lambda v: f"_c{v}"}
    return f"{op}_bf16_{n}" + "".join(suffix[key](v) for key, v in kw.items())


def build_ring_copy(n, dtype="bf16", store="global", chip="sm_90a", name=None):
    """A ring of rows and nothing else (the diagnostic ``ring_copy``): the
    softmax's ring (``row_plan``) whose consumers store each row as read."""
    from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, RowRing, row_plan

    rows, parts, stages = row_plan(n, dtype)
    k = Kernel(name or f"ring_copy_{dtype}_{n}", chip=chip,
               block_dim=RowRing.block_threads(rows),
               params={"src": GlobalPtr(), "dst": GlobalPtr(), "m": Int32()})
    with k:
        src, dst, m = k.args
        ring = RowRing(rows, k, stages, parts, store=store)
        ring.produce(src, m, dst=dst)
        with ring.consumers():
            for row, stage in ring.rows(m):
                for p in range(parts):
                    stage.store(stage.load(p), dst, row, p)
    k.rows, k.parts, k.stages = rows, parts, stages
    return k


BULK_LOAD = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"


def _compile(k, load_hint=None):
    """``k.compile()``, or with ``load_hint`` ("evict_first") its PTX with
    an L2 cache policy on every bulk load of the ring (a measurement only:
    the dialect's bulk load carries no policy), assembled by ptxas."""
    if not load_hint:
        return k.compile()
    import re

    ptx = k.to_ptx()
    if load_hint == "nc256":      # rows loaded into registers: the read-only path, 256-byte fetches
        ptx, hits = re.subn(r"\bld\.global\.v4\.b32",
                            "ld.global.nc.L1::no_allocate.L2::256B.v4.b32", ptx)
        return _assemble(k, ptx, hits)
    ptx, hits = re.subn(
        rf"^(\s*){re.escape(BULK_LOAD)} (\[[^\]]+\], \[[^\]]+\], [^,]+, \[[^\]]+\]);",
        rf"\1createpolicy.fractional.L2::{load_hint}.b64 %rdpolicy, 1.0;\n"
        rf"\1{BULK_LOAD}.L2::cache_hint \2, %rdpolicy;", ptx, flags=re.M)
    ptx = re.sub(r"^(\s*\.reg \.b64\s+%rd<\d+>;)", r"\1\n\t.reg .b64 %rdpolicy;", ptx,
                 count=1, flags=re.M)
    return _assemble(k, ptx, hits)


def _assemble(k, ptx, hits):
    import subprocess
    import tempfile

    from pipeline_mlir.runtime.compiled import CompiledKernel

    if not hits:
        raise RuntimeError(f"{k.name}: no load to patch")
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "k.ptx"), "w") as f:
            f.write(ptx)
        subprocess.run(["ptxas", f"-arch={k.chip}", os.path.join(d, "k.ptx"), "-o",
                        os.path.join(d, "k.cubin")], check=True)
        with open(os.path.join(d, "k.cubin"), "rb") as f:
            cubin = f.read()
    return CompiledKernel.cached(cubin, name=k.name, params=[(n, p.kind) for n, p in k.params],
                                 block=k.block_dim, cluster=k.cluster_dim, smem=k.smem_bytes,
                                 chip=k.chip)


def build(out, chip, alt=False, alt_ns=None, alt_ops=None, diag=False):
    """Compile the kernels of NS for both ops into the bundle ``out``
    (``alt``: also the variants of ``_variants``, at ``alt_ns`` and of
    ``alt_ops`` where given; ``diag``: the ring copies at DIAG_NS)."""
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
    jobs = []
    for op, module in (("row_softmax", row_softmax), ("rmsnorm", rmsnorm)):
        for n in NS:
            more = alt and (not alt_ns or n in alt_ns) and (not alt_ops or op in alt_ops)
            jobs += [(op, n, kw, module.build) for kw in _variants(module, n, more)]
    if diag:
        jobs += [("ring_copy", n, {"store": s}, build_ring_copy) for n in DIAG_NS
                 for s in ("global", "bulk")]
    for op, n, kw, make in jobs:
        kw = dict(kw)
        hint = kw.pop("load_hint", None)
        k = make(n, "bf16", chip=chip, name=_name(op, n, {**kw, **({"load_hint": hint}
                                                                  if hint else {})}), **kw)
        fn = _compile(k, hint)
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
        if op == "ring_copy":
            kernel(x, out=buf[:m])
            want = x.float()
        elif op == "row_softmax":
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
        try:
            _case(torch, ref, e, args, dev, results)
        except Exception as err:                      # a variant that does not launch
            print(f"{e['name']}: FAILED: {type(err).__name__}: {err}", flush=True)
            results.append({"name": e["name"], "wrong": -2, "error": str(err)})
            torch.cuda.synchronize()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": props.name, "results": results}, f, indent=1)
    return 1 if any("wrong" in r for r in results) else 0


def _case(torch, ref, e, args, dev, results):
    """Check and time the kernel of manifest entry ``e``; its row to ``results``."""
    from rmsnorm import RmsNorm
    from row_softmax import RowSoftmax

    if args.ops and e["op"] not in args.ops:
        return
    if args.names and not any(e["name"].startswith(p) for p in args.names):
        return
    if args.skip and any(p in e["name"] for p in args.skip):
        return
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
    if e["op"] == "ring_copy":                # the launcher of (src, dst, m) kernels
        kernel = RowSoftmax(image, meta, e["launch"])
        ours = lambda: kernel(x, out=y)  # noqa: E731
        theirs = lambda: torch.softmax(x, -1)  # noqa: E731
        want = x.float()
    elif e["op"] == "row_softmax":
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
        return
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", metavar="OUT", help="compile the kernels into the bundle OUT "
                    "(needs MLIR) instead of running")
    ap.add_argument("--chip", default="sm_90a")
    ap.add_argument("--alt", action="store_true", help="with --build: also build each CTA-per-"
                    "row kernel without its ring of rows, and with half and twice the threads "
                    "(the choices' checks)")
    ap.add_argument("--alt-ns", type=int, nargs="*", help="with --alt: only these row lengths")
    ap.add_argument("--alt-ops", nargs="*", choices=OPS[:2], help="with --alt: only these ops")
    ap.add_argument("--diag", action="store_true", help="with --build: also the ring copies "
                    f"(ring_copy, at {DIAG_NS})")
    ap.add_argument("--names", nargs="*", help="run only the kernels whose name starts with "
                    "one of these")
    ap.add_argument("--skip", nargs="*", help="skip the kernels whose name contains one of these")
    ap.add_argument("--mib", type=int, default=256, help="MiB of input per case")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--ops", nargs="*", choices=OPS)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    if args.build:
        return build(args.build, args.chip, args.alt, args.alt_ns, args.alt_ops, args.diag)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
