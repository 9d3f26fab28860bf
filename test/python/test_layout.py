"""OperandLayout (python/pipeline_mlir/layout.py): every layout -> box, bytes,
wgmma descriptor bits, K per instruction and K-slice advance, each checked
against values computed here by hand from the PTX ISA's "Matrix Descriptor
Format" (bits 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base
offset, 62-63 swizzle: 0 none, 1 = 128 B, 2 = 64 B, 3 = 32 B) and the
canonical layouts of CUTLASS's make_gmma_desc; bad layouts rejected with
clear errors; the descriptor as the lowered kernel computes it; the host's
tensor-map arguments."""

import re
import shutil

import pytest

from mlir.dialects import arith, llvm

from pipeline_mlir import runtime as rt
from pipeline_mlir.kernel import GlobalPtr, Kernel, SmemPtr, wgmma
from pipeline_mlir.kernel.values import i32
from pipeline_mlir.layout import LayoutError, OperandLayout

needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")


def fields(lbo, sbo, mode):
    """The descriptor's constant part from byte offsets, by the ISA table."""
    return ((lbo // 16) << 16) | ((sbo // 16) << 32) | (mode << 62)


# (layout, box, box_bytes, bytes, alignment, K per wgmma, slice offsets, LBO, SBO, mode)
CASES = {
    # The 16-bit GEMM's A: 128 rows of 64 bf16 = 128 B each, the 128-B
    # swizzle atom 8 rows x 128 B = 1024 B -> SBO 1024; LBO unused (16 B,
    # field 1); K slice s = 16 elements = 32 B further along the row.
    "bf16_K_128": (OperandLayout("bf16", "K", 128, 128, 64),
                   (128, 64), 128 * 128, 128 * 64 * 2, 1024, 16,
                   [0, 32, 64, 96], 16, 1024, 1),
    # FP8: 128 e4m3 per 128-B row; k32 per wgmma = the same 32 B per slice.
    "e4m3_K_128": (OperandLayout("e4m3", "K", 128, 128, 128),
                   (128, 128), 128 * 128, 128 * 128, 1024, 32,
                   [0, 32, 64, 96], 16, 1024, 1),
    "e5m2_K_128": (OperandLayout("e5m2", "K", 128, 64, 256),
                   (64, 128), 64 * 128, 64 * 256, 1024, 32,
                   # 8 slices of 32 B: 4 in box 0, then box 1 (64 x 128 B later)
                   [0, 32, 64, 96, 8192, 8192 + 32, 8192 + 64, 8192 + 96], 16, 1024, 1),
    # MN-major B given K x N (attention's V): a box of 64 K-rows x 64 bf16 of
    # N is the 128-B atom stacked along K; SBO = 8 K-rows x 128 B = 1024;
    # LBO = the next 64 N-columns = the next box = 64 x 128 B = 8192; a k16
    # slice is 16 K-rows x 128 B = 2048 B.
    "bf16_MN_128": (OperandLayout("bf16", "MN", 128, 64, 128),
                    (64, 64), 64 * 128, 64 * 128 * 2, 1024, 16,
                    [0, 2048, 4096, 6144], 64 * 128, 1024, 1),
    # 64-B swizzle: 32 f16 per row, atom 8 x 64 B = 512; slices 0, 1 in the
    # first box (32 B each), 2, 3 in the second (64 rows x 64 B = 4096 on).
    "f16_K_64": (OperandLayout("f16", "K", 64, 64, 64),
                 (64, 32), 64 * 64, 64 * 64 * 2, 512, 16,
                 [0, 32, 4096, 4096 + 32], 16, 512, 2),
    # 32-B swizzle: a slice is a whole row, so each slice is the next box.
    "bf16_K_32": (OperandLayout("bf16", "K", 32, 64, 32),
                  (64, 16), 64 * 32, 64 * 32 * 2, 256, 16,
                  [0, 2048], 16, 256, 3),
    # No swizzle, K-major: boxes of 16 B rows; a core matrix (8 rows x 16 B)
    # is 128 contiguous bytes -> SBO 128; the K-neighbour core matrix is the
    # next box -> LBO = 64 x 16 = 1024; a k16 slice spans 2 boxes.
    "bf16_K_none": (OperandLayout("bf16", "K", 0, 64, 32),
                    (64, 8), 64 * 16, 64 * 32 * 2, 128, 16,
                    [0, 2 * 1024], 1024, 128, 0),
    # No swizzle, MN-major: LBO = between 8-row K groups = 8 x 16 = 128;
    # SBO = between 8-element MN columns = the next box = 16 x 16 = 256.
    "f16_MN_none": (OperandLayout("f16", "MN", 0, 16, 64),
                    (16, 8), 16 * 16, 16 * 64 * 2, 128, 16,
                    [0], 128, 256, 0),
    # tf32 operands: 32 fp32 per 128-B row, k8 per wgmma (32 B).
    "f32_K_128": (OperandLayout("f32", "K", 128, 64, 32),
                  (64, 32), 64 * 128, 64 * 32 * 4, 1024, 8,
                  [0, 32, 64, 96], 16, 1024, 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_layout_facts_match_the_hand_computation(name):
    lay, box, box_bytes, nbytes, align, kpi, slices, lbo, sbo, mode = CASES[name]
    assert lay.box == box
    assert lay.box_bytes == box_bytes
    assert lay.bytes == nbytes == lay.boxes * lay.box_bytes
    assert lay.alignment == align
    assert lay.k_per_instruction == kpi
    assert [lay.k_slice_offset(s) for s in range(lay.k_slices)] == slices
    assert (lay.leading_byte_offset, lay.stride_byte_offset) == (lbo, sbo)
    assert lay.descriptor_bits == fields(lbo, sbo, mode)
    assert OperandLayout.from_meta(lay.to_meta()) == lay


def test_the_gemm_descriptor_constant():
    """The 16-bit GEMM's operands: (1 << 16) | (64 << 32) | (1 << 62), the
    constant the kernel has always used."""
    assert OperandLayout.one_box("bf16", "K", 128, 256).descriptor_bits == \
        (1 << 16) | (64 << 32) | (1 << 62)


def test_one_box_is_one_swizzle_span_of_k():
    assert OperandLayout.one_box("bf16", "K", 128, 128).cols == 64
    assert OperandLayout.one_box("e4m3", "K", 128, 128).cols == 128
    assert OperandLayout.one_box("f32", "K", 64, 8).cols == 16
    assert OperandLayout.one_box("f16", "K", 0, 8).cols == 8


def test_mn_and_k_follow_major():
    k_major = OperandLayout("bf16", "K", 128, 128, 64)
    mn_major = OperandLayout("bf16", "MN", 128, 64, 128)
    assert (k_major.mn, k_major.k) == (128, 64)
    assert (mn_major.mn, mn_major.k) == (128, 64)
    # A consumer warpgroup's 64 rows: 64 rows x 128 B on (K-major), the
    # second 64-element atom = the second box (MN-major).
    assert k_major.mn_offset(64) == 64 * 128
    assert mn_major.mn_offset(64) == 64 * 128
    with pytest.raises(LayoutError, match="multiple of 8 rows"):
        k_major.mn_offset(4)
    with pytest.raises(LayoutError, match="multiple of 64"):
        mn_major.mn_offset(32)
    # TMA coordinates are innermost first: (column, row).
    assert k_major.coords(5, 7) == [7, 5]


def cute_swizzle(offset, bits):
    """CuTe's Swizzle<B, 4, 3>: XOR bits [4, 4+B) with bits [7, 7+B)."""
    mask = ((1 << bits) - 1) << 7
    return offset ^ ((offset & mask) >> 3)


@pytest.mark.parametrize("swizzle, bits", [(128, 3), (64, 2), (32, 1), (0, 0)])
def test_swizzled_offset_is_cute_swizzle(swizzle, bits):
    lay = OperandLayout("bf16", "K", swizzle, 64, OperandLayout.one_box(
        "bf16", "K", swizzle, 64).cols)
    w = lay.atom_bytes
    for row in range(16):
        got = [lay.swizzled_offset(row, b) for b in range(0, w, 2)]
        assert got == [cute_swizzle(row * w + b, bits) for b in range(0, w, 2)]
        # Each row's chunks are a permutation of the row's chunks.
        assert {g // 16 for g in got[::8]} == {(row * w) // 16 + c for c in range(w // 16)}
        for c in range(w // 16):
            # swizzled_chunk: the same for whole chunks, from any row with
            # the same row % 8.
            assert row * w + lay.swizzled_chunk(row + 8, c) * 16 == \
                lay.swizzled_offset(row, 16 * c)
    if swizzle == 128:   # the example the epilogue comments give
        assert lay.swizzled_offset(3, 16 * 1 + 4) == 3 * 128 + (1 ^ 3) * 16 + 4


@pytest.mark.parametrize("args, match", [
    (("f8", "K", 128, 64, 64), "dtype must be one of"),
    (("bf16", "N", 128, 64, 64), "major must be 'K' or 'MN'"),
    (("bf16", "K", 16, 64, 64), "swizzle must be one of 0 .none., 32, 64, 128"),
    (("bf16", "K", True, 64, 64), "swizzle must be one of"),
    (("bf16", "K", 128, 100, 64), "rows must be a multiple of 8 in 8..256"),
    (("bf16", "K", 128, 512, 64), "rows must be a multiple of 8 in 8..256"),
    (("bf16", "K", 128, 64, 48), "cols must be a positive multiple of 64 .128 bytes of bf16"),
    (("e4m3", "K", 128, 64, 64), "cols must be a positive multiple of 128"),
    (("bf16", "K", 0, 64, 4), "multiple of 8 .16 bytes of bf16: one unswizzled"),
])
def test_bad_layouts_are_rejected(args, match):
    with pytest.raises(LayoutError, match=match):
        OperandLayout(*args)


def test_k_not_a_multiple_of_the_instruction():
    lay = OperandLayout("bf16", "K", 0, 64, 8)       # K = 8 < k16
    with pytest.raises(LayoutError, match="K = 8 is not a multiple of the 16"):
        lay.k_slices
    with pytest.raises(LayoutError, match="K slice 4 is outside 0..3"):
        OperandLayout("bf16", "K", 128, 64, 64).k_slice_offset(4)


# --- wgmma: operand types, K, transposition -----------------------------------------

def test_warpgroup_mma_from_layouts():
    from mlir.dialects import nvvm

    a = OperandLayout("e4m3", "K", 128, 128, 128)
    b = OperandLayout("e5m2", "K", 128, 128, 128)
    mma = wgmma.WarpgroupMma(128, a, b)
    assert (mma.k, mma.a_type, mma.b_type) == (32, nvvm.WGMMATypes.e4m3, nvvm.WGMMATypes.e5m2)
    assert (mma.layout_a, mma.layout_b) == (nvvm.MMALayout.row, nvvm.MMALayout.col)
    v = OperandLayout("bf16", "MN", 128, 64, 128)
    mma = wgmma.WarpgroupMma(128, "bf16", v)
    assert (mma.k, mma.layout_b) == (16, nvvm.MMALayout.row)   # B MN-major: row
    assert wgmma.WarpgroupMma(64, "f32").k == 8
    assert wgmma.WarpgroupMma(64).k == 16


@pytest.mark.parametrize("a, b, match", [
    (OperandLayout("e4m3", "MN", 128, 64, 128), None, "A is MN-major e4m3; wgmma reads only"),
    ("e4m3", OperandLayout("e5m2", "MN", 128, 64, 128), "B is MN-major e5m2"),
    ("f32", OperandLayout("f32", "MN", 128, 64, 32), "B is MN-major f32"),
    ("bf16", "f16", "same 16-bit type"),
    ("bf16", "e4m3", "same 16-bit type"),
    ("i8", None, "a dtype must be one of"),
])
def test_warpgroup_mma_rejects(a, b, match):
    with pytest.raises(ValueError, match=match):
        wgmma.WarpgroupMma(64, a, b)


@needs_ptxas
@pytest.mark.parametrize("name", ["bf16_K_128", "bf16_MN_128", "f16_K_64", "bf16_K_none"])
def test_kernel_descriptor_is_the_layouts(name):
    """The descriptor the kernel computes for a tile at shared address 0x400,
    moved to K slice 1, folded by LLVM into the two 32-bit halves it stores:
    start (0x400 + slice offset) >> 4 | the hand-computed fields."""
    lay, *_, slices, lbo, sbo, mode = CASES[name]
    k = Kernel("desc", chip="sm_90a", block_dim=32, params={"out": GlobalPtr()})
    with k:
        (out,) = k.args
        tile = SmemPtr(llvm.inttoptr(llvm.PointerType.get(3), arith.constant(i32(), 0x400)))
        desc = wgmma.smem_matrix_descriptor(tile, lay)
        llvm.store(wgmma.k_slice_descriptor(desc, lay, len(slices) - 1), out)
    want = ((0x400 + slices[-1]) >> 4) | fields(lbo, sbo, mode)
    ptx = k.to_ptx()
    lo = re.search(r"st\.global\.b32\s+\[%rd\d+\], (-?\d+);", ptx)
    hi = re.search(r"st\.global\.b32\s+\[%rd\d+\+4\], (-?\d+);", ptx)
    assert lo and hi, ptx
    got = (int(hi.group(1)) & 0xFFFFFFFF) << 32 | (int(lo.group(1)) & 0xFFFFFFFF)
    assert got == want, (hex(got), hex(want))


def test_descriptor_needs_a_layout():
    k = Kernel("d", chip="sm_90a", block_dim=32)
    with k, pytest.raises(TypeError, match="layout must be an OperandLayout"):
        wgmma.smem_matrix_descriptor(None, (128, 64))


# --- the host: tensor maps from the layout ---------------------------------------------

def test_runtime_takes_fp8_and_checks_the_layout():
    name, elem, span, _ = rt.tensormap.validate(0x1000, (256, 512), (512, 1), "float8_e4m3fn",
                                                (128, 128), 128)
    assert (name, elem, span) == ("float8_e4m3fn", 1, 128)
    assert rt.tensormap.validate(0x1000, (256, 512), (512, 1), "float8_e5m2",
                                 (128, 128), 128)[1] == 1
    lay = OperandLayout("bf16", "K", 128, 128, 64)
    with pytest.raises(rt.TmaDescriptorError, match="the tensor is float16 but the layout"):
        rt.make_tma_descriptor(0x1000, shape=(256, 256), dtype="float16", layout=lay)
    with pytest.raises(rt.TmaDescriptorError, match="either layout= or box_shape="):
        rt.make_tma_descriptor(0x1000, shape=(256, 256), dtype="bfloat16", layout=lay,
                               box_shape=(128, 64))
    with pytest.raises(rt.TmaDescriptorError, match="must be a pipeline_mlir.layout"):
        rt.make_tma_descriptor(0x1000, shape=(256, 256), dtype="bfloat16", layout=(128, 64))
    # A box wider than the swizzle span is what a wrong layout would give: the
    # layout's own box never is.
    rt.tensormap.validate(0x1000, (256, 256), (512, 2), "bfloat16", lay.box, lay.swizzle)
