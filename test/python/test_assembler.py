"""PTX -> cubin: nvJitLink in-process vs the ptxas subprocess (deviceless).

nvJitLink is a dependency of the package and the default assembler:
test_nvjitlink_is_installed_and_the_default fails (not skips) without it, so
CI exercises it; the other nvJitLink tests skip with the reason then. The
ptxas fallback is tested by forcing it (assembler='ptxas', the environment
variable, or a missing library) everywhere ptxas is on PATH.
"""

import os
import shutil
import struct
import sys

import pytest

from pipeline_mlir import _nvjitlink, compiler
from pipeline_mlir.runtime.arch import _sections, image_target

needs_nvjitlink = pytest.mark.skipif(not _nvjitlink.available(),
                                     reason=_nvjitlink.unavailable_reason())
needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None,
                                 reason="ptxas is not on PATH")


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_MLIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(compiler.ENV_ASSEMBLER, raising=False)
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    from examples import async_participants
    return async_participants.build()


@pytest.fixture
def no_nvjitlink(monkeypatch):
    """Pretend the library is missing (load() runs again, finds nothing)."""
    monkeypatch.setenv(_nvjitlink.ENV_LIBRARY, "/nonexistent/libnvJitLink.so.13")
    monkeypatch.setattr(_nvjitlink, "_loaded", False)
    monkeypatch.setattr(_nvjitlink, "_lib", None)
    monkeypatch.setattr(_nvjitlink, "_load_error", None)


def functions(cubin):
    """Names of the FUNC symbols of a cubin's .symtab."""
    secs = _sections(cubin)
    symtab, strtab = secs[".symtab"], secs[".strtab"]
    names = set()
    for off in range(0, len(symtab), 24):  # Elf64_Sym
        name, info = struct.unpack_from("<IB", symtab, off)
        if info & 0xF == 2:  # STT_FUNC
            names.add(strtab[name:strtab.index(b"\0", name)].decode())
    return names


def producer(cubin):
    """Which tool the cubin's .note.nv.tkinfo names (nvJitLink marks its own)."""
    return "nvjitlink" if b"nvJIT API" in _sections(cubin)[".note.nv.tkinfo"] else "ptxas"


@needs_nvjitlink
@needs_ptxas
@pytest.mark.parametrize("chip", ["sm_90a", "sm_100a"])
def test_nvjitlink_cubin_matches_the_ptxas_one(kernel, chip):
    fast = compiler.to_cubin(kernel.module, chip=chip, assembler="nvjitlink")
    slow = compiler.to_cubin(kernel.module, chip=chip, assembler="ptxas")
    assert producer(fast) == "nvjitlink" and producer(slow) == "ptxas"
    assert image_target(fast) == image_target(slow)
    assert image_target(fast).sm == chip and image_target(fast).kind == "cubin"
    assert functions(fast) == functions(slow) == {"async_participants"}
    # Same ELF header flags: same SM, same ABI, same accelerator features.
    assert fast[4:20] == slow[4:20] and fast[48:52] == slow[48:52]


@needs_nvjitlink
def test_auto_picks_nvjitlink_for_to_cubin_and_kernel_compile(kernel):
    assert compiler.resolve_assembler() == "nvjitlink"
    assert producer(compiler.to_cubin(kernel.module, use_cache=False)) == "nvjitlink"
    cubin = kernel.compile("sm_100a")
    assert producer(cubin) == "nvjitlink"
    assert image_target(cubin).sm == "sm_100a"
    assert functions(cubin) == {"async_participants"}


@needs_nvjitlink
@needs_ptxas
def test_env_forces_ptxas_and_cache_keeps_assemblers_apart(kernel, tmp_path, monkeypatch):
    compiler.to_cubin(kernel.module, assembler="nvjitlink")
    monkeypatch.setenv(compiler.ENV_ASSEMBLER, "ptxas")
    assert producer(compiler.to_cubin(kernel.module)) == "ptxas"
    assert producer(kernel.compile()) == "ptxas"
    assert len(os.listdir(tmp_path / "cache")) == 2


@needs_nvjitlink
def test_nvjitlink_reports_ptx_errors_with_its_log():
    bad = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k() { bogus.op; }\n"
    with pytest.raises(_nvjitlink.NvJitLinkError, match="bogus"):
        _nvjitlink.assemble(bad, "sm_90a")
    with pytest.raises(compiler.CompileError, match="bogus"):
        compiler.assemble(bad, "sm_90a", "nvjitlink", lambda: pytest.fail("no fallback"))
    # 'auto' hands a rejected input to ptxas instead.
    assert compiler.assemble(bad, "sm_90a", "auto", lambda: b"from ptxas") == b"from ptxas"


def test_nvjitlink_is_installed_and_the_default(monkeypatch):
    monkeypatch.delenv(compiler.ENV_ASSEMBLER, raising=False)
    assert _nvjitlink.available(), _nvjitlink.unavailable_reason()
    assert compiler.resolve_assembler() == "nvjitlink"
    assert _nvjitlink.version() >= (13, 0)


@needs_ptxas
def test_forced_ptxas_compiles_the_same_callable(kernel):
    fn = kernel.compile(assembler="ptxas")
    assert producer(fn) == "ptxas" and image_target(fn).sm == "sm_90a"
    assert functions(fn) == {"async_participants"}
    assert fn.params == (("out", "ptr"), ("n", "i32")) and fn.smem == kernel.smem_bytes
    if _nvjitlink.available():
        fast = kernel.compile()
        assert producer(fast) == "nvjitlink" and fast is not fn
        assert fast.metadata() == fn.metadata()


def test_unknown_assembler_is_rejected():
    with pytest.raises(ValueError, match="unknown assembler 'nvcc'"):
        compiler.resolve_assembler("nvcc")


@needs_ptxas
def test_without_nvjitlink_auto_falls_back_to_ptxas(kernel, no_nvjitlink):
    assert not _nvjitlink.available()
    assert "pip install nvidia-nvjitlink" in _nvjitlink.unavailable_reason()
    assert compiler.resolve_assembler("auto") == "ptxas"
    cubin = compiler.to_cubin(kernel.module, use_cache=False)
    assert producer(cubin) == "ptxas" and image_target(cubin).sm == "sm_90a"
    assert producer(kernel.compile()) == "ptxas"
    with pytest.raises(compiler.CompileError, match="nvJitLink is not loadable"):
        compiler.to_cubin(kernel.module, assembler="nvjitlink")
