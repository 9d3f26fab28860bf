"""The Hopper GEMM's authoring pieces and its kernel, deviceless: argument
checks, the tile arithmetic the kernel and the host share, every variant of
examples/hopper_gemm.py built, checked and lowered. The GPU check against
torch.matmul is test/gpu/test_gpu.py::test_gemm_matches_torch."""

import os
import sys
from dataclasses import replace

import pytest

from pipeline_mlir import runtime as rt
from pipeline_mlir.kernel import epilogue, wgmma
from pipeline_mlir.layout import OperandLayout
from pipeline_mlir.kernel.warpgroup import check_register_budget, set_max_registers

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
sys.path.insert(0, EXAMPLES)
import hopper_gemm  # noqa: E402
import hopper_gemm_host  # noqa: E402


# --- wgmma, registers, epilogue ----------------------------------------------------

@pytest.mark.parametrize("n", [0, 12, 264, "128"])
def test_wgmma_shape_checked(n):
    with pytest.raises(ValueError, match="wgmma N must be a multiple of 8"):
        wgmma.WarpgroupMma(n)


def test_wait_group_and_descriptor_offsets_checked():
    with pytest.raises(ValueError, match="pending must be an int in 0..7"):
        wgmma.wait_group(8)
    with pytest.raises(ValueError, match="multiples of 16 bytes"):
        wgmma.advance_descriptor(None, 8)


@pytest.mark.parametrize("count", [20, 260, 41])
def test_set_max_registers_checked(count):
    with pytest.raises(ValueError, match="multiple of 8 in 24..256"):
        set_max_registers(count, increase=True)


def test_register_budget():
    check_register_budget(384, 1, 40, 2, 232)          # 64512 <= 65536
    with pytest.raises(ValueError, match="66560 > 65536"):
        check_register_budget(384, 1, 40, 2, 240)
    with pytest.raises(ValueError, match="cover the whole block"):
        check_register_budget(256, 1, 40, 2, 232)


def test_epilogue_tile_checked():
    epilogue.check_tile(OperandLayout("bf16", "K", 128, 64, 256), 256)
    with pytest.raises(ValueError, match="output dtype must be 'bf16' or 'f16'"):
        epilogue.check_tile(OperandLayout("e4m3", "K", 128, 64, 256), 256)
    with pytest.raises(ValueError, match="must be 64 x 128 with its columns contiguous"):
        epilogue.check_tile(OperandLayout("bf16", "K", 128, 64, 256), 128)
    # passes of ceil(boxes / passes) boxes, the last one fewer (3 = 2 + 1),
    # none empty (4 passes of 3 boxes), and even with a fused epilogue
    assert hopper_gemm.GemmConfig(block_n=192).epilogue_bytes() == 2 * 2 * 64 * 128
    with pytest.raises(ValueError, match="3 C boxes do not split into 4 epilogue passes"):
        hopper_gemm.build(hopper_gemm.GemmConfig(block_n=192, epilogue_passes=4))


# --- the kernel ----------------------------------------------------------------------

def test_descriptor_constant_in_ir():
    """Leading offset 16 B (1), stride offset 1024 B (64), 128-byte swizzle
    (mode 1 in bits 62-63) -- the fixed part of every operand descriptor."""
    k = hopper_gemm.build()
    fixed = (1 << 16) | (64 << 32) | (1 << 62)
    assert f"arith.constant {fixed} : i64" in str(k)


def test_stages_follow_shared_memory():
    assert hopper_gemm.GemmConfig().num_stages() == 4                    # 2-pass epilogue
    # 128x192: 40 KiB a stage; a third of the 48 KiB C tile per pass leaves room for 5
    assert hopper_gemm.GemmConfig(block_n=192, epilogue_passes=3, stages=8).num_stages() == 5
    assert hopper_gemm.GemmConfig(epilogue_passes=1).num_stages() == 3   # whole C tile
    assert hopper_gemm.GemmConfig(tma_store_epilogue=False).num_stages() == 4
    cfg = hopper_gemm.GemmConfig(consumer_registers=240)
    with pytest.raises(ValueError, match="register budget"):
        hopper_gemm.build(cfg)


VARIANTS = {
    "default": {},
    "one_consumer_direct": dict(consumer_warpgroups=1, setmaxnreg=False,
                                tma_store_epilogue=False),
    "no_setmaxnreg": dict(setmaxnreg=False),
    "full_epilogue_buffer": dict(epilogue_passes=1),
    "f16_bn128": dict(dtype="f16", block_n=128),
    "cluster2": dict(cluster_m=2),
    # pipeline_mlir.gemm's 128x192 and 128x64 tiles (ops/gemm_configs.py)
    "bn192_three_passes": dict(block_n=192, epilogue_passes=3, stages=5),
    "f16_bn64": dict(dtype="f16", block_n=64, epilogue_passes=1, stages=8),
    # the 192-row tiles: three consumer warpgroups, 512 threads
    "three_consumer_wgs_bn192": dict(block_n=192, consumer_warpgroups=3, epilogue_passes=3,
                                     producer_registers=32, consumer_registers=160),
    "three_consumer_wgs_bn128_cluster2": dict(block_n=128, consumer_warpgroups=3,
                                              epilogue_passes=2, producer_registers=32,
                                              consumer_registers=160, cluster_m=2),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_builds_checks_and_lowers(variant):
    """Each variant verifies, passes the protocol checker (on by default in
    the lowering) and lowers to PTX with exactly the ingredients it asks for."""
    cfg = replace(hopper_gemm.GemmConfig(), **VARIANTS[variant])
    k = hopper_gemm.build(cfg)
    k.verify()
    ptx = k.to_ptx()
    shape = f"m64n{cfg.block_n}k16.f32.{cfg.dtype}.{cfg.dtype}"
    # 4 wgmma for the first k-block and 4 in the mainloop.
    assert ptx.count(f"wgmma.mma_async.sync.aligned.{shape}") == 8
    assert ("setmaxnreg.inc" in ptx) == cfg.setmaxnreg
    assert ("cp.async.bulk.tensor.2d.global.shared::cta" in ptx) == cfg.tma_store_epilogue
    assert ("multicast::cluster" in ptx) == (cfg.cluster_m > 1)
    assert f".reqntid {cfg.threads}, 1, 1" in ptx
    assert k.smem_bytes <= hopper_gemm.SMEM_LIMIT
    # one TMA store per 64-column C box of each consumer warpgroup's pass
    c_boxes = cfg.block_n // 64
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == (
        c_boxes if cfg.tma_store_epilogue else 0)
    assert k.stages == cfg.num_stages()


def test_simulator_runs_the_gemm_with_real_trip_counts():
    from pipeline_mlir.sim.cli import main as sim_main

    k = hopper_gemm.build()
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"gemm_{os.getpid()}.mlir")
    with open(path, "w") as f:
        f.write(str(k))
    try:
        assert sim_main([path, "--arg", "4=256", "--arg", "5=256", "--arg", "6=256",
                         "--schedules", "2"]) == 0
        # Without the argument values the simulator chooses small ones.
        assert sim_main([path, "--schedules", "1"]) == 0
    finally:
        os.remove(path)


# --- the host side, without a GPU -------------------------------------------------

def test_meta_and_occupancy_query_checked_before_the_driver():
    cfg = hopper_gemm.GemmConfig(cluster_m=2)
    k = hopper_gemm.build(cfg)
    meta = hopper_gemm_host.meta_of(cfg, k)
    assert set(hopper_gemm_host.META_KEYS) <= set(meta)
    assert (meta["block_m"], meta["cluster_m"], meta["threads"]) == (128, 2, 384)
    assert meta["signature"] == ["tma", "tma", "tma", "ptr", "i32", "i32", "i32"]
    assert meta["layouts"]["b"] == dict(dtype="bf16", major="K", swizzle=128, rows=128,
                                        cols=64)      # each CTA's half of B
    kern = rt.Kernel(None, cfg.name, meta["signature"],
                     device=rt.Device.fake(), attrs=rt.FuncAttrs())
    with pytest.raises(rt.LaunchConfigError, match="17 blocks"):
        kern.max_active_clusters((384, 1, 1), (17, 1, 1), meta["smem"])
    with pytest.raises(rt.NoGpuError):
        kern.max_active_clusters((384, 1, 1), (2, 1, 1), meta["smem"])
