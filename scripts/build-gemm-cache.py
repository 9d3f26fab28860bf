#!/usr/bin/env python3
"""Fill the kernel cache: compile here (MLIR) the variants the library ops
pick, so a GPU host without MLIR finds them.

    .venv/bin/python scripts/build-gemm-cache.py --shape 4096 4096 4096 --shape 128 4096 4096
    .venv/bin/python scripts/build-gemm-cache.py --all [--dtype bf16 f16] [--dir DIR]
    .venv/bin/python scripts/build-gemm-cache.py --all --kernel fp8_gemm attention_fwd
    .venv/bin/python scripts/build-gemm-cache.py --shape 1000 1032 520 --epilogues

``--kernel`` names the families (pipeline_mlir/ops/kernel_cache.py
``FAMILIES``): ``hopper_gemm`` (``pipeline_mlir.gemm``, the default),
``fp8_gemm`` (``pipeline_mlir.scaled_mm``), ``attention_fwd`` and
``attention_bwd`` (``pipeline_mlir.attention`` and its backward; ``attention_fwd``
also ``pipeline_mlir.attention_fp8``'s e4m3 entries). ``--all`` compiles every variant of each
family's table (ops/gemm_configs.py with its stream-K variants,
ops/fp8_configs.py with its split-K variants and their reductions,
ops/attention_configs.py, ops/attention_fp8_configs.py); ``--shape`` the GEMM
variants the table's rule picks for those shapes (and the plain pick a
fused call takes where the rule picks stream-K) (``--sms``: the GPU's SM count it assumes, 132 for
an H100 SXM). ``--epilogues`` adds, for each GEMM variant built, its fused
epilogue variants of ``gemm_configs.PREBUILT_EPILOGUES`` (what
``pipeline_mlir.gemm(..., bias=, activation=, residual=, alpha=)`` runs;
other combinations compile on demand where MLIR is installed). ``--dir`` (default: PIPELINE_MLIR_CACHE_DIR, else
~/.cache/pipeline-mlir) is the directory to copy to the GPU host; there,
point PIPELINE_MLIR_CACHE_DIR at it. An entry already built by this
checkout, MLIR and assembler (its build fingerprint) is kept; any other is
rebuilt.
"""

import argparse
import os
import sys
import time


def wanted(args):
    """[(family, variant, overrides, dtype)] to build."""
    from pipeline_mlir.ops import (attention_configs, attention_fp8_configs, fp8_configs,
                                   gemm_configs)

    out = set()
    split_runs = set()   # (splits a split-K pick runs at its shape, dtype)
    for kernel in args.kernel:
        if kernel == "hopper_gemm":
            for dtype in args.dtype:
                if args.all:
                    out.update((kernel, v, dtype) for v in (
                        *gemm_configs.VARIANTS, *gemm_configs.STREAM_K_VARIANTS,
                        *gemm_configs.STREAM_K_SHARE_VARIANTS,
                        *gemm_configs.SHARE1_PICKS,
                        *gemm_configs.CLUSTER_STREAM_K_VARIANTS))
                for m, n, k in args.shape:
                    v = gemm_configs.choose(m, n, k, dtype, args.sms)
                    print(f"{dtype} {m}x{n}x{k}: {v}")
                    out.add((kernel, v, dtype))
                    # a fused call's picks (never stream-K or a tile cut to the
                    # shape; with a gelu tanh or silu maybe two CTAs per SM; with a
                    # residual maybe another tile), and split-K's pick where the GPU
                    # suite turns split-K on (test_gpu_launch.py)
                    out.update((kernel, gemm_configs.choose(m, n, k, dtype, args.sms,
                                                            fused=True, activation=a,
                                                            residual=r), dtype)
                               for a in (None, *gemm_configs.TWO_CTA_ACTIVATIONS)
                               for r in (False, True))
                    v = gemm_configs.choose(m, n, k, dtype, args.sms, split=True,
                                            stream_k=False)
                    out.add((kernel, v, dtype))
                    if gemm_configs.splits_of(v) > 1:
                        split_runs.add((min(gemm_configs.splits_of(v),
                                            -(-k // gemm_configs.K_BLOCK)), dtype))
                    if gemm_configs.splits_of(v) > 1:
                        split_runs.add((min(gemm_configs.splits_of(v),
                                            -(-k // gemm_configs.K_BLOCK)), dtype))
        elif kernel == "fp8_gemm":
            for out_dtype in fp8_configs.OUT_DTYPES if args.all else ("bf16",):
                dtype = f"e4m3-{out_dtype}"
                if args.all:
                    out.update((kernel, v, dtype) for v in (*fp8_configs.VARIANTS,
                                                            *fp8_configs.SPLIT_VARIANTS))
                for m, n, k in args.shape:
                    for acc in ("fast", "promoted"):
                        # the pick, and a call with a bias's (never split-K)
                        out.update((kernel, fp8_configs.choose(m, n, k, acc, args.sms, split),
                                    dtype) for split in (True, False))
                        # and the split model's answer, which the rule leaves
                        # out (fp8_configs.SPLIT_K_IN_RULE) and the GPU suite
                        # turns on to check the split path
                        plain = fp8_configs.choose(m, n, k, acc, args.sms, split=False)
                        split_v = fp8_configs.choose_split(m, n, k, acc, args.sms, plain)
                        if split_v:
                            out.add((kernel, split_v, dtype))
        elif kernel == "attention_bwd":
            out.update((kernel, v, "bf16") for v in {**attention_configs.BWD_VARIANTS,
                                                     **attention_configs.BWD_CANDIDATES})
        else:
            out.update((kernel, v, "bf16") for v in attention_configs.VARIANTS)
            # pipeline_mlir.attention_fp8's configurations (dtype e4m3).
            out.update((kernel, v, attention_fp8_configs.DTYPE)
                       for v in attention_fp8_configs.VARIANTS)
    tables = {"hopper_gemm": gemm_configs.VARIANTS, "fp8_gemm": fp8_configs.VARIANTS,
              "attention_fwd": {**attention_configs.VARIANTS,
                                **attention_fp8_configs.VARIANTS},
              "attention_bwd": {**attention_configs.BWD_VARIANTS,
                                **attention_configs.BWD_CANDIDATES}}
    found = [(k, v, gemm_configs.overrides(v) if k == "hopper_gemm"
              else fp8_configs.overrides(v) if k == "fp8_gemm" else tables[k][v], d)
             for k, v, d in sorted(out)]
    # A split-K pick also needs its reduction, and for a K of fewer K
    # blocks than splits the reductions of fewer (down to 1, a conversion):
    # the variant runs min(S, K blocks) splits (ops/splitk_host.py).
    reductions = sorted({(s, d) for k, v, _, d in found if k == "hopper_gemm"
                         and gemm_configs.splits_of(v) > 1
                         for s in range(1, gemm_configs.splits_of(v) + 1)})
    # The same for an FP8 split-K variant, into its output type (the
    # reduction sums scaled fp32 partials, as the 16-bit GEMM's: its entries).
    reductions += sorted({(s, d.split("-")[1]) for k, v, _, d in found if k == "fp8_gemm"
                          and fp8_configs.splits_of(v) > 1
                          for s in range(1, fp8_configs.splits_of(v) + 1)}
                         - set(reductions))
    found += [("splitk_reduce", f"sum{s}", {"splits": s}, d) for s, d in reductions]
    # Each plain FP8 variant also with scaled_mm's fused bias (its own
    # entry; a call with a bias never takes split-K).
    found += [("fp8_gemm", *fp8_configs.fused(v, fp8_configs.BIAS), d)
              for k, v, _, d in list(found)
              if k == "fp8_gemm" and fp8_configs.splits_of(v) == 1]
    if getattr(args, "epilogues", False):
        from pipeline_mlir.ops.epilogues import Epilogue

        found += [("hopper_gemm", *gemm_configs.fused(v, Epilogue.from_json(e)), d)
                  for k, v, _, d in list(found)
                  if k == "hopper_gemm" and gemm_configs.splits_of(v) == 1
                  and not gemm_configs.is_stream_k(v) and v not in gemm_configs.UNFUSED
                  for e in gemm_configs.PREBUILT_EPILOGUES
                  if not (v in gemm_configs.NO_RESIDUAL and e.get("residual"))]
        # a split-K pick's fused epilogue runs in its reduction (of the
        # splits it runs at that shape)
        found += [("splitk_reduce", *gemm_configs.reduction(s, Epilogue.from_json(e)), d)
                  for s, d in sorted(split_runs) for e in gemm_configs.PREBUILT_EPILOGUES]
    return found


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", nargs=3, type=int, action="append", default=[],
                    metavar=("M", "N", "K"))
    ap.add_argument("--all", action="store_true", help="every variant of the tables")
    ap.add_argument("--kernel", nargs="+", default=["hopper_gemm"],
                    choices=["hopper_gemm", "fp8_gemm", "attention_fwd", "attention_bwd"])
    ap.add_argument("--epilogues", action="store_true",
                    help="also each GEMM variant's gemm_configs.PREBUILT_EPILOGUES")
    ap.add_argument("--dtype", nargs="+", default=["bf16", "f16"], choices=["bf16", "f16"])
    ap.add_argument("--chip", default="sm_90a")
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--dir", help="the cache directory (PIPELINE_MLIR_CACHE_DIR)")
    args = ap.parse_args(argv)
    if not args.shape and not args.all:
        ap.error("give --shape M N K (repeatable) or --all")
    if args.dir:
        os.environ["PIPELINE_MLIR_CACHE_DIR"] = os.path.abspath(args.dir)

    from pipeline_mlir.ops import kernel_cache

    for kernel, variant, overrides, dtype in wanted(args):
        if kernel_cache.builder(kernel) is None:
            print(f"build-gemm-cache: no builder for {kernel} (is MLIR installed?)",
                  file=sys.stderr)
            return 1
        path = kernel_cache.entry_path(variant, overrides, dtype, args.chip, kernel)
        t0 = time.monotonic()
        if kernel_cache.load(variant, overrides, dtype, args.chip, kernel) is not None:
            print(f"CURRENT {kernel} {variant} {dtype} -> {path}")
            continue
        # A miss or another build's entry: get() builds and stores it.
        image, meta = kernel_cache.get(variant, overrides, dtype, args.chip, kernel)
        print(f"BUILT {kernel} {variant} {dtype} {meta['name']} smem {meta['smem']} -> {path} "
              f"({time.monotonic() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
