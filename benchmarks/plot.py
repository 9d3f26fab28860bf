#!/usr/bin/env python3
"""PNG of streaming bandwidth vs stages per kind (+ tma_pipe.cu and copy) from bench.json.

    .bench-venv/bin/python benchmarks/plot.py BENCH_JSON [OUT.png]

(matplotlib lives in .bench-venv.) Per kind and stages: the best GB/s over
tiles and CTAs/SM; the hand-written tma_pipe.cu as points at its own
(stages, tile) choices; torch copy and cuMemcpyDtoD as horizontal lines.
"""
import json
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    path = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else "docs/benchmarks-streaming.png"
    r = json.load(open(path))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    labels = {"tma": "PipelineTmaAsync (bulk copy)", "async": "PipelineAsync",
              "cpasync": "PipelineCpAsync", "tma2d": "PipelineTmaAsync (2-D tensor TMA)"}
    for kind, label in labels.items():
        best = {}
        for x in r["stream"]:
            if x["kind"] == kind and x.get("correct") and "gbps" in x:
                best[x["stages"]] = max(best.get(x["stages"], 0), x["gbps"])
        if best:
            s = sorted(best)
            ax.plot(s, [best[i] for i in s], marker="o", label=label)
    ref = r.get("tma_pipe", {}).get("configs", [])
    if ref:
        ax.scatter([c["stages"] for c in ref], [c["gbps"] for c in ref], marker="x", s=60,
                   color="black", label="tma_pipe.cu (hand-written)", zorder=3)
    ax.axhline(r["torch_copy_gbps"], ls="--", color="gray", label="torch D2D copy")
    ax.axhline(r["cumemcpy_gbps"], ls=":", color="gray", label="cuMemcpyDtoD")
    ax.set_xlabel("pipeline stages")
    ax.set_ylabel("GB/s (bytes read + written)")
    ax.set_title(f"Streaming copy, {r['bytes'] >> 20} MiB, {r['gpu']}")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print("wrote", out)


if __name__ == "__main__":
    main()
