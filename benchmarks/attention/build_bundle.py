#!/usr/bin/env python3
"""Build an attention bundle: the attention variants compiled HERE (where MLIR
is installed), with the pure-Python runtime and the scripts that check and
time them on a GPU host that has only torch and cuda-bindings.

    .venv/bin/python benchmarks/attention/build_bundle.py [--out DIR] [--quick]

Then, on the GPU host: ``cd DIR && python3 check_attention.py`` (correctness
grid) and ``python3 run_attention.py`` (benchmark against the peers). With
``--grid`` the bundle holds every configuration of the op's pick
(``attention_configs.VARIANTS``) for ``run_attention_grid.py``; with
``--fp8`` the FP8 forward's configurations (``attention_fp8_configs.VARIANTS``,
tagged ``fp8 ...``), its candidates (``fp8cand ...``) and the bf16 ones
of the same head dims, for ``run_attention_fp8.py``.
"""

import argparse
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "scripts"), os.path.join(ROOT, "examples"), HERE]
from bundle_common import new_bundle, save_cubin, write_manifest  # noqa: E402

SCRIPTS = ("check_attention.py", "run_attention.py", "run_attention_grid.py",
           "run_attention_fp8.py", "ours.py",
           "variants.py", "timing.py", "profile_one.py", "profile_pair.py",
           "ncu_source_summary.py")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, ".attention-bundle"))
    ap.add_argument("--chip", default="sm_90a")
    ap.add_argument("--quick", action="store_true", help="the correctness variants only")
    ap.add_argument("--sweep", action="store_true", help="also the configuration candidates")
    ap.add_argument("--grid", action="store_true",
                    help="only every configuration the op's pick can return (tagged 'cfg "
                         "<name>', for run_attention_grid.py)")
    ap.add_argument("--fp8", action="store_true",
                    help="only the FP8 forward's configurations and candidates, and the "
                         "bf16 ones of head dims 128 and 256 (for run_attention_fp8.py)")
    ap.add_argument("--candidates",
                    help="with --fp8: only the candidates (fp8cand/bf16cand tags) of these "
                         "comma-separated names (the last word of their tag)")
    args = ap.parse_args(argv)
    if args.fp8:
        # pipeline_mlir.attention_fp8 reads its cubins from a kernel cache:
        # the bundle carries one (run_attention_fp8.py --cache cache).
        os.environ["PIPELINE_MLIR_CACHE_DIR"] = os.path.join(os.path.abspath(args.out),
                                                             "cache")

    import attention_fwd
    from variants import fp8_variants, grid_variants, variants

    out = new_bundle(args.out)
    for f in SCRIPTS:
        if os.path.exists(os.path.join(HERE, f)):
            shutil.copy(os.path.join(HERE, f), out)
    shutil.copy(os.path.join(ROOT, "examples", "attention_fwd_host.py"), out)
    manifest = {"chip": args.chip, "created": time.strftime("%Y-%m-%d %H:%M:%S"),
                "variants": []}
    chosen = (grid_variants() if args.grid else fp8_variants() if args.fp8
              else variants(quick=args.quick, sweep=args.sweep))
    if args.candidates is not None:
        names = set(args.candidates.split(","))
        chosen = [c for c in chosen if c[0].split()[0] not in ("fp8cand", "bf16cand")
                  or c[0].split()[-1] in names]
    for tag, cfg, persistent in chosen:
        t0 = time.monotonic()
        k = attention_fwd.build(cfg, chip=args.chip)
        path = save_cubin(out, cfg.name, args.chip, k.compile())
        meta = cfg.meta(k)
        meta.update(tag=tag, image=path, persistent=persistent)
        manifest["variants"].append(meta)
        print(f"BUILT {tag:28s} {cfg.name:44s} smem {k.smem_bytes} "
              f"({time.monotonic() - t0:.1f} s)")
    if args.fp8:
        from pipeline_mlir.ops import attention_fp8_configs, kernel_cache

        for name, over in attention_fp8_configs.VARIANTS.items():
            kernel_cache.get(name, over, attention_fp8_configs.DTYPE, args.chip,
                             kernel="attention_fwd")
            print(f"CACHED {name}")
    total = write_manifest(out, manifest)
    if total is None:
        return 1
    print(f"{out}: {len(manifest['variants'])} variants, {total / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
