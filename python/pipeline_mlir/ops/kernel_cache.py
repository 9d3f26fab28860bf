"""Compiled kernel variants on disk, never served stale.

A kernel family (``FAMILIES``: the bf16/fp16 GEMM, the FP8 GEMM, the
attention forward and backward) keeps its entries in a folder of the cache root. An
entry is ``<cache root>/<folder>/<variant>-<dtype>-<chip>-<key>.cubin`` with
its ``.json`` record (the launch facts, the image's sha256 and the build
fingerprint). Its address, ``key``, hashes what a GPU host without MLIR
knows: the variant's config overrides, dtype, chip, the package version and
the launch fingerprint, a digest of the pure-Python launch side that reads
the entry (``LAUNCH_SOURCES``: the ops and runtime packages, layout.py),
so a host whose launcher changed does not read entries made for another
one. ``scripts/build-gemm-cache.py`` fills the directory where MLIR is
installed; copy it or point ``PIPELINE_MLIR_CACHE_DIR`` at it. Where MLIR is
installed, a miss compiles the variant on demand: a family with no builder
registered gets its kernel module's ``build_variant``
(``pipeline_mlir.kernels``) the first time one of its variants is asked for.

What built the cubin (the builder's source, the pipeline_mlir sources it
builds through, the compiler, MLIR, the assembler:
pipeline_mlir/build_fingerprint.py) is not in the address, since a host
without MLIR cannot compute it; the record stores it as ``build``. The rule:

- a builder registered (``register_builder``: MLIR and the kernel's source
  are here): an entry whose stored build fingerprint differs from the
  current one is a miss. ``load`` returns None, ``get`` rebuilds and
  overwrites it; an entry from another build is never returned. The
  fingerprint describes the code this process loaded: the builder's files
  are read when it is registered (re-register after reloading an edited
  builder), the package's once per process.
- no builder (a GPU host without MLIR, or ``register_builder(None)``): the
  entry is returned whatever built it. It is the only build there, the host can neither make another nor
  tell what one would be; its launcher matches, by the address.

An entry stored with no builder registered records no build fingerprint,
so a machine with a builder rebuilds it.
"""

import functools
import hashlib
import inspect
import json
import os
from collections import namedtuple

FORMAT = 2
# The launch side of an entry: what reads its meta and launches its image
# (package-relative; a folder means the .py files in it).
LAUNCH_SOURCES = ("ops", "layout.py", "chip_limits.py", "runtime")
# family -> (cache folder, kernel module of its default builder, what it is)
FAMILIES = {
    "hopper_gemm": ("gemm", "hopper_gemm", "GEMM"),
    "fp8_gemm": ("fp8_gemm", "fp8_gemm", "FP8 GEMM"),
    "attention_fwd": ("attention", "attention_fwd", "attention"),
    "attention_bwd": ("attention_bwd", "attention_bwd", "attention backward"),
    "splitk_reduce": ("splitk_reduce", "splitk_reduce", "split-K reduction"),
}
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# build: the callable; digest: its files as read at registration.
Builder = namedtuple("Builder", "build files digest")
_builders = {}   # family -> Builder, or None (no builder: do not make one)
_UNSET = object()


def _family(kernel):
    if kernel not in FAMILIES:
        raise ValueError(f"kernel_cache: unknown kernel family {kernel!r} (one of "
                         f"{', '.join(FAMILIES)})")
    return FAMILIES[kernel]


def builder(kernel="hopper_gemm"):
    """The family's Builder: the registered one, else (first call, MLIR
    importable) its kernel module's ``build_variant``, else None."""
    found = _builders.get(kernel, _UNSET)
    if found is _UNSET:
        found = None
        try:
            import importlib

            module = importlib.import_module(f"pipeline_mlir.kernels.{_family(kernel)[1]}")
        except ImportError:   # no MLIR here (a GPU host): the cache is all there is
            module = None
        if module is not None:
            register_builder(module.build_variant, kernel=kernel)
            found = _builders[kernel]
        else:
            _builders[kernel] = None
    return found


def register_builder(build, sources=(), kernel="hopper_gemm"):
    """``build(overrides, dtype, chip) -> (image bytes, launch facts)``
    compiles a missing or stale variant (None: misses are errors). Its
    fingerprint covers the file that defines ``build`` and ``sources``, the
    other files it builds from that are not part of pipeline_mlir (the
    kernel's example module, say); they are read now. ``build`` is assumed
    to compile with the default assembler ($PIPELINE_MLIR_ASSEMBLER).
    Returns the previous registration (a ``Builder``, None, or a marker
    for "never registered"), which ``register_builder`` takes back as it is
    to restore it. ``kernel``: the family (``FAMILIES``)."""
    _family(kernel)
    previous = _builders.get(kernel, _UNSET)
    if build is _UNSET:
        _builders.pop(kernel, None)
        return previous
    if build is None or isinstance(build, Builder):
        _builders[kernel] = build
        return previous
    from pipeline_mlir import build_fingerprint as bf

    files = tuple(sorted({os.path.abspath(p) for p in (_defining_file(build), *sources)}))
    _builders[kernel] = Builder(build, files, bf.digest_files(files))
    current_build(kernel)   # take the package's digests now, with the builder's
    return previous


def _defining_file(build):
    target = inspect.unwrap(build)
    while isinstance(target, functools.partial):
        target = target.func
    code = getattr(target, "__code__", None)
    path = code.co_filename if code else None
    if path is None:
        try:
            path = inspect.getsourcefile(target if inspect.isroutine(target) else type(target))
        except TypeError:
            path = None
    if not path or not os.path.isfile(path):
        raise TypeError(f"register_builder: cannot find the source file of {build!r}; pass a "
                        "function defined in a file (its file is part of the build fingerprint)")
    return path


def current_build(kernel="hopper_gemm"):
    """The build fingerprint (hex) a variant of the family compiled here now
    would carry, or None when it has no builder."""
    found = builder(kernel)
    if found is None:
        return None
    from pipeline_mlir import build_fingerprint as bf

    return bf.build_fingerprint(found.digest)


def launch_files(package=_PACKAGE):
    """The files of ``LAUNCH_SOURCES`` under ``package`` (a pipeline_mlir folder)."""
    found = []
    for name in LAUNCH_SOURCES:
        path = os.path.join(package, name)
        if os.path.isdir(path):
            found += [os.path.join(path, f) for f in os.listdir(path) if f.endswith(".py")]
        else:
            found.append(path)
    return sorted(found)


@functools.lru_cache(maxsize=None)
def launch_fingerprint(package=_PACKAGE):
    """sha256 over the names (package-relative) and bytes of ``launch_files``,
    read once per process (the launcher it loaded). Hashed here rather than
    with pipeline_mlir/build_fingerprint.py: the GPU bundles ship only the
    MLIR-free part of the package (``__init__``, ``layout``, ``runtime/``,
    ``ops/``; scripts/bundle_common.py), and this must run there. ``package``
    names another copy (a bundle's) to compare with this one."""
    h = hashlib.sha256()
    for path in launch_files(package):
        name = os.path.relpath(path, package).replace(os.sep, "/")
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as err:
            raise FileNotFoundError(f"GEMM cache: cannot read the launch code {path} "
                                    f"({err}): the address of an entry hashes it") from None
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def variant_key(overrides, dtype, chip, kernel="hopper_gemm"):
    import pipeline_mlir

    facts = {"format": FORMAT, "version": pipeline_mlir.__version__, "kernel": kernel,
             "config": overrides, "dtype": dtype, "chip": chip, "launch": launch_fingerprint()}
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]


def entry_path(variant, overrides, dtype, chip, kernel="hopper_gemm"):
    from pipeline_mlir.runtime.cache_dir import cache_root

    key = variant_key(overrides, dtype, chip, kernel)
    return os.path.join(cache_root(), _family(kernel)[0], f"{variant}-{dtype}-{chip}-{key}.cubin")


def _record_path(path):
    return path[:-len(".cubin")] + ".json"


def load(variant, overrides, dtype, chip, kernel="hopper_gemm"):
    """(image, launch facts) of a stored entry, or None: none stored, a torn
    file, or (a builder registered) an entry built by another build."""
    path = entry_path(variant, overrides, dtype, chip, kernel)
    try:
        with open(path, "rb") as f:
            image = f.read()
        with open(_record_path(path)) as f:
            record = json.load(f)
    except (FileNotFoundError, ValueError):
        return None   # absent, or a record cut short: build it again (or report the miss)
    if record.get("sha256") != hashlib.sha256(image).hexdigest():
        return None   # a torn or foreign file
    if builder(kernel) is not None and record.get("build") != current_build(kernel):
        return None   # stale: this builder, compiler or assembler would build another cubin
    return image, record["meta"]


def store(variant, overrides, dtype, chip, image, meta, kernel="hopper_gemm"):
    """Write an entry (atomically), recording the current build fingerprint
    (None without a registered builder). Returns the image's path."""
    path = entry_path(variant, overrides, dtype, chip, kernel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    record = {"variant": variant, "config": overrides, "dtype": dtype, "chip": chip,
              "meta": meta, "sha256": hashlib.sha256(image).hexdigest(),
              "build": current_build(kernel), "kernel": kernel}
    # The image first: a reader that finds the new record finds its image.
    for p, data, mode in ((path, image, "wb"),
                          (_record_path(path), json.dumps(record, indent=1), "w")):
        tmp = f"{p}.{os.getpid()}.tmp"
        with open(tmp, mode) as f:
            f.write(data)
        os.replace(tmp, p)   # readers see the old file or the new one, never half
    return path


def get(variant, overrides, dtype, chip, kernel="hopper_gemm"):
    """(image, launch facts): from the cache, else built and stored (the
    family has a builder), else LookupError saying how to fill the cache."""
    found = load(variant, overrides, dtype, chip, kernel)
    if found is not None:
        return found
    make = builder(kernel)
    if make is None:
        raise LookupError(_miss_message(variant, overrides, dtype, chip, kernel))
    image, meta = make.build(dict(overrides), dtype, chip)
    store(variant, overrides, dtype, chip, bytes(image), meta, kernel)
    return bytes(image), meta


def _miss_message(variant, overrides, dtype, chip, kernel="hopper_gemm"):
    path = entry_path(variant, overrides, dtype, chip, kernel)
    folder = os.path.dirname(path)
    what = _family(kernel)[2]
    fill = ("--shape M N K --dtype " + dtype if kernel in ("hopper_gemm", "splitk_reduce")
            else "--all --kernel " + kernel)
    message = (
        f"no compiled {what} variant {variant} ({dtype}, {chip}) in {folder}: compile it where "
        f"MLIR is installed (python scripts/build-gemm-cache.py {fill}) and copy the "
        "directory here, or set PIPELINE_MLIR_CACHE_DIR to it")
    prefix = f"{variant}-{dtype}-{chip}-"
    try:
        others = [f for f in os.listdir(folder) if f.startswith(prefix) and f.endswith(".cubin")]
    except OSError:
        others = []
    if others:
        message += (f" (the directory holds {variant} for another version of the launch code "
                    f"({', '.join(LAUNCH_SOURCES)}) or package: compile it with this checkout)")
    return message
