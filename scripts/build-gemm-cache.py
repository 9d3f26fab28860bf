#!/usr/bin/env python3
"""Fill the GEMM cache: compile here (MLIR) the variants pipeline_mlir.gemm
picks for the given shapes, so a GPU host without MLIR finds them.

    .venv/bin/python scripts/build-gemm-cache.py --shape 4096 4096 4096 --shape 128 4096 4096
    .venv/bin/python scripts/build-gemm-cache.py --all [--dtype bf16 f16] [--dir DIR]

``--all`` compiles every variant of the table (pipeline_mlir/ops/gemm_configs.py).
``--dir`` (default: PIPELINE_MLIR_CACHE_DIR, else ~/.cache/pipeline-mlir)
is the directory to copy to the GPU host (its ``gemm/`` folder); there,
point PIPELINE_MLIR_CACHE_DIR at it. ``--sms`` is the GPU's SM count the
table's rule assumes (132: H100 SXM). An entry already built by this
checkout, MLIR and assembler (its build fingerprint, see
pipeline_mlir/ops/kernel_cache.py) is kept; any other is rebuilt.
"""

import argparse
import importlib.util
import os
import sys
import time
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The kernel build_variant builds: part of each entry's build fingerprint.
KERNEL_SOURCE = os.path.join(ROOT, "examples", "hopper_gemm.py")


def load_kernel():
    """examples/hopper_gemm.py as the file is now, as a module of its own.
    Not ``import hopper_gemm``: this process may have imported it before an
    edit, and kernel_cache files what it builds under the fingerprint of the
    file as read at registration, so building from older code would file an
    old cubin under the new source's fingerprint. Loaded after that read,
    the worst case is a newer cubin under the older fingerprint, which the
    next run rebuilds."""
    examples = os.path.dirname(KERNEL_SOURCE)
    if examples not in sys.path:
        sys.path.insert(0, examples)
    name = "_hopper_gemm_for_cache"
    spec = importlib.util.spec_from_file_location(name, KERNEL_SOURCE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module   # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def build_variant(overrides, dtype, chip):
    """(cubin, launch facts) of examples/hopper_gemm.py with ``overrides``."""
    from pipeline_mlir.ops.hopper_gemm_host import meta_of

    hopper_gemm = load_kernel()

    cfg = replace(hopper_gemm.GemmConfig(dtype=dtype), **overrides)
    k = hopper_gemm.build(cfg, chip=chip)
    return bytes(k.compile()), meta_of(cfg, k)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", nargs=3, type=int, action="append", default=[],
                    metavar=("M", "N", "K"))
    ap.add_argument("--all", action="store_true", help="every variant of the table")
    ap.add_argument("--dtype", nargs="+", default=["bf16", "f16"], choices=["bf16", "f16"])
    ap.add_argument("--chip", default="sm_90a")
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--dir", help="the cache directory (PIPELINE_MLIR_CACHE_DIR)")
    args = ap.parse_args(argv)
    if not args.shape and not args.all:
        ap.error("give --shape M N K (repeatable) or --all")
    if args.dir:
        os.environ["PIPELINE_MLIR_CACHE_DIR"] = os.path.abspath(args.dir)

    from pipeline_mlir.ops import gemm_configs, kernel_cache

    wanted = set()
    for dtype in args.dtype:
        if args.all:
            wanted.update((v, dtype) for v in gemm_configs.VARIANTS)
        for m, n, k in args.shape:
            v = gemm_configs.choose(m, n, k, dtype, args.sms)
            print(f"{dtype} {m}x{n}x{k}: {v}")
            wanted.add((v, dtype))
    previous = kernel_cache.register_builder(build_variant, sources=[KERNEL_SOURCE])
    try:
        for variant, dtype in sorted(wanted):
            overrides = gemm_configs.VARIANTS[variant]
            path = kernel_cache.entry_path(variant, overrides, dtype, args.chip)
            t0 = time.monotonic()
            if kernel_cache.load(variant, overrides, dtype, args.chip) is not None:
                print(f"CURRENT {variant} {dtype} -> {path}")
                continue
            # A miss or another build's entry: get() builds and stores it.
            image, meta = kernel_cache.get(variant, overrides, dtype, args.chip)
            print(f"BUILT {variant} {dtype} {meta['name']} smem {meta['smem']} -> {path} "
                  f"({time.monotonic() - t0:.1f} s)")
    finally:
        kernel_cache.register_builder(previous)
    return 0


if __name__ == "__main__":
    sys.exit(main())
