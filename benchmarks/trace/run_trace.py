#!/usr/bin/env python3
"""GPU side of the trace demo: run the streaming copy and the GEMM plain and
traced, check both, measure what tracing costs, and write each traced run
as a Chrome trace (JSON) and a stage-occupancy PNG.

    python3 run_trace.py --out DIR
"""

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def timed(fn, reps=10):
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    import torch

    from hopper_gemm_host import HopperGemm, check
    from pipeline_mlir import runtime as rt
    from pipeline_mlir.runtime import trace as rtrace

    man = json.load(open(os.path.join(HERE, "manifest.json")))
    result = {"device": torch.cuda.get_device_name()}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for e in man["kernels"]:
        image = open(os.path.join(HERE, e["image"]), "rb").read()
        key = f"{e['what']}_{e['mode']}"
        if e["what"] == "stream":
            mod = rt.Module(image, name=e["name"])
            kern = mod.kernel(e["name"], signature=["ptr", "ptr", "i32"])
            tb = (rtrace.TraceBuffer(mod, pipelines=len(e["names"]), ctas=sms,
                                     warps_per_cta=e["block"] // 32, per_verb=64)
                  if e["mode"] == "traced" else None)
            n = 64 << 20
            src = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
            dst = torch.zeros_like(src)
            stream = torch.cuda.current_stream()
            run = lambda g=sms: kern.launch(grid=(g,), block=(e["block"],), smem=e["smem"],  # noqa
                                            args=[src, dst, n // e["tile"]], stream=stream,
                                            sync=False)
            ms = timed(run)
            ok = bool(torch.equal(src, dst))
            if tb:   # a small launch for a readable picture: 4 CTAs
                tb.reset()
                kern.launch(grid=(4,), block=(e["block"],), smem=e["smem"],
                            args=[src, dst, 64], sync=True)
        else:
            g = HopperGemm(image, e["gemm"])
            err = check(g, 1024, 1024, 1024)
            ok = True
            m = 8192
            a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
            c = torch.empty(m, m, device="cuda", dtype=torch.bfloat16)
            tb = None
            if e["mode"] == "traced":
                # Slots per verb: the states' counts of one launch (~2,000
                # k-blocks per CTA at 8192^3).
                tb = rtrace.TraceBuffer(g.module, pipelines=len(e["names"]), ctas=sms,
                                        warps_per_cta=e["gemm"]["threads"] // 32,
                                        per_verb=4096)
            ms = timed(lambda: g(a, b, c))
            if tb:   # one tile column of work: 1024 x 1024 x 2048 on the whole grid
                tb.reset()
                a2, b2 = a[:1024, :2048].contiguous(), b[:1024, :2048].contiguous()
                c2 = torch.empty(1024, 1024, device="cuda", dtype=torch.bfloat16)
                g(a2, b2, c2, sync=True)
            result[f"{key}_err"] = err
        result[f"{key}_ms"] = ms
        result[f"{key}_ok"] = ok
        line = f"{key}: {ms:.3f} ms, check {'ok' if ok else 'FAILED'}"
        if tb:
            recs = tb.records()
            jpath = os.path.join(args.out, f"trace_{e['what']}.json")
            n_ev = rtrace.write_chrome_trace(recs, e["names"], jpath)
            rows, span = rtrace.write_occupancy_png(recs, e["names"],
                                                    os.path.join(args.out,
                                                                 f"occupancy_{e['what']}.png"))
            line += f"; {len(recs)} records, {n_ev} trace events, {len(rows)} stage rows " \
                    f"over {span / 1000:.1f} us"
            result[f"{key}_records"] = len(recs)
        print(line, flush=True)
    for what in ("stream", "gemm"):
        result[f"{what}_trace_cost"] = result[f"{what}_traced_ms"] / result[f"{what}_plain_ms"]
        print(f"{what}: traced / plain time = {result[f'{what}_trace_cost']:.3f}")
    json.dump(result, open(os.path.join(args.out, "trace.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
