#!/usr/bin/env python3
"""One streaming kernel of the bundle, launched for a profiler (ncu).

    python3 profile_stream.py --bench OUT/bench.json [--kind tma]    # the best row
    python3 profile_stream.py --name stream_tma_s2_t16k --ctas 2      # a given one

Picks the fastest correct row of a run_bench.py result (optionally of one
kind), or the named kernel at ``--ctas`` CTAs per SM, and launches it
``--launches`` times on the run's buffer size (the first is the warm-up), so
that ``ncu --launch-skip 1 --launch-count 1`` profiles a warm launch, and
checks the output. Prints the chosen configuration.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", help="bench.json of run_bench.py: profile its best row")
    ap.add_argument("--kind", default="", help="with --bench: best row of this kind only")
    ap.add_argument("--name")
    ap.add_argument("--ctas", type=int, default=1)
    ap.add_argument("--mib", type=int, default=2048)
    ap.add_argument("--launches", type=int, default=2)
    args = ap.parse_args()

    import torch
    from pipeline_mlir import runtime as rt
    from run_bench import stream_source

    manifest = json.load(open(os.path.join(HERE, "manifest.json")))
    entries = {e["name"]: e for e in manifest["stream"]}
    nbytes = args.mib << 20
    if args.bench:
        r = json.load(open(args.bench))
        rows = [x for x in r["stream"] if x.get("correct") and "gbps" in x
                and (not args.kind or x["kind"] == args.kind)]
        best = max(rows, key=lambda x: x["gbps"])
        name, ctas, nbytes = best["name"], best["ctas_per_sm"], r["bytes"]
        print(f"best of {args.bench}: {name} ctas/SM {ctas}: {best['gbps']:.0f} GB/s "
              f"(torch copy {r['torch_copy_gbps']:.0f})")
    else:
        name, ctas = args.name, args.ctas
    e = entries[name]
    torch.cuda.init()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    src = torch.randint(-2**31, 2**31 - 1, (nbytes // 4,), dtype=torch.int32, device="cuda")
    dst = torch.empty_like(src)
    kern = rt.Module(os.path.join(HERE, e["image"])).kernel(name, signature=e["signature"])
    first = stream_source(rt, e, src)  # tma2d: the tensor map of src
    grid = sms * ctas
    for _ in range(args.launches):
        kern.launch(grid=(grid,), block=(e["block"],), smem=e["smem"],
                    args=[first, dst, nbytes // e["tile"]])
    ok = bool(torch.equal(src, dst))
    print(f"profiled {name}: grid {grid} ({ctas}/SM), block {e['block']}, smem {e['smem']}, "
          f"tile {e['tile']}, stages {e['stages']}, output {'OK' if ok else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
