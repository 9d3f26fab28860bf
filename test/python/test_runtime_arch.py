"""Deviceless: which SM a cubin/PTX is for, and refusing the wrong GPU."""

import shutil
import subprocess

import pytest

from pipeline_mlir import runtime as rt
from pipeline_mlir.runtime import arch

TINY = """.version 8.8
.target {sm}
.address_size 64
.visible .entry tiny(.param .u64 p) {{ .reg .b64 %rd<2>; ld.param.u64 %rd1, [p]; st.global.u32 [%rd1], 7; ret; }}
"""

needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")


@pytest.fixture(scope="module")
def cubins(tmp_path_factory):
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas not on PATH")
    d = tmp_path_factory.mktemp("cubins")
    out = {}
    for sm in ("sm_80", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_100f", "sm_103a", "sm_120a"):
        (d / f"{sm}.ptx").write_text(TINY.format(sm=sm))
        subprocess.run(["ptxas", f"-arch={sm}", str(d / f"{sm}.ptx"), "-o", str(d / f"{sm}.cubin")],
                       check=True, capture_output=True)
        out[sm] = (d / f"{sm}.cubin").read_bytes()
    return out


@needs_ptxas
@pytest.mark.parametrize("sm", ["sm_80", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_100f",
                                "sm_103a", "sm_120a"])
def test_cubin_target_of_real_cubins(cubins, sm):
    t = arch.cubin_target(cubins[sm])
    assert t.sm == sm and t.kind == "cubin"


@needs_ptxas
def test_cubin_sm_comes_from_e_flags(cubins):
    """Without the ptxas note and .nv.compat the SM number still comes from
    e_flags (ABI 8: bits 8..15); an older-ABI header keeps it in bits 0..7."""
    data = bytearray(cubins["sm_90a"])
    assert data[8] >= 8 and (int.from_bytes(data[48:52], "little") >> 8) & 0xFF == 90
    stripped = bytes(data).replace(b"-arch sm_90a", b"-xxxx xxxxxx")
    assert arch.cubin_target(stripped).sm == "sm_90a"  # from .nv.compat
    old = bytearray(stripped)
    old[8] = 7
    old[48:52] = (0x5A | 0x500).to_bytes(4, "little")
    assert arch.cubin_target(bytes(old)).cc == (9, 0)


def test_not_a_cubin():
    with pytest.raises(ValueError, match="ELF magic"):
        arch.cubin_target(b"\0" * 64)
    elf = bytearray(64)
    elf[:6] = b"\x7fELF\x02\x01"
    elf[18:20] = (62).to_bytes(2, "little")  # x86-64
    with pytest.raises(ValueError, match="EM_CUDA"):
        arch.cubin_target(bytes(elf))


def test_ptx_target():
    assert arch.ptx_target(TINY.format(sm="sm_90a")).sm == "sm_90a"
    assert arch.ptx_target(TINY.format(sm="sm_100f").encode()).sm == "sm_100f"
    assert arch.image_target(TINY.format(sm="sm_90")) == rt.Target(9, 0, "", "ptx")
    with pytest.raises(ValueError, match=".target"):
        arch.ptx_target(".version 8.0\n")


@pytest.mark.parametrize("sm,kind,cc,ok", [
    ("sm_90a", "cubin", (9, 0), True), ("sm_90a", "cubin", (10, 0), False),
    ("sm_100a", "cubin", (9, 0), False), ("sm_100a", "cubin", (10, 3), False),
    ("sm_100f", "cubin", (10, 3), True), ("sm_100f", "cubin", (9, 0), False),
    ("sm_90", "cubin", (9, 0), True), ("sm_80", "cubin", (9, 0), False),
    ("sm_80", "cubin", (8, 6), True), ("sm_90", "ptx", (10, 0), True),
    ("sm_90a", "ptx", (10, 0), False), ("sm_100", "ptx", (9, 0), False),
])
def test_can_run(sm, kind, cc, ok):
    t = arch.parse_sm(sm)
    assert arch.can_run(rt.Target(t.major, t.minor, t.suffix, kind), cc) is ok


@needs_ptxas
def test_sm100a_cubin_refused_on_hopper(cubins):
    with pytest.raises(rt.ArchMismatchError) as e:
        rt.Module(cubins["sm_100a"], device=rt.Device.fake(cc=(9, 0), name="NVIDIA H100"),
                  name="k.cubin")
    msg = str(e.value)
    assert "cubin 'k.cubin' was built for sm_100a" in msg
    assert "device 'NVIDIA H100' has compute capability 9.0 (Hopper)" in msg
    assert 'chip="sm_90a"' in msg


@needs_ptxas
def test_sm90a_cubin_refused_on_blackwell(cubins):
    with pytest.raises(rt.ArchMismatchError, match=r"built for sm_90a .*compute capability 10\.0"):
        rt.Module(cubins["sm_90a"], device=rt.Device.fake(cc=(10, 0)))


@needs_ptxas
@pytest.mark.parametrize("sm,cc", [("sm_100a", (10, 0)), ("sm_90a", (9, 0))])
def test_matching_cubin_goes_on_to_load(cubins, sm, cc):
    """The same load path for sm_90a and sm_100a: past the arch check it
    reaches the driver, which a stand-in device refuses."""
    with pytest.raises(rt.NoGpuError, match="cuModuleLoadData.*stand-in"):
        rt.Module(cubins[sm], device=rt.Device.fake(cc=cc))


def test_ptx_goes_through_the_jit_check():
    dev = rt.Device.fake(cc=(10, 0))
    with pytest.raises(rt.NoGpuError):
        rt.Module(TINY.format(sm="sm_90"), device=dev)  # JIT can target newer GPUs
    with pytest.raises(rt.ArchMismatchError, match="ptx .*sm_90a"):
        rt.Module(TINY.format(sm="sm_90a"), device=dev)
