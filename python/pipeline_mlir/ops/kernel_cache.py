"""Compiled GEMM variants on disk, found by the content hash of what built them.

An entry is ``<cache root>/gemm/<variant>-<dtype>-<chip>-<key>.cubin`` with
its ``.json`` (the launch facts and the image's sha256). ``key`` hashes the
variant's config overrides, dtype, chip and the package version, so a GPU
machine without MLIR finds, from the same facts, what a machine with MLIR
compiled (``scripts/build-gemm-cache.py`` fills the directory for a list of
shapes; copy it or point ``PIPELINE_MLIR_CACHE_DIR`` at it).

Where MLIR and the kernel's builder are at hand, ``register_builder``
makes a miss compile and store the variant instead of failing.
"""

import hashlib
import json
import os

FORMAT = 1
_builder = None


def register_builder(build):
    """``build(overrides, dtype, chip) -> (image bytes, launch facts)``:
    compiles a missing variant (None: misses are errors)."""
    global _builder
    _builder = build


def variant_key(overrides, dtype, chip):
    import pipeline_mlir

    facts = {"format": FORMAT, "version": pipeline_mlir.__version__, "kernel": "hopper_gemm",
             "config": overrides, "dtype": dtype, "chip": chip}
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]


def entry_path(variant, overrides, dtype, chip):
    from pipeline_mlir.runtime.cache_dir import cache_root

    key = variant_key(overrides, dtype, chip)
    return os.path.join(cache_root(), "gemm", f"{variant}-{dtype}-{chip}-{key}.cubin")


def load(variant, overrides, dtype, chip):
    """(image, launch facts) of a stored entry, or None."""
    path = entry_path(variant, overrides, dtype, chip)
    try:
        with open(path, "rb") as f:
            image = f.read()
        with open(path[:-len(".cubin")] + ".json") as f:
            record = json.load(f)
    except FileNotFoundError:
        return None
    if record.get("sha256") != hashlib.sha256(image).hexdigest():
        return None   # a torn or foreign file: build it again (or report the miss)
    return image, record["meta"]


def store(variant, overrides, dtype, chip, image, meta):
    path = entry_path(variant, overrides, dtype, chip)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    record = {"variant": variant, "config": overrides, "dtype": dtype, "chip": chip,
              "meta": meta, "sha256": hashlib.sha256(image).hexdigest()}
    for p, data, mode in ((path, image, "wb"),
                          (path[:-len(".cubin")] + ".json", json.dumps(record, indent=1), "w")):
        tmp = f"{p}.{os.getpid()}.tmp"
        with open(tmp, mode) as f:
            f.write(data)
        os.replace(tmp, p)   # readers see the old file or the new one, never half
    return path


def get(variant, overrides, dtype, chip):
    """(image, launch facts): from the cache, else built and stored, else
    LookupError saying how to fill the cache."""
    found = load(variant, overrides, dtype, chip)
    if found is not None:
        return found
    if _builder is None:
        raise LookupError(
            f"no compiled GEMM variant {variant} ({dtype}, {chip}) in "
            f"{os.path.dirname(entry_path(variant, overrides, dtype, chip))}: compile it where "
            "MLIR is installed (python scripts/build-gemm-cache.py --shape M N K --dtype "
            f"{dtype}) and copy the directory here, or set PIPELINE_MLIR_CACHE_DIR to it")
    image, meta = _builder(dict(overrides), dtype, chip)
    store(variant, overrides, dtype, chip, bytes(image), meta)
    return bytes(image), meta
