#!/usr/bin/env python3
"""Build .gemm-bundle/: the GEMM variants compiled HERE (no MLIR on the GPU).

    .venv/bin/python benchmarks/gemm/build_bundle.py [--out .gemm-bundle]

Writes kernels/*.cubin and manifest.json (each variant's launch facts:
the 16-bit ladder and candidates under "variants", the FP8 GEMMs of
examples/fp8_gemm.py under "fp8_variants"), the pure-Python runtime, the
launchers (examples/hopper_gemm_host.py, fp8_gemm_host.py), run_gemm.py,
run_fp8.py and triton_matmul.py, and gemm-cache/ (every variant of
pipeline_mlir.gemm's table, and what it picks for the shapes of sweep.py
and random_sweep.py's default draw, split-K variants among them, and the
fused picks of epilogue_bench.py's shapes) with launch_overhead.py,
sweep.py, random_sweep.py and epilogue_bench.py. On the GPU host:

    cd .gemm-bundle && python3 run_gemm.py --out results && python3 run_fp8.py --out results
    cd .gemm-bundle && python3 launch_overhead.py --out results && python3 sweep.py --out results
    cd .gemm-bundle && python3 random_sweep.py --out results
    cd .gemm-bundle && python3 epilogue_bench.py --out results
    cd .gemm-bundle && python3 fp8_sweep.py --out results

``--fp8-only``: only what run_fp8.py and fp8_sweep.py need (the FP8
variants, ``pipeline_mlir.scaled_mm``'s cache family), a bundle of a few MiB.
"""

import argparse
import os
import shutil
import sys
import time
from dataclasses import replace

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "scripts"), os.path.join(ROOT, "examples"), HERE]
from bundle_common import fill_gemm_cache, new_bundle, save_cubin, write_manifest  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, ".gemm-bundle"))
    ap.add_argument("--chip", default="sm_90a")
    ap.add_argument("--fp8-only", action="store_true",
                    help="only the FP8 GEMM's variants and scripts")
    ap.add_argument("--shapes", nargs="+", default=[], metavar="MxNxK",
                    help="a quick bundle: only the scripts and, in gemm-cache, what "
                         "pipeline_mlir.gemm picks for these shapes and --variants")
    ap.add_argument("--epilogues", action="store_true",
                    help="with --shapes: the fused picks' prebuilt epilogues too (bf16), "
                         "and the --variants with epilogue_bench.py's epilogues")
    ap.add_argument("--variants", nargs="*", default=[],
                    help="with --shapes: these gemm_configs variants too (both dtypes; "
                         "random_sweep.py --variants times them)")
    args = ap.parse_args(argv)
    if args.shapes:
        return quick_bundle(args)

    import hopper_gemm
    import hopper_gemm_host
    from variants import CANDIDATES, LADDER

    out = new_bundle(args.out)
    if args.fp8_only:
        return fp8_bundle(out, args.chip)
    for f in ("run_gemm.py", "run_fp8.py", "triton_matmul.py", "variants.py",
              "profile_one.py", "launch_overhead.py", "sweep.py", "random_sweep.py",
              "epilogue_bench.py", "fp8_sweep.py", "streamk_timeline.py", "host_vs_gpu.py"):
        shutil.copy(os.path.join(HERE, f), out)
    # the CuTe DSL contender of launch_overhead.py (used where `import cutlass` works)
    shutil.copy(os.path.join(ROOT, "benchmarks", "cute_streaming.py"), out)
    for f in ("hopper_gemm_host.py", "fp8_gemm_host.py"):
        shutil.copy(os.path.join(ROOT, "examples", f), out)

    manifest = {"chip": args.chip, "created": time.strftime("%Y-%m-%d %H:%M:%S"),
                "variants": [], "fp8_variants": []}
    for dtype in ("bf16", "f16"):
        for step, overrides, persistent, what in LADDER:
            if dtype == "f16" and step not in CANDIDATES:
                continue   # the ladder is measured in bf16 only
            cfg = replace(hopper_gemm.GemmConfig(dtype=dtype), **overrides)
            t0 = time.monotonic()
            k = hopper_gemm.build(cfg, chip=args.chip)
            path = save_cubin(out, cfg.name, args.chip, k.compile())
            meta = hopper_gemm_host.meta_of(cfg, k)
            meta.update(step=step, persistent=persistent, what=what, image=path,
                        stages=k.stages)
            manifest["variants"].append(meta)
            print(f"BUILT {dtype} {step:22s} {cfg.name:38s} stages {k.stages} "
                  f"smem {k.smem_bytes} ({time.monotonic() - t0:.1f} s)")
    build_fp8_examples(out, args.chip, manifest)
    # pipeline_mlir.gemm's variants, for launch_overhead.py, sweep.py and
    # random_sweep.py (its default seed, count and distribution: another
    # draw on a host without MLIR misses the variants it picks)
    import epilogue_bench
    import random_sweep
    import sweep

    shapes = [s[:3] for s in sweep.SHAPES] + random_sweep.draw(
        random_sweep.DEFAULT_COUNT, random_sweep.DEFAULT_SEED)
    if fill_gemm_cache(out, args.chip, shapes, epilogue_shapes=epilogue_bench.SHAPES):
        return 1
    total = write_manifest(out, manifest)
    if total is None:
        return 1
    print(f"{out}: {len(manifest['variants'])} variants, {total / 1024:.0f} KiB")
    print("run on the GPU host: cd .gemm-bundle && python3 run_gemm.py --out results "
          "&& python3 run_fp8.py --out results; python3 launch_overhead.py --out results; "
          "python3 sweep.py --out results")
    return 0


def quick_bundle(args):
    """``--shapes``: a bundle for random_sweep.py --shapes and
    epilogue_bench.py on a few shapes, built in minutes: the scripts, and
    gemm-cache/ with the picks of those shapes (with ``--epilogues`` the
    fused picks' prebuilt epilogues) and the ``--variants`` candidates (a
    name's ``@spread`` / ``@leftover`` part is a launch, not a kernel)."""
    import importlib.util

    out = new_bundle(args.out)
    for f in ("run_gemm.py", "variants.py", "profile_one.py", "sweep.py", "random_sweep.py",
              "epilogue_bench.py", "streamk_timeline.py", "host_vs_gpu.py",
              "streamk_graph.py", "cublas_kernels.py", "shape_variants.py",
              "resident_clusters.py", "op_overhead.py", "profile_pair.py"):
        shutil.copy(os.path.join(HERE, f), out)
    spec = importlib.util.spec_from_file_location(
        "build_gemm_cache", os.path.join(ROOT, "scripts", "build-gemm-cache.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cache = os.path.join(out, "gemm-cache")
    shapes = [x for s in args.shapes for x in ("--shape", *s.split("x"))]
    where = ["--chip", args.chip, "--dir", cache]
    if mod.main([*shapes, *where]) or (args.epilogues and mod.main(
            [*shapes, "--epilogues", "--dtype", "bf16", *where])):
        return 1
    from pipeline_mlir.ops import gemm_configs, kernel_cache

    for name in args.variants:
        variant = name.partition("@")[0]
        for dtype in ("bf16", "f16"):
            kernel_cache.get(variant, gemm_configs.overrides(variant), dtype, args.chip)
            print(f"BUILT {variant} {dtype}")
        if args.epilogues and variant not in gemm_configs.UNFUSED \
                and not gemm_configs.is_stream_k(variant) \
                and gemm_configs.splits_of(variant) == 1:
            # what epilogue_bench.py --variants times beside the pick
            from epilogue_bench import ACTIVATIONS, bench_epilogue

            for act in ACTIVATIONS:
                fused_name, over = gemm_configs.fused(variant, bench_epilogue(act))
                kernel_cache.get(fused_name, over, "bf16", args.chip)
                print(f"BUILT {fused_name} bf16")
    total = write_manifest(out, {"chip": args.chip, "variants": [], "fp8_variants": []})
    if total is None:
        return 1
    print(f"{out}: {total / 1024:.0f} KiB")
    return 0


def build_fp8_examples(out, chip, manifest):
    """run_fp8.py's kernels (fp8_gemm.CONFIGS) into the bundle's manifest."""
    import fp8_gemm
    import hopper_gemm_host

    for cfg in fp8_gemm.CONFIGS.values():
        t0 = time.monotonic()
        k = fp8_gemm.build(cfg, chip=chip)
        path = save_cubin(out, cfg.name, chip, k.compile())
        meta = hopper_gemm_host.meta_of(cfg, k)
        meta.update(accumulation=cfg.accumulation, persistent=True, image=path,
                    stages=k.stages)
        manifest["fp8_variants"].append(meta)
        print(f"BUILT fp8 {cfg.name:55s} stages {k.stages} smem {k.smem_bytes} "
              f"({time.monotonic() - t0:.1f} s)")


def fp8_bundle(out, chip):
    """The ``--fp8-only`` bundle: run_fp8.py's kernels, and gemm-cache/ with
    every variant of ops/fp8_configs.py, its split-K variants and their
    reductions among them (scripts/build-gemm-cache.py --all --kernel
    fp8_gemm) for fp8_sweep.py."""
    import importlib.util

    for f in ("run_gemm.py", "run_fp8.py", "fp8_sweep.py"):
        shutil.copy(os.path.join(HERE, f), out)
    shutil.copy(os.path.join(ROOT, "examples", "fp8_gemm_host.py"), out)
    shutil.copy(os.path.join(ROOT, "examples", "hopper_gemm_host.py"), out)
    manifest = {"chip": chip, "created": time.strftime("%Y-%m-%d %H:%M:%S"),
                "variants": [], "fp8_variants": []}
    build_fp8_examples(out, chip, manifest)
    spec = importlib.util.spec_from_file_location(
        "build_gemm_cache", os.path.join(ROOT, "scripts", "build-gemm-cache.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if mod.main(["--all", "--kernel", "fp8_gemm", "--chip", chip,
                 "--dir", os.path.join(out, "gemm-cache")]):
        return 1
    total = write_manifest(out, manifest)
    if total is None:
        return 1
    print(f"{out}: {len(manifest['fp8_variants'])} FP8 examples, {total / 1024:.0f} KiB")
    print(f"run on the GPU host: cd {os.path.basename(out)} && python3 fp8_sweep.py --out results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
