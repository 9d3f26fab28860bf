"""What every "compile here, run there" bundle shares (the GPU suite's
scripts/build-gpu-bundle.py and benchmarks/build_bundle.py): a copy of the
pure-Python runtime, which needs no MLIR on the GPU host, and the
manifest, and a size cap: a bundle is copied to the GPU host for every run,
so one over the cap has almost always picked up a file it should not."""

import json
import os
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 60 << 20  # the bundle size cap (bytes); the GPU suite's is ~150 KiB


MLIR_FREE = ("runtime", "ops")  # the subpackages that run without MLIR


def copy_runtime(out):
    """pipeline_mlir/__init__.py, layout.py (operand layouts, for the host
    launchers' tensor maps), pipeline_mlir/runtime/*.py and
    pipeline_mlir/ops/*.py (the GEMM entry point) into `out`."""
    src = os.path.join(ROOT, "python", "pipeline_mlir")
    dst = os.path.join(out, "pipeline_mlir")
    os.makedirs(dst)
    for f in ("__init__.py", "layout.py", "chip_limits.py"):
        shutil.copy(os.path.join(src, f), dst)
    for sub in MLIR_FREE:
        os.makedirs(os.path.join(dst, sub))
        for f in sorted(os.listdir(os.path.join(src, sub))):
            if f.endswith(".py"):
                shutil.copy(os.path.join(src, sub, f), os.path.join(dst, sub))


def new_bundle(out):
    """An empty bundle folder at ``out`` (an old one is removed) with its
    ``kernels/`` folder and the runtime copied in; returns the absolute path."""
    out = os.path.abspath(out)
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(os.path.join(out, "kernels"))
    copy_runtime(out)
    return out


def save_cubin(out, name, chip, image):
    """Write a kernel image into the bundle; returns its path relative to
    the bundle (what a manifest entry's ``image`` holds)."""
    path = f"kernels/{name}.{chip}.cubin"
    with open(os.path.join(out, path), "wb") as f:
        f.write(image)
    return path


def write_manifest(out, manifest):
    """Write manifest.json; return the bundle's total size in bytes, or
    None (after printing why) when it is over the size cap."""
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    if total > LIMIT:
        print(f"error: the bundle is {total} bytes, over the {LIMIT}-byte bundle size cap")
        return None
    return total


# The shapes of test_gpu_launch.py's fused-epilogue test (their variants,
# 64x128 and 128x128, get gemm_configs.PREBUILT_EPILOGUES in the cache).
EPILOGUE_TEST_SHAPES = ((256, 256, 256), (1000, 1032, 520), (333, 200, 72))
# The narrow, long-K shapes of test_gpu_launch.py's split-K tests: their
# split-K variants and reductions (gemm_configs.choose_split).
SPLITK_TEST_SHAPES = ((4096, 256, 9000), (512, 512, 16384), (2000, 200, 9000),
                      (256, 512, 9000))


def fill_gemm_cache(out, chip="sm_90a", shapes=(), epilogue_shapes=()):
    """``out``/gemm-cache: every variant of pipeline_mlir.gemm's table in
    bf16 and fp16 (scripts/build-gemm-cache.py --all), the prebuilt fused
    epilogues of the variants the GPU suite's epilogue test runs, the
    split-K variants and reductions (with the prebuilt epilogues) of
    SPLITK_TEST_SHAPES, what ``gemm`` picks for ``shapes``, and (bf16) the
    prebuilt fused epilogues of its picks for ``epilogue_shapes``: what the
    GPU host points PIPELINE_MLIR_CACHE_DIR at."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "build_gemm_cache", os.path.join(ROOT, "scripts", "build-gemm-cache.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    saved = os.environ.get("PIPELINE_MLIR_CACHE_DIR")
    try:
        where = ["--chip", chip, "--dir", os.path.join(out, "gemm-cache")]
        more = [x for shape in shapes for x in ("--shape", *map(str, shape))]
        epi_more = [x for shape in epilogue_shapes for x in ("--shape", *map(str, shape))]
        epi = [x for shape in EPILOGUE_TEST_SHAPES for x in ("--shape", *map(str, shape))]
        split = [x for shape in SPLITK_TEST_SHAPES for x in ("--shape", *map(str, shape))]
        return (mod.main(["--all", "--kernel", "hopper_gemm", "fp8_gemm", "attention_fwd",
                          "attention_bwd",
                          *where])
                or mod.main([*epi, "--epilogues", *where])
                or mod.main([*split, "--epilogues", *where])
                or (more and mod.main([*more, *where]))
                or (epi_more and mod.main([*epi_more, "--epilogues", "--dtype", "bf16",
                                           *where])))
    finally:
        if saved is None:
            os.environ.pop("PIPELINE_MLIR_CACHE_DIR", None)
        else:
            os.environ["PIPELINE_MLIR_CACHE_DIR"] = saved
