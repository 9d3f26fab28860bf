"""Cache keys that are content: no cache returns a cubin that the code,
compiler or assembler of this process would not build.

The GEMM variant cache (ops/kernel_cache.py): editing a registered builder's
source rebuilds the variant instead of serving the old image; an entry from
another build (another assembler, or stored without a builder) is a miss where
a builder is registered and the entry where none is; the launch side is part
of the address. The compile cache (compiler.py): another assembler identity,
another ptxas, another native lowering or compiler source is another key.
Deviceless; the fake images are never launched.
"""

import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from pipeline_mlir import build_fingerprint as bf
from pipeline_mlir.ops import kernel_cache as kc

OVER = {"block_m": 128, "block_n": 128}

BUILDER = '''
CALLS = []


def build(overrides, dtype, chip):
    CALLS.append((dict(overrides), dtype, chip))
    return b"\\x7fELF image VERSION " + dtype.encode(), {"name": "gemm VERSION"}
'''


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_MLIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PIPELINE_MLIR_ASSEMBLER", raising=False)
    monkeypatch.setattr(kc, "_builders", {"hopper_gemm": None})   # no builder until one is registered
    return tmp_path / "cache"


def write_builder(path, version):
    path.write_text(BUILDER.replace("VERSION", version))


_loads = [0]


def import_builder(path):
    """The builder module as a new process would import it (a fresh module)."""
    _loads[0] += 1
    spec = importlib.util.spec_from_file_location(f"gemm_builder_{_loads[0]}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def record_of(variant, dtype="bf16", chip="sm_90a"):
    path = kc.entry_path(variant, OVER, dtype, chip)
    with open(path[:-len(".cubin")] + ".json") as f:
        return json.load(f)


# --- the GEMM variant cache ---------------------------------------------------------

def test_editing_the_builder_rebuilds_instead_of_serving_the_stale_image(cache, tmp_path):
    src = tmp_path / "gemm_builder.py"
    write_builder(src, "v1")
    v1 = import_builder(src)
    kc.register_builder(v1.build)

    assert kc.get("128x128", OVER, "bf16", "sm_90a") == (b"\x7fELF image v1 bf16",
                                                         {"name": "gemm v1"})
    assert len(v1.CALLS) == 1
    assert record_of("128x128")["build"] == kc.current_build() is not None
    # Served from the cache: the builder is not called again.
    assert kc.get("128x128", OVER, "bf16", "sm_90a") == (b"\x7fELF image v1 bf16",
                                                         {"name": "gemm v1"})
    assert len(v1.CALLS) == 1

    # Edit the builder. This process still runs v1 (its fingerprint was read
    # when v1 was registered), so v1's image is still what it builds: nothing
    # is filed under v2's fingerprint by v1's code.
    write_builder(src, "v2")
    assert kc.get("128x128", OVER, "bf16", "sm_90a")[0] == b"\x7fELF image v1 bf16"
    assert len(v1.CALLS) == 1

    # The edited builder loaded and registered (what the next process does):
    # the v1 entry is stale, never returned; the builder runs; v2 is stored.
    v2 = import_builder(src)
    kc.register_builder(v2.build)
    assert kc.load("128x128", OVER, "bf16", "sm_90a") is None
    assert kc.get("128x128", OVER, "bf16", "sm_90a") == (b"\x7fELF image v2 bf16",
                                                         {"name": "gemm v2"})
    assert v2.CALLS == [(OVER, "bf16", "sm_90a")] and len(v1.CALLS) == 1
    assert kc.get("128x128", OVER, "bf16", "sm_90a")[0] == b"\x7fELF image v2 bf16"
    assert len(v2.CALLS) == 1
    with open(kc.entry_path("128x128", OVER, "bf16", "sm_90a"), "rb") as f:
        assert f.read() == b"\x7fELF image v2 bf16"   # overwritten in place

    # Back to v1's source: v1's fingerprint again, and v2's entry is stale.
    write_builder(src, "v1")
    v1_again = import_builder(src)
    kc.register_builder(v1_again.build)
    assert kc.get("128x128", OVER, "bf16", "sm_90a")[0] == b"\x7fELF image v1 bf16"
    assert len(v1_again.CALLS) == 1


def test_a_builder_source_outside_its_own_file_is_part_of_the_fingerprint(cache, tmp_path):
    src, kernel = tmp_path / "gemm_builder.py", tmp_path / "kernel_module.py"
    write_builder(src, "v1")
    kernel.write_text("TILE = 128\n")
    mod = import_builder(src)
    kc.register_builder(mod.build, sources=[kernel])
    kc.get("128x128", OVER, "f16", "sm_90a")
    kernel.write_text("TILE = 256\n")
    kc.register_builder(mod.build, sources=[kernel])   # re-read: a new process
    assert kc.load("128x128", OVER, "f16", "sm_90a") is None
    kc.get("128x128", OVER, "f16", "sm_90a")
    assert len(mod.CALLS) == 2


def test_another_assembler_makes_the_entry_stale(cache, tmp_path, monkeypatch):
    src = tmp_path / "gemm_builder.py"
    write_builder(src, "v1")
    mod = import_builder(src)
    kc.register_builder(mod.build)
    kc.get("128x128", OVER, "bf16", "sm_90a")
    built_with = record_of("128x128")["build"]
    # nvJitLink upgraded (same package version, same sources)
    monkeypatch.setattr(bf, "nvjitlink_identity", lambda: "nvJitLink 99.1 (another build)")
    monkeypatch.setattr(bf, "ptxas_identity", lambda: "ptxas V99.1")
    assert kc.current_build() != built_with
    assert kc.load("128x128", OVER, "bf16", "sm_90a") is None
    kc.get("128x128", OVER, "bf16", "sm_90a")
    assert len(mod.CALLS) == 2
    assert record_of("128x128")["build"] == kc.current_build() != built_with


def test_a_host_without_a_builder_reads_what_a_builder_stored(cache, tmp_path):
    src = tmp_path / "gemm_builder.py"
    write_builder(src, "v1")
    mod = import_builder(src)
    kc.register_builder(mod.build)
    kc.get("64x256", OVER, "f16", "sm_90a")
    previous = kc.register_builder(None)      # the GPU host: no MLIR, no builder
    assert previous.build is mod.build and kc.current_build() is None
    assert kc.get("64x256", OVER, "f16", "sm_90a") == (b"\x7fELF image v1 f16",
                                                       {"name": "gemm v1"})
    kc.register_builder(previous)             # restored as it was: still current
    assert kc.load("64x256", OVER, "f16", "sm_90a") is not None
    assert len(mod.CALLS) == 1


def test_an_entry_stored_without_a_builder_is_rebuilt_where_one_is(cache, tmp_path):
    kc.store("64x128", OVER, "bf16", "sm_90a", b"\x7fELF unknown build", {"name": "old"})
    assert record_of("64x128")["build"] is None
    assert kc.get("64x128", OVER, "bf16", "sm_90a")[0] == b"\x7fELF unknown build"
    src = tmp_path / "gemm_builder.py"
    write_builder(src, "v3")
    mod = import_builder(src)
    kc.register_builder(mod.build)
    assert kc.get("64x128", OVER, "bf16", "sm_90a")[0] == b"\x7fELF image v3 bf16"
    assert len(mod.CALLS) == 1


def test_the_launch_side_is_part_of_the_address(cache, monkeypatch):
    files = {os.path.relpath(p, bf.PACKAGE) for p in kc.launch_files()}
    assert {"ops/hopper_gemm_host.py", "layout.py", "runtime/__init__.py",
            "runtime/cache_dir.py"} <= files
    kc.store("128x64", OVER, "bf16", "sm_90a", b"\x7fELF", {"name": "g"})
    assert kc.load("128x64", OVER, "bf16", "sm_90a") is not None
    before = kc.variant_key(OVER, "bf16", "sm_90a")
    # Another launcher (edited hopper_gemm_host.py / runtime): another address.
    monkeypatch.setattr(kc, "launch_fingerprint", lambda: "another launcher")
    assert kc.variant_key(OVER, "bf16", "sm_90a") != before
    assert kc.load("128x64", OVER, "bf16", "sm_90a") is None
    with pytest.raises(LookupError, match=r"no compiled GEMM variant 128x64 .* holds 128x64 "
                       r"for another version of the launch code \(ops, layout.py"):
        kc.get("128x64", OVER, "bf16", "sm_90a")


def bundle_copy(dest):
    """The MLIR-free part of the installed package, as scripts/bundle_common.py
    copies it into a GPU bundle: __init__.py, layout.py, chip_limits.py, runtime/ and ops/."""
    pkg = dest / "pipeline_mlir"
    for sub in ("runtime", "ops"):
        (pkg / sub).mkdir(parents=True)
        for f in os.listdir(os.path.join(bf.PACKAGE, sub)):
            if f.endswith(".py"):
                shutil.copy(os.path.join(bf.PACKAGE, sub, f), pkg / sub / f)
    for f in ("__init__.py", "layout.py", "chip_limits.py"):
        shutil.copy(os.path.join(bf.PACKAGE, f), pkg / f)
    return pkg


def test_a_gpu_bundle_without_mlir_finds_what_a_builder_stored(cache, tmp_path):
    src = tmp_path / "gemm_builder.py"
    write_builder(src, "v1")
    kc.register_builder(import_builder(src).build)
    kc.get("128x128", OVER, "bf16", "sm_90a")
    pkg = bundle_copy(tmp_path / "bundle")
    assert kc.launch_fingerprint(str(pkg)) == kc.launch_fingerprint()
    # Another process with only the bundle's copy on its path: no MLIR, no
    # build_fingerprint module, no builder; it finds the entry by its address.
    host = (f"import sys\nfrom pipeline_mlir.ops import kernel_cache as kc\n"
            f"assert kc.__file__.startswith({str(pkg)!r}), kc.__file__\n"
            f"image, meta = kc.get('128x128', {OVER!r}, 'bf16', 'sm_90a')\n"
            f"assert not any(m == 'mlir' or m.startswith('mlir.') for m in sys.modules)\n"
            f"print(image.decode(), meta['name'])\n")
    env = dict(os.environ, PYTHONPATH=str(pkg.parent))
    run = subprocess.run([sys.executable, "-c", host], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().endswith("image v1 bf16 gemm v1")
    # A bundle whose launcher differs does not read it.
    with open(pkg / "ops" / "hopper_gemm_host.py", "a") as f:
        f.write("\n# another launcher\n")
    run = subprocess.run([sys.executable, "-c", host], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode != 0 and "for another version of the launch code" in run.stderr


def test_digests_follow_file_contents_not_places(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    for d in (a, b):
        (d / "k.py").write_text("x = 1\n")
    assert bf.digest_files([a / "k.py"]) == bf.digest_files([b / "k.py"])
    (b / "k.py").write_text("x = 2\n")
    assert bf.digest_files([a / "k.py"]) != bf.digest_files([b / "k.py"])
    with pytest.raises(FileNotFoundError, match="cannot fingerprint .*missing.py"):
        bf.digest_files([a / "missing.py"])


def test_build_sources_cover_the_kernel_layer():
    files = {os.path.relpath(p, bf.PACKAGE) for p in bf.source_files(bf.BUILD_SOURCES)}
    assert {"kernel/kernel.py", "kernel/wgmma.py", "pipeline/sm90.py", "dialects/pipeline.py",
            "layout.py"} <= files
    compiled = {os.path.relpath(p, bf.PACKAGE) for p in bf.source_files(bf.COMPILE_SOURCES)}
    assert compiled == {"compiler.py", "_nvjitlink.py", "diagnostics.py"}


# --- assembler identity ----------------------------------------------------------------

def fake_ptxas(folder, release):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ptxas"
    path.write_text(f"#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler'\n"
                    f"echo 'Cuda compilation tools, release {release}, V{release}.1'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_ptxas_identity_is_its_version_output(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "old") + os.pathsep + os.environ["PATH"])
    fake_ptxas(tmp_path / "old", "12.4")
    old = bf.ptxas_identity()
    assert "release 12.4, V12.4.1" in old and "via PATH" in old
    fake_ptxas(tmp_path / "new", "13.9")
    monkeypatch.setenv("PATH", str(tmp_path / "new") + os.pathsep + os.environ["PATH"])
    assert "release 13.9, V13.9.1" in bf.ptxas_identity()
    # Not on PATH: MLIR looks in the first of $CUDA_ROOT/HOME/PATH that is set.
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for var in ("CUDA_ROOT", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "toolkit"))
    assert bf.ptxas_identity() == "no ptxas"
    fake_ptxas(tmp_path / "toolkit" / "bin", "13.1")
    assert "via $CUDA_HOME" in bf.ptxas_identity() and "V13.1.1" in bf.ptxas_identity()


def test_nvjitlink_identity_names_the_loaded_build():
    from pipeline_mlir import _nvjitlink

    if not _nvjitlink.available():
        pytest.skip(_nvjitlink.unavailable_reason())
    major, minor = _nvjitlink.version()
    assert bf.nvjitlink_identity().startswith(f"nvJitLink {major}.{minor} (libnvJitLink")
    assert "build-id " in bf.nvjitlink_identity()


def test_library_identity_falls_back_to_the_bytes(tmp_path):
    lib = tmp_path / "libfake.so"
    lib.write_bytes(b"not an ELF file")
    assert bf.elf_build_id(lib) is None
    assert bf.library_identity(str(lib)).startswith("libfake.so sha256 ")


def test_assembler_identity_names_what_the_request_may_run(monkeypatch):
    pytest.importorskip("mlir.ir")
    monkeypatch.delenv("PIPELINE_MLIR_ASSEMBLER", raising=False)
    monkeypatch.setattr(bf, "nvjitlink_identity", lambda: "NVJ")
    monkeypatch.setattr(bf, "ptxas_identity", lambda: "PTXAS")
    from pipeline_mlir import _nvjitlink

    if _nvjitlink.available():
        assert bf.assembler_identity("nvjitlink") == "nvjitlink -> NVJ"
        assert "NVJ" in bf.assembler_identity() and "PTXAS" in bf.assembler_identity()
    assert bf.assembler_identity("ptxas") == "ptxas -> PTXAS"
    monkeypatch.setenv("PIPELINE_MLIR_ASSEMBLER", "ptxas")
    assert bf.assembler_identity() == "ptxas -> PTXAS"


# --- the compile cache ---------------------------------------------------------------------

@pytest.fixture
def kernel(tmp_path, monkeypatch):
    pytest.importorskip("mlir.ir")
    monkeypatch.setenv("PIPELINE_MLIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PIPELINE_MLIR_ASSEMBLER", raising=False)
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    from examples import async_participants
    return async_participants.build()


def entries(tmp_path):
    return sorted(f for f in os.listdir(tmp_path / "cache") if f.endswith((".bin", ".isa")))


def test_compile_cache_misses_when_the_assembler_changes(kernel, tmp_path, monkeypatch):
    from pipeline_mlir import _nvjitlink, compiler

    if not _nvjitlink.available():
        pytest.skip(_nvjitlink.unavailable_reason())
    compiled = []
    real_lower = compiler._lower
    monkeypatch.setattr(compiler, "_lower", lambda *a: compiled.append(1) or real_lower(*a))

    first = compiler.to_cubin(kernel.module, assembler="nvjitlink")
    compiler.to_cubin(kernel.module, assembler="nvjitlink")
    assert len(entries(tmp_path)) == 1 and len(compiled) == 1       # a hit
    # The reported nvJitLink changes (an upgrade): a new key, compiled again.
    monkeypatch.setattr(bf, "nvjitlink_identity", lambda: "nvJitLink 13.9 (another build)")
    assert compiler.to_cubin(kernel.module, assembler="nvjitlink") == first
    assert len(entries(tmp_path)) == 2 and len(compiled) == 2
    # 'auto' may hand PTX to ptxas: its version is in the key; 'nvjitlink''s is not.
    compiler.to_cubin(kernel.module)
    assert len(entries(tmp_path)) == 3 and len(compiled) == 3
    monkeypatch.setattr(bf, "ptxas_identity", lambda: "ptxas V99.0")
    compiler.to_cubin(kernel.module)
    assert len(entries(tmp_path)) == 4 and len(compiled) == 4
    compiler.to_cubin(kernel.module, assembler="nvjitlink")
    assert len(entries(tmp_path)) == 4 and len(compiled) == 4       # still a hit


def test_compile_cache_key_covers_the_compiler(monkeypatch):
    pytest.importorskip("mlir.ir")
    import mlir.ir as ir

    import pipeline_mlir
    from pipeline_mlir import compiler

    with pipeline_mlir.make_context():
        module = ir.Module.parse("module {}")
        before = compiler._cache_key(module, "sm_90a")
        assert compiler._cache_key(module, "sm_90a") == before
        # another build of the native lowering
        monkeypatch.setattr(bf, "native_identity", lambda: "_pipeline sha256 0000")
        rebuilt = compiler._cache_key(module, "sm_90a")
        assert rebuilt != before
        # an edit of compiler.py / _nvjitlink.py / diagnostics.py
        real = bf.package_digest
        monkeypatch.setattr(bf, "package_digest", lambda names: "edited" if
                            names == bf.COMPILE_SOURCES else real(names))
        assert compiler._cache_key(module, "sm_90a") not in (before, rebuilt)
