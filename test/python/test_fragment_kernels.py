"""The register-fragment kernels of the GPU suite (test/gpu/fragment_kernels.py),
checked without a GPU: each builds, verifies, lowers to PTX that ptxas
accepts for sm_90a (``assembler="ptxas"`` where ptxas is on PATH, else
nvJitLink), with the instructions each op stands for, and no local-memory
spills (a fragment that does not stay in registers is a bug of the layer)."""

import os
import re
import shutil
import sys

import pytest

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "gpu")))
import fragment_kernels as fk  # noqa: E402

ASSEMBLER = "ptxas" if shutil.which("ptxas") else "nvjitlink"


def compiled(k):
    k.verify()
    ptx = k.to_ptx()
    cubin = k.compile(assembler=ASSEMBLER)
    assert bytes(cubin)[:4] == b"\x7fELF"
    assert ".local" not in ptx, "registers spilled to local memory"
    return ptx


def count(ptx, text):
    return len(re.findall(re.escape(text), ptx))


@pytest.mark.parametrize("n", [64, 24])
def test_ops_kernel_emits_each_op_as_its_instruction(n):
    ptx = compiled(fk.ops_kernel(n))
    values = n // 2
    # exp2 / reciprocal: the Fragment op (n / 2 values) + rv_exp2 / rv_reciprocal (2)
    assert count(ptx, "ex2.approx.ftz.f32") == values + 2
    assert count(ptx, "rcp.approx.ftz.f32") == values + 2
    # one fma.rn.f32 per value of "fma": no other multiply-add is contracted,
    # which the exact references of fragment_reference.py rely on
    assert count(ptx, "fma.rn.f32") == values
    assert count(ptx, "shfl.sync.bfly.b32") > 0 and count(ptx, "max.f32") > 0
    for text in ("min.f32", "div.rn.f32", "neg.f32", "selp.f32", "sub.rn.f32", "mul.rn.f32",
                 "add.rn.f32", "cvt.rn.f32.s32", "cvt.rzi.s32.f32", "cvt.rn.bf16.f32",
                 "setp."):
        assert text in ptx, text


def test_row_reductions_shuffle_within_the_quad():
    ptx = compiled(fk.ops_kernel(64))
    # every butterfly shuffle is lane ^ 1 or lane ^ 2 (the quad), over 32 lanes
    masks = re.findall(r"shfl\.sync\.bfly\.b32\s+%r\d+, %r\d+, (\d+), 31, -1;", ptx)
    assert masks and set(masks) == {"1", "2"}
    assert count(ptx, "shfl.sync.bfly.b32") == len(masks)


def test_convert_kernel_packs_pairs():
    ptx = compiled(fk.convert_kernel(64))
    pairs = 64 // 4          # n / 2 values per thread, two per cvt
    for text in ("cvt.rn.bf16x2.f32", "cvt.rn.f16x2.f32", "cvt.rn.satfinite.e4m3x2.f32",
                 "cvt.rn.satfinite.e5m2x2.f32"):
        assert count(ptx, text) == pairs, text
    assert count(ptx, "st.global.b16") == 2 * pairs and count(ptx, "st.global.b32") == 2 * pairs


def test_operand_a_kernel_shuffles_only_for_8_bit_types():
    ptx = compiled(fk.operand_a_kernel(64))
    # 16-bit: the accumulator layout is the A layout; 8-bit: per register,
    # two candidate pairs from each of two quad lanes (4 shfl.idx), per
    # k32 slice 4 registers; two slices (n = 64), two 8-bit types.
    assert count(ptx, "shfl.sync.idx.b32") == 2 * 2 * 4 * 4
    assert count(ptx, "shfl.sync.bfly") == 0
    assert count(ptx, "cvt.rn.bf16x2.f32") == 16 and count(ptx, "cvt.rn.f16x2.f32") == 16


@pytest.mark.parametrize("name, layout, k", fk.MMA_RS_CASES)
def test_mma_rs_kernel_issues_register_a_wgmma(name, layout, k):
    ptx = compiled(fk.mma_rs_kernel(layout, k, name))
    trans_b = 0 if layout.major == "K" else 1
    n = layout.mn
    pattern = (rf"wgmma\.mma_async\.sync\.aligned\.m64n{n}k16\.f32\.bf16\.bf16 "
               rf"\{{(%r\d+, ){{{n // 2 - 1}}}%r\d+\}}, \{{%r\d+, %r\d+, %r\d+, %r\d+\}}, "
               rf"%rd\d+, p, 1, 1, {trans_b};")
    assert len(re.findall(pattern, ptx)) == k // 16
    # K-major starts from nothing (scale-d 0 on the first slice), MN-major
    # accumulates into zeros
    scale_d = re.findall(r"setp\.ne\.b32 p, (\d), 0;", ptx)
    assert scale_d == (["0"] + ["1"] * (k // 16 - 1) if layout.major == "K" else
                       ["1"] * (k // 16))
    assert "fence.proxy.async.shared::cta" in ptx
    assert re.search(r"wgmma\.wait_group\.sync\.aligned\s+0;", ptx)
