"""The Blackwell GEMM's authoring pieces (tmem, tcgen05, clc, while_) and its
kernel, deviceless: descriptor bits, argument checks, every variant of
examples/blackwell_gemm.py built, checked by the protocol checker, lowered
and assembled for sm_100a, run by the simulator where it models the kernel,
and refused by the runner on a Hopper device. No Blackwell GPU ran it; the
GPU check is test/gpu/test_gpu.py::test_blackwell_gemm_matches_torch."""

import os
import re
import shutil
import sys
from dataclasses import replace

import mlir.ir as ir
import pytest
from mlir.dialects import arith, llvm

from pipeline_mlir import runtime as rt
from pipeline_mlir.kernel import GlobalPtr, Kernel, Scalar, clc, tcgen05, tmem
from pipeline_mlir.kernel.smem import SmemPtr
from pipeline_mlir.kernel.values import i1, i32, i64
from pipeline_mlir.layout import OperandLayout
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineClcFetchAsync)

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
sys.path.insert(0, EXAMPLES)
import blackwell_gemm  # noqa: E402
import blackwell_gemm_host  # noqa: E402

needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")


# --- tcgen05: instruction descriptor ---------------------------------------------

@pytest.mark.parametrize("m, n, dtype, group, want", [
    # D f32 (bit 4), A/B bf16 (bits 7, 10), N >> 3 at 17, M >> 4 at 24.
    (128, 256, "bf16", 1, (1 << 4) | (1 << 7) | (1 << 10) | (32 << 17) | (8 << 24)),
    (256, 256, "bf16", 2, (1 << 4) | (1 << 7) | (1 << 10) | (32 << 17) | (16 << 24)),
    (128, 128, "f16", 1, (1 << 4) | (16 << 17) | (8 << 24)),
    (64, 8, "f16", 1, (1 << 4) | (1 << 17) | (4 << 24)),
])
def test_instruction_descriptor_bits(m, n, dtype, group, want):
    assert tcgen05.instruction_descriptor(m, n, dtype, group) == want
    assert tcgen05.instruction_descriptor(128, 256) == 0x08400490  # as in the PTX


@pytest.mark.parametrize("args, match", [
    ((96, 128), r"M must be one of \(64, 128\) for cta_group::1"),
    ((256, 128, "bf16", 1), r"M must be one of \(64, 128\)"),
    ((64, 128, "bf16", 2), r"M must be one of \(128, 256\) for cta_group::2"),
    ((128, 136), "N must be a multiple of 16 in 8..256"),
    ((128, 272), "N must be a multiple of 16"),
    ((256, 16, "bf16", 2), "N must be a multiple of 16 in 32..256"),
    ((128, 128, "bf16", 3), "cta_group must be 1 or 2"),
    ((128, 128, "f32"), "dtype must be one of"),
])
def test_instruction_descriptor_rejects(args, match):
    with pytest.raises(ValueError, match=match):
        tcgen05.instruction_descriptor(*args)


# --- tcgen05: shared-memory descriptor (sm_100 format) ------------------------------

@needs_ptxas
def test_smem_descriptor_has_the_sm100_version_and_swizzle_bits():
    """A tile at shared address 0x400: start 0x40, LBO 1, SBO 64, the fixed
    version 0b001 in bits 46-48 and swizzle 2 (128-byte) in bits 61-63 --
    not Hopper's 1 << 62."""
    k = Kernel("desc", chip="sm_100a", block_dim=32, params={"out": GlobalPtr()})
    with k:
        (out,) = k.args
        tile = SmemPtr(llvm.inttoptr(llvm.PointerType.get(3), arith.constant(i32(), 0x400)))
        llvm.store(tcgen05.smem_descriptor(tile, OperandLayout.one_box("bf16", "K", 128, 128)),
                   out)
    want = 0x40 | (1 << 16) | (64 << 32) | (1 << 46) | (2 << 61)
    ptx = k.to_ptx()
    # LLVM folds the whole descriptor and stores it as two 32-bit halves.
    lo = re.search(r"st\.global\.b32\s+\[%rd\d+\], (-?\d+);", ptx)
    hi = re.search(r"st\.global\.b32\s+\[%rd\d+\+4\], (-?\d+);", ptx)
    assert lo and hi, ptx
    got = (int(hi.group(1)) & 0xFFFFFFFF) << 32 | (int(lo.group(1)) & 0xFFFFFFFF)
    assert got == want, hex(got)


def test_smem_descriptor_needs_an_smem_pointer():
    k = Kernel("d", chip="sm_100a", block_dim=32)
    with k, pytest.raises(TypeError, match="tile must be an SmemPtr"):
        tcgen05.smem_descriptor(arith.constant(i64(), 0), None)


def test_mma_and_ld_checked():
    with pytest.raises(ValueError, match="repeat must be one of"):
        tcgen05.load_32x32b(None, 3)
    mma = tcgen05.Mma(256, 256, "bf16", cta_group=2)
    assert (mma.k, mma.accumulator_columns, mma.idesc) == (16, 256, 0x10400490)


# --- tensor memory ------------------------------------------------------------------

@pytest.mark.parametrize("cols", [16, 48, 1024, "512"])
def test_tmem_columns_checked(cols):
    with pytest.raises(ValueError, match="power of two in 32..512"):
        tmem.check_columns(cols)


def test_tmem_ops_in_ir():
    k = Kernel("t", chip="sm_100a", block_dim=32)
    with k:
        slot = k.smem_alloc(tmem.HOLDER_BYTES, align=16)
        tmem.alloc(slot, 512, cta_group=2)
        tmem.relinquish_alloc_permit(cta_group=2)
        base = tmem.load_address(slot)
        tmem.dealloc(tmem.offset(base, lane=32, column=256), 512, cta_group=2)
        with pytest.raises(ValueError, match="lane must be in 0..127"):
            tmem.offset(base, lane=128)
        with pytest.raises(TypeError, match="holder must be an SmemPtr"):
            tmem.alloc(base, 32)
        with pytest.raises(ValueError, match="cta_group must be 1 or 2"):
            tmem.alloc(slot, 32, cta_group=4)
    text = str(k)
    assert "nvvm.tcgen05.alloc" in text and "nvvm.tcgen05.dealloc" in text
    assert "cta_2" in text
    # (32 << 16) | 256: lane 32, column 256.
    assert f"arith.constant {(32 << 16) + 256} : i32" in text


# --- control flow: while_ -------------------------------------------------------------

def test_while_requires_the_condition_among_the_carried():
    k = Kernel("w", chip="sm_100a", block_dim=32)
    with k:
        valid = Scalar(arith.constant(i1(), 1))
        with pytest.raises(ValueError, match="condition must be one of the carried"):
            for _ in k.while_(valid, carry=[]):
                pass


def test_while_carries_and_rebinds():
    k = Kernel("w", chip="sm_100a", block_dim=32)
    with k:
        valid = Scalar(arith.constant(i1(), 1))
        n = Scalar(arith.constant(i32(), 0))
        for _ in k.while_(valid, carry=[valid, n]):
            n.set(n + 1)
            valid.set(n < 10)
        assert "scf.while" in str(k) and "scf.condition" in str(k)
    k.verify()


# --- cluster launch control -------------------------------------------------------------

def test_clc_scheduler_checks_its_pipeline():
    k = Kernel("c", chip="sm_100a", block_dim=64)
    with k:
        bars = k.alloc_barriers(4)
        resp = k.smem_alloc(32, align=16)
        p = PipelineClcFetchAsync.create(
            barrier_storage=bars, num_stages=2,
            producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 64), tx_count=32)
        with pytest.raises(ValueError, match="tx_count must be 16"):
            clc.ClcTileScheduler(p, resp)
        with pytest.raises(TypeError, match="SmemPtr"):
            clc.try_cancel(resp.ir_value, bars)


# --- the kernel ---------------------------------------------------------------------------

VARIANTS = {
    "default": {},                                   # 1-CTA, CLC
    "pair": dict(cta_group=2),                       # cta_group::2, CLC
    "static": dict(scheduler="static"),
    "pair_static": dict(cta_group=2, scheduler="static"),
    "f16_bn128": dict(dtype="f16", block_n=128),
}


def _ptx(cfg):
    k = blackwell_gemm.build(cfg)
    k.verify()
    return k, k.to_ptx()


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_builds_checks_and_lowers(variant):
    """Each variant verifies, passes the protocol checker (on by default in
    the lowering) and lowers to PTX with the instructions it asks for."""
    cfg = replace(blackwell_gemm.GemmConfig(), **VARIANTS[variant])
    k, ptx = _ptx(cfg)
    g = cfg.cta_group
    assert ptx.count(f"tcgen05.mma.cta_group::{g}.kind::f16") == 4     # one k-block
    assert f"tcgen05.alloc.cta_group::{g}.sync.aligned.shared::cta.b32" in ptx
    assert f"tcgen05.dealloc.cta_group::{g}" in ptx
    assert f"tcgen05.commit.cta_group::{g}" in ptx
    # The epilogue's segments are a run-time loop: one load in the code
    # whatever the segment count (block_n / 64).
    assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x64.b32") == 1
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 1
    assert "tcgen05.wait::ld.sync.aligned" in ptx
    assert ("clusterlaunchcontrol.try_cancel" in ptx) == cfg.clc
    assert ("clusterlaunchcontrol.query_cancel.is_canceled" in ptx) == cfg.clc
    assert (".reqnctapercluster 2, 1, 1" in ptx) == (g == 2)
    if g == 2:
        # Both CTAs' loads complete on the leader's barrier; commits reach both.
        assert "mbarrier::complete_tx::bytes.cta_group::2" in ptx
        assert "shared::cluster.multicast::cluster.b64" in ptx
    # The known block size is declared as CuTe DSL does (.reqntid).
    assert f".reqntid {cfg.threads}, 1, 1" in ptx
    assert k.smem_bytes <= blackwell_gemm.SMEM_LIMIT
    # The instruction descriptor is an immediate of the MMA.
    assert str(tcgen05.instruction_descriptor(cfg.mma_m, cfg.block_n, cfg.dtype, g)) in ptx


@needs_ptxas
@pytest.mark.parametrize("variant", ["default", "pair"])
def test_variant_assembles_for_sm100a(variant):
    cfg = replace(blackwell_gemm.GemmConfig(), **VARIANTS[variant])
    cubin = blackwell_gemm.build(cfg).compile(assembler="ptxas")
    assert rt.arch.cubin_target(cubin).sm == "sm_100a"


@pytest.mark.parametrize("scheduler", ["clc", "static"])
def test_pair_allocates_after_the_cluster_barrier(scheduler):
    """The PTX ISA asks that a cta_group::2 alloc run once the peer CTA is
    known to have started: the pair's barrier.cluster.wait comes before its
    alloc, and a bar.sync then publishes the address slot; the one-CTA
    kernel keeps its single init barrier after the alloc."""
    _, ptx = _ptx(replace(blackwell_gemm.GemmConfig(), cta_group=2, scheduler=scheduler))
    alloc = ptx.index("tcgen05.alloc.cta_group::2")
    wait = ptx.index("barrier.cluster.wait")
    assert wait < alloc
    assert "bar.sync" in ptx[alloc:] and ptx.index("bar.sync", alloc) < ptx.index("tcgen05.mma")
    _, one = _ptx(blackwell_gemm.GemmConfig(scheduler=scheduler))
    assert "barrier.cluster" not in one
    assert one.index("tcgen05.alloc.cta_group::1") < one.index("bar.sync")


@pytest.mark.parametrize("kw, match", [
    (dict(scheduler="dynamic"), "scheduler must be 'clc' or 'static'"),
    (dict(acc_stages=4), r"acc_stages \* block_n: columns must be a power of two"),
    (dict(epilogue_buffers=3), "4 epilogue segments must cycle evenly through 3"),
    (dict(block_n=200), "N must be a multiple of 16"),
])
def test_config_rejects(kw, match):
    with pytest.raises(ValueError, match=match):
        blackwell_gemm.build(replace(blackwell_gemm.GemmConfig(), **kw))


def test_stages_follow_shared_memory():
    assert blackwell_gemm.GemmConfig().num_stages() == 4
    assert blackwell_gemm.GemmConfig(stages=6).num_stages() == 4      # 48 KiB stages
    assert blackwell_gemm.GemmConfig(cta_group=2, stages=6).num_stages() == 6


# --- the simulator --------------------------------------------------------------------

def _simulate(cfg, args, schedules=2, patch=None, extra=()):
    from pipeline_mlir.sim.cli import main as sim_main

    text = str(blackwell_gemm.build(cfg))
    if patch:
        text, n = re.subn(patch[0], patch[1], text)
        assert n, f"the patch {patch[0]!r} matched nothing"
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"bw_{cfg.name}_{os.getpid()}.mlir")
    with open(path, "w") as f:
        f.write(text)
    try:
        return sim_main([path, *sum((["--arg", a] for a in args), []),
                         "--schedules", str(schedules), *extra])
    finally:
        os.remove(path)


ONE_CTA_ARGS = ["3=256", "4=512", "5=192"]
PAIR_ARGS = ["3=512", "4=512", "5=128"]


def test_simulator_runs_the_static_one_cta_gemm():
    cfg = blackwell_gemm.GemmConfig(scheduler="static")
    assert _simulate(cfg, ONE_CTA_ARGS) == 0


@pytest.mark.parametrize("clusters", ["0", "3"])
def test_simulator_runs_the_clc_one_cta_gemm(clusters, capsys):
    """The CLC loop (scf.while) with try_cancel succeeding ``clusters`` times."""
    cfg = blackwell_gemm.GemmConfig()
    assert _simulate(cfg, ONE_CTA_ARGS, extra=["--clc-clusters", clusters]) == 0
    assert "OK: 2 schedules, 0 deadlocks" in capsys.readouterr().out


def test_simulator_catches_a_wrong_clc_consumer_count(capsys):
    """One warp too many in the CLC consumer count: the next response can
    never be requested (the empty barrier never completes)."""
    cfg = blackwell_gemm.GemmConfig()
    bad = (r"(clc_fetch_async, stages = 2, producer = <thread, 1>, consumer = <thread, )224>",
           r"\g<1>256>")
    assert _simulate(cfg, ONE_CTA_ARGS, patch=bad) == 1
    assert "deadlock" in capsys.readouterr().out


@pytest.mark.parametrize("scheduler", ["static", "clc"])
def test_simulator_runs_the_pair_gemm(scheduler):
    """The simulator doubles the 2-CTA accumulator empty count as the
    lowering does (docs/Rationale.md section 5), so the pair runs clean."""
    cfg = blackwell_gemm.GemmConfig(cta_group=2, scheduler=scheduler)
    assert _simulate(cfg, PAIR_ARGS) == 0


@pytest.mark.parametrize("scheduler", ["static", "clc"])
def test_simulator_catches_a_pair_count_doubled_by_hand(scheduler, capsys):
    """The bug twin: the accumulator consumer count written already doubled
    (4 epilogue warps x 2 CTAs) is doubled again by the lowering and the
    simulator, so the empty barrier waits for arrivals that never come."""
    cfg = blackwell_gemm.GemmConfig(cta_group=2, scheduler=scheduler)
    doubled = (r"(umma_async, stages = 2, producer = <thread, 1>, consumer = <thread, )4>",
               r"\g<1>8>")
    assert _simulate(cfg, PAIR_ARGS, patch=doubled) == 1
    assert "deadlock" in capsys.readouterr().out


# --- the runner ------------------------------------------------------------------------

@needs_ptxas
def test_runner_refuses_the_gemm_on_hopper_and_takes_it_on_sm100():
    cfg = blackwell_gemm.GemmConfig()
    k = blackwell_gemm.build(cfg)
    meta = blackwell_gemm_host.meta_of(cfg, k)
    assert set(blackwell_gemm_host.META_KEYS) <= set(meta)
    cubin = k.compile(assembler="ptxas")
    with pytest.raises(rt.ArchMismatchError, match=r"built for sm_100a .* compute capability 9\.0"):
        blackwell_gemm_host.BlackwellGemm(cubin, meta,
                                          device=rt.Device.fake(cc=(9, 0), name="NVIDIA H100"))
    # On sm_100 the arch check passes and only the missing GPU stops it.
    with pytest.raises(rt.NoGpuError):
        blackwell_gemm_host.BlackwellGemm(cubin, meta, device=rt.Device.fake(cc=(10, 0)))


def test_host_grid():
    """CLC: one cluster per work unit (the running ones take the rest)."""
    g = blackwell_gemm_host.BlackwellGemm.__new__(blackwell_gemm_host.BlackwellGemm)
    g.meta = {"block_m": 128, "block_n": 256, "cta_group": 2, "scheduler": "clc"}
    assert g.grid(1024, 1024, 148) == (32, 1, 1)     # 4 x 4 units of 256 x 256, 2 CTAs each
    g.meta.update(cta_group=1, scheduler="static")
    g._resident = None
    assert g.grid(4096, 4096, 148) == (148, 1, 1)


@needs_ptxas
def test_gpu_bundle_builds_the_blackwell_gemms():
    """The GPU suite's entries: sm_100a cubins whatever the bundle's chip,
    checked by test_blackwell_gemm_matches_torch on sm_100 only."""
    sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "gpu")))
    import builders

    built = builders.build_blackwell_gemm("sm_90a", 0)
    assert len(built) == 4
    for b in built:
        assert b.entry["chip"] == "sm_100a" and b.entry["check"] == "bw_gemm"
        assert set(blackwell_gemm_host.META_KEYS) <= set(b.entry["gemm"])
        assert rt.arch.cubin_target(b.image).sm == "sm_100a"
