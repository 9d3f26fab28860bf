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


# A fresh interpreter: builds a kernel, compiles nothing, reports whether the
# library got loaded in the background (the preload thread, then joined).
_PRELOAD_CHILD = """
import json, time
from pipeline_mlir import _nvjitlink
from pipeline_mlir.kernel import Int32, Kernel
before = _nvjitlink._loaded
Kernel("k", block_dim=32, params={"n": Int32()})
started = _nvjitlink._preload_started
deadline = time.monotonic() + 60
while started and not _nvjitlink._loaded and time.monotonic() < deadline:
    time.sleep(0.005)  # nothing here calls load(): only the thread can
print(json.dumps({"before": before, "started": started,
                  "loaded": _nvjitlink._loaded, "lib": _nvjitlink._lib is not None}))
"""


def _preload_child(env_assembler):
    import json
    import subprocess

    env = dict(os.environ)
    env.pop(compiler.ENV_ASSEMBLER, None)
    if env_assembler:
        env[compiler.ENV_ASSEMBLER] = env_assembler
    out = subprocess.run([sys.executable, "-c", _PRELOAD_CHILD], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@needs_nvjitlink
def test_kernel_build_loads_nvjitlink_in_the_background():
    got = _preload_child(None)
    assert got == {"before": False, "started": True, "loaded": True, "lib": True}


def test_forced_ptxas_does_not_load_nvjitlink():
    got = _preload_child("ptxas")
    assert got == {"before": False, "started": False, "loaded": False, "lib": False}
