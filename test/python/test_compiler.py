"""pipeline_mlir.compiler: stages, the content-hash cache, chip checks."""

import os

import pytest

from pipeline_mlir import compiler


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_MLIR_CACHE_DIR", str(tmp_path / "cache"))
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    from examples import async_participants
    return async_participants.build()


def test_ptx_and_cubin_for_a_module_that_already_has_a_target(kernel):
    ptx = compiler.to_ptx(kernel.module, chip="sm_90a")
    assert ".target sm_90a" in ptx
    assert "mbarrier.try_wait.parity" in ptx
    cubin = compiler.to_cubin(kernel.module, chip="sm_90a")
    assert cubin[:4] == b"\x7fELF"


def test_cache_hit_returns_same_bytes_and_key_covers_options(kernel, tmp_path):
    first = compiler.to_cubin(kernel.module, chip="sm_90a")
    entries = os.listdir(tmp_path / "cache")
    assert len(entries) == 1
    assert compiler.to_cubin(kernel.module, chip="sm_90a") == first
    assert len(os.listdir(tmp_path / "cache")) == 1
    compiler.to_ptx(kernel.module, chip="sm_90a")
    assert len(os.listdir(tmp_path / "cache")) == 2  # format is part of the key


def test_same_module_compiles_for_sm100a(kernel):
    assert ".target sm_100a" in compiler.to_ptx(kernel.module, chip="sm_100a")


def test_unknown_chip_is_rejected(kernel):
    with pytest.raises(ValueError, match="unsupported chip 'sm_80'"):
        compiler.to_ptx(kernel.module, chip="sm_80")


def test_cache_key_covers_the_native_lowering(monkeypatch):
    """A rebuilt lowering with the same package version must miss the cache
    (the key hashes the native library), or it returns stale PTX."""
    import mlir.ir as ir

    import pipeline_mlir
    from pipeline_mlir import build_fingerprint

    with pipeline_mlir.make_context():
        module = ir.Module.parse("module {}")
        before = compiler._cache_key(module, "sm_90a")
        monkeypatch.setattr(build_fingerprint, "native_identity", lambda: "another build")
        assert compiler._cache_key(module, "sm_90a") != before


def test_setmaxnreg_ptx_goes_to_ptxas_and_warns_without_it(monkeypatch):
    """nvJitLink ignores setmaxnreg (C7504): such PTX is assembled by ptxas,
    and without ptxas the compiler says what the kernel loses."""
    import warnings

    from pipeline_mlir import compiler

    ptx = "// ...\n\tsetmaxnreg.inc.sync.aligned.u32 \t240;\n"
    monkeypatch.setattr(compiler.shutil, "which", lambda name: "/usr/bin/ptxas")
    assert compiler.needs_whole_program_ptxas(ptx)
    assert not compiler.needs_whole_program_ptxas("// no register resizing\n")
    monkeypatch.setattr(compiler.shutil, "which", lambda name: None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not compiler.needs_whole_program_ptxas(ptx)
    assert any("setmaxnreg" in str(w.message) and "ptxas" in str(w.message) for w in caught)
