#!/usr/bin/env python3
"""GPU side of the benchmarks: runs from .bench-bundle/ (no MLIR needed).

    cd .bench-bundle && python3 run_bench.py --out results [--mib 2048] [--reps 20]

In ONE process and run: builds reference/tma_pipe.cu and reference/pingpong.cu
with nvcc and runs them; times torch's D2D copy and cuMemcpyDtoD; runs every
streaming kernel of manifest.json (checked bit-exact against the input first,
output poisoned before; a ``tensor_map`` entry (kind ``tma2d``) gets the
tensor map of the input instead of the input, see ``stream_source``), at 1
and 2 (and up to 4 when shared memory allows) CTAs per SM; then, on the same
buffers, CuTe DSL's streaming sweep (cute_streaming.py) when ``import
cutlass`` works, directly or from --cute-site (where .cute-part2/install.sh
put it), else logs why it was skipped; runs the ping-pong kernels. Writes
results/bench.json and results/bench.log and prints the summary table last.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

LOG = []


def log(msg=""):
    print(msg, flush=True)
    LOG.append(msg)


def sh(cmd, timeout=300):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def build_reference(out_dir):
    bins = {}
    for name in ("tma_pipe", "pingpong"):
        exe = os.path.join(out_dir, name)
        rc, text = sh(f"nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -o {exe} "
                      f"{HERE}/reference/{name}.cu")
        log(f"nvcc {name}: rc={rc} {text.strip()[:500]}")
        if rc == 0:
            bins[name] = exe
    return bins


def run_tma_pipe(exe, runs):
    """Best (max) GB/s per (stages, tile) over `runs` runs of tma_pipe."""
    best, memcpy, ok = {}, [], True
    for _ in range(runs):
        rc, text = sh(exe, timeout=300)
        log(text.strip())
        ok &= rc == 0 and "verify OK" in text
        for m in re.finditer(r"pipe_copy S=(\d+) TILE=(\d+) blocks=(\d+): ([\d.]+) GB/s", text):
            key = (int(m[1]), int(m[2]))
            best[key] = max(best.get(key, 0.0), float(m[4]))
        m = re.search(r"cudaMemcpy D2D: ([\d.]+) GB/s", text)
        if m:
            memcpy.append(float(m[1]))
    return {"configs": [{"stages": s, "tile": t, "gbps": g} for (s, t), g in sorted(best.items())],
            "memcpy_gbps": max(memcpy) if memcpy else None, "verify_ok": ok}


def run_pingpong_ref(exe):
    rc, text = sh(exe, timeout=300)
    log(text.strip())
    rows = []
    for m in re.finditer(r"pingpong S=(\d+) waiters=(\w+)\s+N=(\d+): clock64 ([\d.]+) cycles/[^(]+"
                         r"\(([\d.]+) cycles/handoff\) \| globaltimer ([\d.]+) ns/[^(]+"
                         r"\(([\d.]+) ns/handoff\).*SM clock (\d+) MHz", text):
        rows.append({"stages": int(m[1]), "waiters": m[2], "cycles_per_iter": float(m[4]),
                     "ns_per_iter": float(m[6]), "ns_per_handoff": float(m[7]),
                     "mhz": float(m[8])})
    return {"rows": rows, "verify_ok": rc == 0 and "verify OK" in text}


def _import_cutlass():
    import cutlass
    import cutlass.cute  # noqa: F401
    return cutlass


def load_cute(site_dir):
    """(cutlass module, None) when CuTe DSL imports, as is or once ``site_dir``
    is a site directory (its .pth puts dsl_packages/ on sys.path); else (None, why)."""
    import site
    try:
        return _import_cutlass(), None
    except Exception as err:
        first = f"{type(err).__name__}: {err}"
    if not site_dir or not os.path.isdir(site_dir):
        return None, (f"{first}; no CuTe site folder {site_dir!r} (make it with "
                      "sh .cute-part2/install.sh, see scripts/build-cute-transport.py)")
    site.addsitedir(site_dir)
    for name in [m for m in sys.modules if m == "cutlass" or m.startswith("cutlass.")]:
        del sys.modules[name]  # a failed first import may have left half a package
    try:
        return _import_cutlass(), None
    except Exception as err:
        return None, f"{first}; from {site_dir}: {type(err).__name__}: {err}"


def run_cute(src, dst, reps, only):
    """CuTe DSL's streaming sweep (cute_streaming.py's default configurations) on the
    same buffers as ours; {"skipped": why} when CuTe DSL cannot run here."""
    try:
        import cute_streaming as cs
    except ImportError as err:
        return {"skipped": f"cute_streaming.py: {err}"}
    cfgs = cs.configs(cs.DEFAULT_STAGES, [cs.parse_tile(t) for t in cs.DEFAULT_TILES])
    if only:
        cfgs = [c for c in cfgs if only.search(f"cute_tma_s{c[0]}_t{cs.tile_name(c[1], c[2])}")]
    cutlass = sys.modules["cutlass"]
    log(f"# CuTe DSL {getattr(cutlass, '__version__', '?')} from "
        f"{os.path.dirname(cutlass.__file__)}: {len(cfgs)} configurations")
    rows = cs.sweep(src, dst, cfgs, reps, log=log)
    return {"version": getattr(cutlass, "__version__", "?"), "rows": rows}


def stream_source(rt, e, src):
    """The first argument of streaming kernel ``e``: ``src`` itself, or for a
    manifest entry with a ``tensor_map`` (streaming.tensor_map) the TMA
    descriptor of ``src`` viewed as a row-major ``(n / cols, cols)`` matrix
    with that entry's box."""
    tm = e.get("tensor_map")
    if tm is None:
        return src
    if str(src.dtype).replace("torch.", "") != tm["dtype"]:
        raise ValueError(f"{e['name']}: its tensor map is of {tm['dtype']}, the buffer "
                         f"is {src.dtype}")
    return rt.make_tma_descriptor(src.view(-1, tm["cols"]), box_shape=tm["box"],
                                  swizzle=tm["swizzle"])


def time_events(torch, fn, reps):
    """Per-launch times in ms of `reps` launches of `fn` (CUDA events on
    torch's stream, after one warm-up launch)."""
    start = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    fn()
    torch.cuda.synchronize()
    for a, b in zip(start, end):
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in zip(start, end)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "bench-out"))
    ap.add_argument("--mib", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--ref-runs", type=int, default=2)
    ap.add_argument("--pingpong-n", type=int, default=1_000_000)
    ap.add_argument("--only", default="", help="regex on kernel names")
    ap.add_argument("--cute-site", default=os.environ.get("CUTE_SITE", "/tmp/site"),
                    help="--target folder of .cute-part2/install.sh, used when "
                    "`import cutlass` fails as is")
    ap.add_argument("--no-cute", action="store_true", help="skip CuTe DSL's streaming sweep")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()

    import torch
    from pipeline_mlir import runtime as rt

    torch.cuda.init()
    dev = torch.cuda.get_device_properties(0)
    sms = dev.multi_processor_count
    rdev = rt.default_device()
    smem_sm = 228 * 1024  # H100/H200 shared memory per SM (KiB), 1 KiB reserved per CTA
    result = {"gpu": dev.name, "sms": sms, "torch": torch.__version__,
              "cuda": torch.version.cuda, "bytes": args.mib << 20, "reps": args.reps,
              "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    rc, smi = sh("nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit "
                 "--format=csv,noheader")
    result["nvidia_smi"] = smi.strip()
    log(f"# GPU {dev.name}, {sms} SMs, cc {dev.major}.{dev.minor}; nvidia-smi: {smi.strip()}")

    bins = build_reference(tempfile.mkdtemp(prefix="bench-ref-"))

    # ---- copies: torch and cuMemcpyDtoD --------------------------------------------------
    nbytes = args.mib << 20
    src = torch.randint(-2**31, 2**31 - 1, (nbytes // 4,), dtype=torch.int32, device="cuda")
    dst = torch.empty_like(src)
    gb = 2.0 * nbytes / 1e9
    ms = statistics.median(time_events(torch, lambda: dst.copy_(src), args.reps))
    result["torch_copy_gbps"] = gb / ms * 1e3
    drv = rt._driver.cuda()
    stream = drv.CUstream(int(torch.cuda.current_stream().cuda_stream))

    def dtod():
        err = drv.cuMemcpyDtoDAsync(dst.data_ptr(), src.data_ptr(), nbytes, stream)[0]
        if int(err):
            raise RuntimeError(f"cuMemcpyDtoDAsync: {err}")
    ms = statistics.median(time_events(torch, dtod, args.reps))
    result["cumemcpy_gbps"] = gb / ms * 1e3
    log(f"torch D2D copy {result['torch_copy_gbps']:.1f} GB/s, cuMemcpyDtoD "
        f"{result['cumemcpy_gbps']:.1f} GB/s (read+write, median of {args.reps})")

    manifest = json.load(open(os.path.join(HERE, "manifest.json")))

    # ---- streaming kernels -----------------------------------------------------------------
    rows = []
    only = re.compile(args.only) if args.only else None
    for e in manifest["stream"]:
        if only and not only.search(e["name"]):
            continue
        mod = rt.Module(os.path.join(HERE, e["image"]))
        kern = mod.kernel(e["name"], signature=e["signature"])
        tiles = nbytes // e["tile"]
        try:
            first = stream_source(rt, e, src)
        except Exception as err:
            rows.append({"name": e["name"], "kind": e["kind"], "correct": False,
                         "error": f"tensor map: {type(err).__name__}: {err}"[:400]})
            log(f"{e['name']:26s} tensor map: {rows[-1]['error']}")
            continue
        fit = min(4, smem_sm // (e["smem"] + 1024), 2048 // e["block"])
        for ctas in sorted({1, 2, fit}):
            if ctas > fit or ctas < 1:
                continue
            grid = sms * ctas
            dst.fill_(-1)  # poison: every byte must be written
            torch.cuda.synchronize()
            row = {**{k: e[k] for k in ("name", "kind", "stages", "tile", "block", "smem")},
                   "ctas_per_sm": ctas, "grid": grid}
            try:
                kern.launch(grid=(grid,), block=(e["block"],), smem=e["smem"],
                            args=[first, dst, tiles], timeout=30)
                row["correct"] = bool(torch.equal(src, dst))
                runs = [kern.launch(grid=(grid,), block=(e["block"],), smem=e["smem"],
                                    args=[first, dst, tiles], sync=False)
                        for _ in range(args.reps)]
                times = [r.elapsed_ms for r in runs]
                row["ms"] = statistics.median(times)
                row["gbps"] = gb / row["ms"] * 1e3
                row["spread"] = (max(times) - min(times)) / row["ms"]
            except Exception as err:  # report and go on with the others
                row["error"] = f"{type(err).__name__}: {err}"[:400]
                row["correct"] = False
            rows.append(row)
            log(f"{e['name']:26s} ctas/SM {ctas} grid {grid:4d}: "
                + (f"{row['gbps']:7.1f} GB/s  check {'OK' if row['correct'] else 'FAIL'}"
                   if "gbps" in row else row.get("error", "?")))
        if first is not src:
            first.free()  # the descriptor's device copy
    result["stream"] = rows

    # ---- CuTe DSL's streaming kernel (same process, same buffers, after ours) ---------------
    if args.no_cute:
        result["cute"] = {"skipped": "--no-cute"}
    else:
        cutlass, why = load_cute(args.cute_site)
        result["cute"] = run_cute(src, dst, args.reps, only) if cutlass else {"skipped": why}
    if "skipped" in result["cute"]:
        log(f"CuTe DSL streaming: SKIPPED: {result['cute']['skipped']}")

    # ---- reference streaming kernel (same process, after ours) ----------------------------
    del src, dst
    torch.cuda.empty_cache()
    if "tma_pipe" in bins:
        result["tma_pipe"] = run_tma_pipe(bins["tma_pipe"], args.ref_runs)

    # ---- ping-pong -----------------------------------------------------------------------
    pp = []
    out = torch.zeros(3, dtype=torch.int64, device="cuda")
    n = args.pingpong_n
    for e in manifest["pingpong"]:
        mod = rt.Module(os.path.join(HERE, e["image"]))
        kern = mod.kernel(e["name"], signature=e["signature"])
        kern.launch(grid=(1,), block=(64,), smem=e["smem"], args=[min(n, 10000), out], timeout=30)
        out.zero_()
        run = kern.launch(grid=(1,), block=(64,), smem=e["smem"], args=[n, out], timeout=60)
        cyc, ns, done = (int(x) for x in out.cpu().tolist())
        per = ns / n
        row = {"stages": e["stages"], "cycles_per_iter": cyc / n, "ns_per_iter": per,
               "ns_per_handoff": per / 2, "event_ns_per_iter": run.elapsed_ms * 1e6 / n,
               "mhz": 1e3 * cyc / ns if ns else 0.0, "consumed_ok": done == n}
        pp.append(row)
        log(f"ours pingpong S={e['stages']}: {row['cycles_per_iter']:.1f} cycles/iter, "
            f"{per:.1f} ns/iter ({per / 2:.1f} ns/handoff), {row['mhz']:.0f} MHz, "
            f"consumed {'OK' if done == n else done}")
    result["pingpong"] = pp
    if "pingpong" in bins:
        result["pingpong_ref"] = run_pingpong_ref(bins["pingpong"])

    # ---- summary ---------------------------------------------------------------------------
    summarize(result)
    result["wall_s"] = time.time() - t_start
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(args.out, "bench.log"), "w") as f:
        f.write("\n".join(LOG) + "\n")
    return 0


def summarize(r):
    log("")
    log(f"== summary on {r['gpu']} ({r['sms']} SMs), {r['bytes'] >> 20} MiB, read+write GB/s ==")
    copy = max(r["torch_copy_gbps"], r["cumemcpy_gbps"])
    ref = r.get("tma_pipe", {})
    ref_best = max((c["gbps"] for c in ref.get("configs", [])), default=None)
    log(f"torch copy {r['torch_copy_gbps']:.0f}  cuMemcpyDtoD {r['cumemcpy_gbps']:.0f}  "
        f"tma_pipe.cu memcpy {ref.get('memcpy_gbps') or 0:.0f}  tma_pipe.cu best "
        f"{ref_best or 0:.0f} (verify {'OK' if ref.get('verify_ok') else 'FAIL/absent'})")
    ok = [x for x in r["stream"] if x.get("correct") and "gbps" in x]
    bad = [x["name"] for x in r["stream"] if not x.get("correct")]
    best = {}
    for x in ok:
        key = (x["kind"], x["stages"])
        if key not in best or x["gbps"] > best[key]["gbps"]:
            best[key] = x
    log("kind     S  best GB/s (tile, ctas/SM)  / copy  / tma_pipe.cu best")
    for (kind, s), x in sorted(best.items()):
        log(f"{kind:8s} {s}  {x['gbps']:7.0f} ({x['tile'] // 1024}K, {x['ctas_per_sm']})"
            f"      {x['gbps'] / copy:.3f}  " + (f"{x['gbps'] / ref_best:.3f}" if ref_best else "-"))
    by_kind = {}
    for x in ok:
        if x["kind"] not in by_kind or x["gbps"] > by_kind[x["kind"]]["gbps"]:
            by_kind[x["kind"]] = x
    for kind, x in sorted(by_kind.items()):
        log(f"BEST {kind:8s} {x['name']} ctas/SM {x['ctas_per_sm']}: {x['gbps']:.0f} GB/s = "
            f"{x['gbps'] / copy:.3f} of copy"
            + (f", {x['gbps'] / ref_best:.3f} of tma_pipe.cu best" if ref_best else ""))
    # Same configurations as tma_pipe.cu (its block rule: 2 CTAs/SM when S*TILE <= 100000).
    for c in ref.get("configs", []):
        ctas = 2 if c["stages"] * c["tile"] <= 100000 else 1
        mine = [x for x in ok if x["kind"] == "tma" and x["stages"] == c["stages"]
                and x["tile"] == c["tile"] and x["ctas_per_sm"] == ctas]
        if mine:
            log(f"same config S={c['stages']} tile={c['tile'] // 1024}K ctas/SM {ctas}: ours tma "
                f"{mine[0]['gbps']:.0f} vs tma_pipe.cu {c['gbps']:.0f} = "
                f"{mine[0]['gbps'] / c['gbps']:.3f}")
    cute = r.get("cute", {})
    cute_ok = [x for x in cute.get("rows", []) if x.get("correct") and "gbps" in x]
    bad += [x["name"] for x in cute.get("rows", []) if not x.get("correct")]
    if "skipped" in cute:
        log(f"CuTe DSL streaming: skipped ({cute['skipped'][:200]})")
    elif cute_ok:
        cb = max(cute_ok, key=lambda x: x["gbps"])
        log(f"BEST cute     {cb['name']} ctas/SM {cb['ctas_per_sm']}: {cb['gbps']:.0f} GB/s = "
            f"{cb['gbps'] / copy:.3f} of copy"
            + (f", {cb['gbps'] / ref_best:.3f} of tma_pipe.cu best" if ref_best else ""))
        for kind, x in sorted(by_kind.items()):
            log(f"ours/cute {kind:8s} best {x['gbps']:.0f} / {cb['gbps']:.0f} = "
                f"{x['gbps'] / cb['gbps']:.3f}")
        if by_kind:
            ours = max(by_kind.values(), key=lambda x: x["gbps"])
            log(f"RATIO ours_best / cute_best = {ours['gbps']:.0f} / {cb['gbps']:.0f} = "
                f"{ours['gbps'] / cb['gbps']:.3f} ({ours['name']} vs {cb['name']})")
            r["ours_over_cute"] = ours["gbps"] / cb["gbps"]
        # Same (stages, tile bytes, CTAs/SM): our tma kinds (1-D bulk, 2-D tensor) vs CuTe's.
        same = {}
        for c in sorted(cute_ok, key=lambda x: (x["stages"], x["tile"], x["ctas_per_sm"])):
            for kind in ("tma", "tma2d"):
                mine = [x for x in ok if x["kind"] == kind and x["stages"] == c["stages"]
                        and x["tile"] == c["tile"] and x["ctas_per_sm"] == c["ctas_per_sm"]]
                if mine:
                    same.setdefault(kind, []).append(mine[0]["gbps"] / c["gbps"])
                    log(f"same config S={c['stages']} tile={c['tile'] // 1024}K ctas/SM "
                        f"{c['ctas_per_sm']}: ours {kind} {mine[0]['gbps']:.0f} vs cute "
                        f"{c['gbps']:.0f} = {mine[0]['gbps'] / c['gbps']:.3f}")
        for kind, ratios in sorted(same.items()):
            log(f"same config ours {kind} / cute: median {statistics.median(ratios):.3f}, "
                f"min {min(ratios):.3f}, max {max(ratios):.3f} over {len(ratios)} configurations")
    else:
        log("CuTe DSL streaming: no correct row")
    if bad:
        log(f"FAILED checks: {bad}")
    ppr = {(x["stages"]): x for x in r.get("pingpong_ref", {}).get("rows", [])
           if x["waiters"] == "warp"}
    for x in r.get("pingpong", []):
        ref_x = ppr.get(x["stages"])
        log(f"pingpong S={x['stages']}: ours {x['ns_per_handoff']:.2f} ns/handoff "
            f"({x['cycles_per_iter']:.1f} cyc/iter)" +
            (f" vs pingpong.cu(warp) {ref_x['ns_per_handoff']:.2f} = "
             f"{x['ns_per_handoff'] / ref_x['ns_per_handoff']:.3f}" if ref_x else ""))


if __name__ == "__main__":
    sys.exit(main())
