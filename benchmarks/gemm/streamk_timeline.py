#!/usr/bin/env python3
"""Where a stream-K launch's time goes, per CTA and phase: runs the
profiling build of a stream-K variant (``<tile>_streamk_timeline``,
kernels/streamk_timeline.py), which stamps ``%globaltimer`` and
``%clock64`` at each phase of each unit, and prints, per shape, the
phases' spans over the CTAs (median and max, in us):

    python3 streamk_timeline.py --out results --variant 128x256c2_streamk@spread 4544x1008x7784
    python3 streamk_timeline.py --out results --variant 128x128_streamk 224x168x14872 \\
        --sk-ctas 52 132

``--variant``: a stream-K variant of gemm_configs (``@spread`` /
``@leftover``: that launch kind); its ``_timeline`` build runs (build the
bundle with ``build_bundle.py --shapes ... --variants NAME_timeline``).
``--sk-ctas``: run the stream-K run on these CTA counts too (the model's
choice first). Each output is checked against torch in fp32. The raw
stamps go to ``--out`` as ``timeline-<variant>-<shape>-<sk_ctas>.npy``,
shape (CTAs, warpgroups, slots, events, 2) int64: globaltimer ns, clock64.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# As kernels/streamk_timeline.py (test_gemm_streamk.py checks they agree).
EVENTS = ("start", "mainloop", "stored", "arrived", "summed", "done")
UNITS = 7
SLOTS = UNITS + 1
MAX_WARPGROUPS = 3


def phases(raw):
    """Per (CTA, warpgroup, unit) with a start stamp: a dict of the unit's
    phases in us (missing stamps left out) and its start and end (us from
    the launch's first stamp)."""
    import numpy as np

    t = raw[..., 0].astype(np.int64)
    t0 = t[t > 0].min()
    out = []
    for c in range(t.shape[0]):
        for w in range(t.shape[1]):
            for u in range(UNITS):
                ev = t[c, w, u]
                if ev[0] == 0:
                    continue
                stamps = {EVENTS[e]: (ev[e] - t0) / 1e3 for e in range(len(EVENTS)) if ev[e]}
                out.append(dict(cta=c, wg=w, unit=u, **stamps))
    return out


def summarize(rows, raw):
    import numpy as np

    def spans(select, a, b):
        v = [r[b] - r[a] for r in rows if select(r) and a in r and b in r]
        return (f"{np.median(v):6.2f} / {max(v):6.2f} ({len(v)})" if v else "-")

    partial = lambda r: "stored" in r          # noqa: E731
    last = lambda r: "summed" in r             # noqa: E731
    whole = lambda r: "stored" not in r        # noqa: E731
    t = raw[..., 0]
    t0 = t[t > 0].min()
    entry = (t[:, :, UNITS, 0][t[:, :, UNITS, 0] > 0] - t0) / 1e3
    exit_ = (t[:, :, UNITS, 1][t[:, :, UNITS, 1] > 0] - t0) / 1e3
    lines = [f"  entry {entry.min():.2f}..{entry.max():.2f} us, exit "
             f"{np.median(exit_):.2f} (median) .. {exit_.max():.2f} us (last)",
             "  phase (median / max us, count):",
             f"    whole tile mainloop      {spans(whole, 'start', 'mainloop')}",
             f"    whole tile C store issue {spans(whole, 'mainloop', 'done')}",
             f"    partial mainloop         {spans(partial, 'start', 'mainloop')}",
             f"    partial store issue      {spans(partial, 'mainloop', 'stored')}",
             f"    arrival (fences, atomic) {spans(partial, 'stored', 'arrived')}",
             f"    last: loads and sums     {spans(last, 'arrived', 'summed')}",
             f"    last: C stores issued    {spans(last, 'summed', 'done')}"]
    # the critical path: the warpgroup that exits last, unit by unit
    c, w = np.unravel_index(np.argmax(np.where(t[:, :, UNITS, 1] > 0, t[:, :, UNITS, 1], 0)),
                            t.shape[:2])
    path = [r for r in rows if r["cta"] == c and r["wg"] == w]
    lines.append(f"  last CTA {c} wg {w}:")
    for r in path:
        lines.append("    unit %d: " % r["unit"] + ", ".join(
            f"{e} {r[e]:.2f}" for e in EVENTS if e in r))
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="results")
    ap.add_argument("--variant", required=True)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    ap.add_argument("--sk-ctas", nargs="*", type=int, default=[])
    ap.add_argument("shapes", nargs="+", metavar="MxNxK")
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    if os.path.isdir(os.path.join(HERE, "gemm-cache")):
        os.environ.setdefault("PIPELINE_MLIR_CACHE_DIR", os.path.join(HERE, "gemm-cache"))
    from pipeline_mlir.ops import gemm as ops_gemm
    from pipeline_mlir.ops import gemm_configs
    from random_sweep import candidate

    os.makedirs(args.out, exist_ok=True)
    variant, at, kind = args.variant.partition("@")
    name = f"{variant}_timeline{at}{kind}"
    dt = getattr(torch, {"bf16": "bfloat16", "f16": "float16"}[args.dtype])
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    model_grid = gemm_configs.stream_k_grid
    report = []
    for shape in args.shapes:
        m, n, k = (int(x) for x in shape.split("x"))
        a = torch.randn(m, k, device="cuda", dtype=dt)
        b = torch.randn(n, k, device="cuda", dtype=dt)
        want = a.float() @ b.float().T
        g = candidate(ops_gemm, name, args.dtype)
        default = g.share(m, n, k)
        for sk in [None, *args.sk_ctas]:
            share = default if sk is None else (sk, default[1])
            g._shares[(m, n, k)] = share
            # fewer tiles than SMs: the grid is the stream-K CTAs
            gemm_configs.stream_k_grid = (model_grid if sk is None else
                                          lambda t, kb, w, v, share=False: sk if t < w else w)
            g.gemm._shapes.clear()
            grid = g.gemm.grid(m, n, sms, k)[0]
            per_cta = MAX_WARPGROUPS * SLOTS * len(EVENTS) * 2
            buf = torch.zeros(grid * per_cta, device="cuda", dtype=torch.int64)
            g.timeline = buf
            c = torch.empty(m, n, device="cuda", dtype=dt)
            g.launch(a, b, c, (), None, False)
            err = ((c.float() - want).abs().max() / want.abs().max()).item()
            # time it without the stamps' cold misses: ten launches, events
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(10):
                g.launch(a, b, c, (), None, False)
            end.record()
            torch.cuda.synchronize()
            us = start.elapsed_time(end) * 100
            buf.zero_()
            g.launch(a, b, c, (), None, False)
            torch.cuda.synchronize()
            raw = buf.cpu().numpy().reshape(grid, MAX_WARPGROUPS, SLOTS, len(EVENTS), 2)
            tag = f"{args.variant}-{shape}-{share[0]}".replace("@", "_")
            np.save(os.path.join(args.out, f"timeline-{tag}.npy"), raw)
            head = (f"{args.dtype} {shape} {args.variant} grid {grid} sk_ctas {share[0]} "
                    f"rounds {share[1]}: {us:.1f} us a launch, max rel err {err:.2e}")
            lines = [head] + summarize(phases(raw), raw)
            print("\n".join(lines), flush=True)
            report.append(dict(shape=shape, variant=args.variant, sk_ctas=share[0],
                               rounds=share[1], us=us, err=err))
        g._shares.pop((m, n, k), None)
        gemm_configs.stream_k_grid = model_grid
        g.gemm._shapes.clear()
    with open(os.path.join(args.out, f"timeline-{args.variant.replace('@', '_')}.json"),
              "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
