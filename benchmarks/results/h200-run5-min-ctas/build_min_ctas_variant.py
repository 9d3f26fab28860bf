"""Rebuild stream_tma_s1_t64k and stream_tma2d_s1_t64k with min_ctas_per_sm=3
into a copy of the bench bundle that holds only those two kernels.

    cp -r .bench-bundle .bench-mct
    .venv/bin/python benchmarks/results/h200-run5-min-ctas/build_min_ctas_variant.py
    # on the GPU host, with .bench-mct copied there: cd .bench-mct && python3 run_bench.py --no-cute --out results
"""
import json
import os
import sys

sys.path.insert(0, "examples")
sys.path.insert(0, "benchmarks")
import streaming  # noqa: E402

BUNDLE = ".bench-mct"
manifest = json.load(open(os.path.join(BUNDLE, "manifest.json")))
keep = []
for entry in manifest["stream"]:
    if entry["name"] in ("stream_tma_s1_t64k", "stream_tma2d_s1_t64k"):
        k = streaming.build_stream(entry["kind"], 1, 65536, min_ctas_per_sm=3)
        with open(os.path.join(BUNDLE, entry["image"]), "wb") as f:
            f.write(k.compile())
        keep.append(entry)
manifest["stream"] = keep
json.dump(manifest, open(os.path.join(BUNDLE, "manifest.json"), "w"), indent=1)
print([e["name"] for e in keep])
