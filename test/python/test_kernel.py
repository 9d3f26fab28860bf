"""pipeline_mlir.kernel: the kernel-authoring layer."""

import re

import pytest

import mlir.ir as ir

from pipeline_mlir.kernel import (Float32, GlobalPtr, Int32, Int64, Kernel,
                                  LoweringUnavailable, Scalar, SmemPtr,
                                  TmaDescriptor, has_pipeline_to_cubin, load,
                                  store)
from pipeline_mlir.kernel import compile as kcompile
from pipeline_mlir.kernel.values import i32

from _ir_utils import ops_named
from pipeline_mlir import compiler
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier, PipelineAsync,
                                    PipelineState)

needs_lowering = pytest.mark.skipif(
    not has_pipeline_to_cubin(),
    reason="the 'pipeline-to-cubin' pass pipeline is not registered in the "
           "installed pipeline_mlir (rebuild once the lowering has landed)")


def test_module_structure_and_launch_bounds():
    k = Kernel("my_kernel", chip="sm_100a", block_dim=(128, 2),
               cluster_dim=(2, 1, 1),
               params={"p": GlobalPtr(), "d": TmaDescriptor(), "n": Int32(),
                       "m": Int64(), "x": Float32()})
    with k:
        pass
    mod = k.module.operation
    assert "gpu.container_module" in mod.attributes
    (gm,) = ops_named(k, "gpu.module")
    assert 'chip = "sm_100a"' in str(gm.attributes["targets"])
    (f,) = ops_named(k, "gpu.func")
    assert "gpu.kernel" in f.attributes
    assert list(ir.DenseI32ArrayAttr(f.attributes["known_block_size"])) == [128, 2, 1]
    assert list(ir.DenseI32ArrayAttr(f.attributes["known_cluster_size"])) == [2, 1, 1]
    ftype = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
    assert [str(t) for t in ftype.inputs] == [
        "!llvm.ptr<1>", "!llvm.ptr", "i32", "i64", "f32"]
    assert isinstance(k.args.n, Scalar) and isinstance(k.args.p, ir.Value)
    k.verify()


def test_no_cluster_attr_for_one_cta():
    k = Kernel(cluster_dim=1)
    (f,) = ops_named(k, "gpu.func")
    assert "known_cluster_size" not in f.attributes


def test_bad_params_and_dims():
    with pytest.raises(TypeError, match="parameter 'p'"):
        Kernel(params={"p": "pointer"})
    with pytest.raises(ValueError, match="exceeds 1024 threads"):
        Kernel(block_dim=(1024, 2))
    with pytest.raises(ValueError, match="block_dim must be"):
        Kernel(block_dim=(0,))


def test_sregs():
    k = Kernel(block_dim=(64, 2), cluster_dim=2)
    with k:
        k.thread_idx(), k.block_idx(), k.lane_idx(), k.cluster_cta_rank()
        k.warp_idx()
        k.sync_threads()
        k.cluster_sync()
    for name in ["nvvm.read.ptx.sreg.tid.x", "nvvm.read.ptx.sreg.tid.y",
                 "nvvm.read.ptx.sreg.ctaid.x", "nvvm.read.ptx.sreg.laneid",
                 "nvvm.read.ptx.sreg.cluster.ctarank", "nvvm.shfl.sync",
                 "nvvm.barrier0", "nvvm.cluster.arrive", "nvvm.cluster.wait"]:
        assert ops_named(k, name), name
    k.verify()


@needs_lowering
def test_warp_idx_of_a_one_dim_block_is_tid_over_32():
    """1-D block: ``tid.x / 32`` without a shuffle, so that a role branch on
    warp 0 folds to the create's ``tid.x < 32`` (one compare in the PTX for
    both, no shift); a 2-D block keeps the shuffle from lane 0."""
    k = Kernel(block_dim=64)
    with k:
        pipe = PipelineAsync.create(num_stages=2,
                                    producer_group=CooperativeGroup(Agent.Thread, 32),
                                    consumer_group=CooperativeGroup(Agent.Thread, 32),
                                    barrier_storage=k.alloc_barriers(4))
        warp = k.warp_idx()
        assert warp.ir_value.owner.name == "arith.divsi"
        with k.if_(warp == 0):
            pipe.producer_acquire(PipelineState(2, 0, 0, 1))
    # One producer_acquire without its tail: the protocol checker is off.
    ptx = compiler.to_ptx(k.module, chip=k.chip, verify_protocol=False, use_cache=False)
    assert len(re.findall(r"setp\.\w+\.u32\s+%p\d+, %r\d+, 31;", ptx)) == 1, ptx
    assert "shr.u32" not in ptx

    two_d = Kernel(block_dim=(32, 2))
    with two_d:
        assert two_d.warp_idx().ir_value.owner.name == "nvvm.shfl.sync"


def test_smem_offsets_alignment_and_size():
    k = Kernel()
    with k:
        a = k.smem_alloc(10)
        b = k.smem_alloc(100, align=128)
        c = k.alloc_barriers(4)
        assert isinstance(b, SmemPtr)
    assert k.smem.allocations == [(None, 0, 10), (None, 128, 100),
                                  (None, 232, 32)]
    # The base is declared 1024-byte aligned, not rounded up at run time:
    # no slack to launch with.
    assert k.smem_bytes == 264
    [g] = ops_named(k, "llvm.mlir.global")
    assert ir.StringAttr(g.attributes["sym_name"]).value == "__pipeline_dynamic_smem"
    assert ir.IntegerAttr(g.attributes["alignment"]).value == 1024
    assert ir.IntegerAttr(g.attributes["addr_space"]).value == 3
    assert "external" in str(g.attributes["linkage"])
    assert not ops_named(k, "arith.andi")
    assert str(a.ir_value.type) == "!llvm.ptr<3>"
    with k:
        with pytest.raises(ValueError, match="power of two"):
            k.smem_alloc(8, align=3)
    k.verify()


def test_smem_base_declared_aligned_in_ptx():
    """TMA 128B-swizzle buffers need 1024-byte alignment: the PTX declares
    the dynamic shared array with it (as CuTe DSL does) and computes no
    realignment."""
    k = Kernel(block_dim=32)
    with k:
        buf = k.smem_alloc(2048, align=1024)
        bars = k.alloc_barriers(2)
        PipelineAsync.create(num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 1),
                             consumer_group=CooperativeGroup(Agent.Thread, 1),
                             barrier_storage=bars)
    ptx = k.to_ptx()
    assert ".extern .shared .align 1024 .b8 __pipeline_dynamic_smem[];" in ptx
    assert "and.b32" not in ptx and "and.b64" not in ptx
    assert k.smem_bytes == 2048 + 8 * 2


def test_unused_smem_allocation_emits_nothing():
    """An allocation is only materialized (base shfl.sync + offset) when its
    pointer is first used: a kernel whose allocation nothing reads has no
    shared-memory code at all; reading it brings the base back, in the
    prologue."""
    unused = Kernel(block_dim=32)
    with unused:
        unused.alloc_barriers(4)
        NamedBarrier(barrier_id=1, num_threads=32).arrive()
    assert not ops_named(unused, "nvvm.shfl.sync")
    assert not ops_named(unused, "llvm.mlir.addressof")
    assert unused.smem_bytes == 32
    ptx = unused.to_ptx()
    assert "shfl.sync" not in ptx and "bar.arrive 1, 32" in ptx

    used = Kernel(block_dim=32)
    with used:
        used.alloc_barriers(4)
        buf = used.smem_alloc(64)
        store(1, buf, 0)
    [shfl] = ops_named(used, "nvvm.shfl.sync")
    assert shfl.operation.block == used.entry
    used.verify()


def test_smem_pointers_dominate_nested_uses():
    k = Kernel()
    with k:
        with k.if_(k.warp_idx() == 0):
            buf = k.smem_alloc(64)  # allocated in a branch...
        store(1, buf, 0)            # ...usable after it
    k.verify()


def test_range_without_carry_yields_scalar():
    k = Kernel()
    with k:
        for i in k.range(2, 10, 2):
            assert isinstance(i, Scalar)
    (loop,) = ops_named(k, "scf.for")
    assert len(loop.results) == 0
    k.verify()


def test_range_carries_and_rebinds_scalars():
    k = Kernel(params={"n": Int32(), "out": GlobalPtr()})
    with k:
        total = Scalar(0)
        start = total.ir_value
        for i, (t,) in k.range(k.args.n, carry=[total]):
            assert t is total and total.ir_value != start
            total.set(total + i)
        store(total, k.args.out)
    (loop,) = ops_named(k, "scf.for")
    assert total.ir_value == loop.results[0]
    (st,) = ops_named(k, "llvm.store")
    assert st.operation.operands[0] == loop.results[0]
    k.verify()


def test_carry_rejects_other_objects():
    k = Kernel()
    with k:
        with pytest.raises(TypeError, match="carry="):
            for _ in k.range(2, carry=[3]):
                pass


def test_if_else_and_elect_one():
    k = Kernel()
    with k:
        with k.if_(k.lane_idx() < 4) as branch:
            with k.elect_one():
                k.sync_threads()
        with branch.else_():
            k.cluster_sync()
        with pytest.raises(TypeError, match="Python bool"):
            k.if_(True)
    ifs = ops_named(k, "scf.if")
    assert len(ifs) == 2
    assert len(ifs[0].regions[1].blocks) == 1  # has an else
    assert ops_named(k, "nvvm.elect.sync")
    k.verify()


def test_scalar_arithmetic_emits_arith():
    k = Kernel(params={"n": Int32()})
    with k:
        n = k.args.n
        r = ((n + 1) * 3 - 2) // 4 % 5
        c = (r >= 2) & (n != 0)
        x = c.select(n, 7)
        assert c.width == 1 and x.width == 32
        assert (n.to(64)).width == 64
    for op in ["arith.addi", "arith.muli", "arith.subi", "arith.divsi",
               "arith.remsi", "arith.cmpi", "arith.andi", "arith.select",
               "arith.extsi"]:
        assert ops_named(k, op), op


def test_load_store():
    k = Kernel(params={"p": GlobalPtr()})
    with k:
        v = load(k.args.p, i32(), 3)
        store(v + 1, k.args.p, 4)
    assert ops_named(k, "llvm.load") and ops_named(k, "llvm.store")
    k.verify()


def test_launch_bounds_reach_ptx_through_upstream_passes():
    """The gpu.func attributes become .maxntid / .reqnctapercluster (checked
    with upstream passes only, so it runs before pipeline-to-cubin exists)."""
    k = Kernel("bounds", chip="sm_90a", block_dim=192, cluster_dim=(2, 1, 1))
    with k:
        buf = k.smem_alloc(256)
        store(k.thread_idx(), buf, k.thread_idx())
    lowered = kcompile.run_passes(
        k.module, "gpu.module(convert-gpu-to-nvvm),gpu-module-to-binary{format=isa}")
    ptx = next(iter(kcompile.binaries(lowered).values())).decode()
    assert ".target sm_90a" in ptx
    assert ".maxntid 192, 1, 1" in ptx
    assert ".reqnctapercluster 2, 1, 1" in ptx
    assert ".entry bounds" in ptx


def test_block_size_is_exact_in_ptx():
    """pipeline-to-cubin turns known_block_size into .reqntid (an exact block
    size, as CuTe DSL declares it), not upstream's .maxntid: with it ptxas
    drops the reconvergence code around warp-0 and elected-lane branches."""
    k = Kernel("exact", chip="sm_90a", block_dim=64)
    with k:
        PipelineAsync.create(num_stages=2, producer_group=CooperativeGroup(Agent.Thread, 32),
                             consumer_group=CooperativeGroup(Agent.Thread, 32),
                             barrier_storage=k.alloc_barriers(4))
    ptx = k.to_ptx()
    assert ".reqntid 64, 1, 1" in ptx and ".maxntid" not in ptx


def test_compile_without_lowering_raises_clearly(monkeypatch):
    from pipeline_mlir import compiler
    monkeypatch.setattr(compiler, "PIPELINE_TO_CUBIN", "pipeline-to-cubin-missing")
    k = Kernel()
    with pytest.raises(LoweringUnavailable, match="not registered"):
        k.compile()


@needs_lowering
def test_compile_and_ptx():
    k = Kernel("trivial", chip="sm_90a")
    with k:
        k.sync_threads()
    assert ".entry trivial" in k.to_ptx()
    cubin = k.compile()
    assert cubin[:4] == b"\x7fELF"


def _pingpong_like(unroll=None, unroll_full=False, trips=8):
    """Producer warp 0, consumer warp 1, a constant-trip loop per role."""
    from pipeline_mlir.pipeline import PipelineUserType, make_pipeline_state
    k = Kernel(block_dim=64)
    with k:
        pipe = PipelineAsync.create(
            num_stages=2, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 1),
            barrier_storage=k.alloc_barriers(4), elect_one_commit=True,
            elect_one_release=True)
        warp = k.warp_idx()
        kw = {} if unroll is None and not unroll_full else {
            "unroll": unroll, "unroll_full": unroll_full}
        with k.if_(warp == 0):
            st = make_pipeline_state(PipelineUserType.Producer, 2)
            for _, _ in k.range(trips, carry=[st], **kw):
                pipe.producer_acquire(st)
                pipe.producer_commit(st)
                st.advance()
            pipe.producer_tail(st)
        with k.if_(warp == 1):
            st = make_pipeline_state(PipelineUserType.Consumer, 2)
            for _, _ in k.range(trips, carry=[st], **kw):
                pipe.consumer_wait(st)
                pipe.consumer_release(st)
                st.advance()
    return k


def test_range_carrying_states_is_not_unrolled_by_default():
    k = _pingpong_like()
    loops = ops_named(k, "scf.for")
    assert len(loops) == 2
    for loop in loops:
        assert str(loop.attributes["loop_annotation"]) == \
            "#llvm.loop_annotation<unroll = <disable = true>>"
    ptx = k.to_ptx()
    # One wait per loop body and two in the producer tail: no copies.
    assert ptx.count("mbarrier.try_wait.parity") == 4


def test_range_unroll_full_and_count():
    full = _pingpong_like(unroll_full=True)
    assert "full = true" in str(ops_named(full, "scf.for")[0].attributes["loop_annotation"])
    # 8 trips per role fully unrolled, plus the two tail waits.
    assert full.to_ptx().count("mbarrier.try_wait.parity") == 8 + 8 + 2
    two = _pingpong_like(unroll=2)
    assert "count = 2" in str(ops_named(two, "scf.for")[0].attributes["loop_annotation"])


def test_range_without_states_keeps_llvm_default_and_checks_unroll():
    k = Kernel()
    with k:
        for _ in k.range(4):
            pass
        with pytest.raises(ValueError, match="unroll must be an int >= 1"):
            for _ in k.range(4, unroll=0):
                pass
        with pytest.raises(ValueError, match="not both"):
            for _ in k.range(4, unroll=2, unroll_full=True):
                pass
    assert "loop_annotation" not in ops_named(k, "scf.for")[0].attributes
