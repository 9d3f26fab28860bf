"""What a user porting a CuTe DSL kernel gets wrong, reported at their line
in the Python API's words: the holes that used to compile silently (barrier
storage too small, shared memory over the block limit, a copy skipped under
a run-time condition, `PipelineState(stages, 0, 0, 0)` as a producer's start,
a missing producer_tail), checker warnings from compile(), CompileError text,
`+=` on a carried Scalar, range(n) on a run-time n, clusters over 16 CTAs,
and the simulator's deadlock report leading with the root cause. Each bug
has its correct twin."""

import inspect
import warnings

import pytest

from pipeline_mlir import diagnostics
from pipeline_mlir.compiler import CompileError
from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, TmaDescriptor
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync,
                                    PipelineError, PipelineState, PipelineTmaAsync,
                                    PipelineUserType, make_pipeline_state)

T1 = CooperativeGroup(Agent.Thread, 1)
T32 = CooperativeGroup(Agent.Thread, 32)
Producer, Consumer = PipelineUserType.Producer, PipelineUserType.Consumer


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path, monkeypatch):
    # Warnings come from the passes: a cached cubin would skip them.
    monkeypatch.setenv("PIPELINE_MLIR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(diagnostics.ENV_VERBOSE, raising=False)


def here():
    """The caller's line number."""
    return inspect.currentframe().f_back.f_lineno


def async_ring(k, stages=4, producer_state=None, tail=True):
    """Warp 0 produces, warp 1 consumes, 8 stages' worth."""
    p = PipelineAsync.create(num_stages=stages, producer_group=T32, consumer_group=T32,
                             barrier_storage=k.alloc_barriers(2 * stages), name="ab")
    warp = k.warp_idx()
    with k.if_(warp == 0):
        s = producer_state if producer_state is not None else \
            make_pipeline_state(Producer, stages)
        for _, (s,) in k.range(8, carry=[s]):
            p.producer_acquire(s)
            p.producer_commit(s)
            s.advance()
        if tail:
            p.producer_tail(s)
    with k.if_(warp == 1):
        c = make_pipeline_state(Consumer, stages)
        for _, (c,) in k.range(8, carry=[c]):
            p.consumer_wait(c)
            p.consumer_release(c)
            c.advance()
    return p


def compile_catching(k, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        k.compile(**kw)
    return [w for w in caught if issubclass(w.category, diagnostics.CheckerWarning)]


# -- barrier storage ------------------------------------------------------------

def test_barrier_storage_too_small_raises_at_create():
    k = Kernel("k", block_dim=64)
    with k:
        with pytest.raises(PipelineError) as err:
            PipelineAsync.create(num_stages=4, producer_group=T32, consumer_group=T32,
                                 barrier_storage=k.alloc_barriers(4))
    assert ("barrier_storage holds 32 bytes (4 mbarriers) but this pipeline needs 64 "
            "(8 mbarriers of 8 bytes: a full and an empty barrier per stage)") in str(err.value)
    assert "k.alloc_barriers(8)" in str(err.value)


def test_barrier_storage_of_the_right_size_is_taken():
    k = Kernel("k", block_dim=64)
    with k:
        async_ring(k)
    assert not compile_catching(k)


# -- shared memory over the block limit ----------------------------------------

def test_shared_memory_over_227_kib_is_refused_at_compile_naming_allocations():
    k = Kernel("k", block_dim=64)
    with k:
        k.smem_alloc(200 * 1024, name="ring")
        line = here()
        k.smem_alloc(40 * 1024, name="epilogue")
    with pytest.raises(CompileError) as err:
        k.compile()
    msg = str(err.value)
    assert msg.startswith(f"{__file__}:{line - 1}: error: the kernel's shared memory "
                          "allocations need 245760 bytes, more than the 232448 bytes (227 KiB)")
    assert f"{__file__}:{line - 1}: note: ring: 204800 bytes at offset 0" in msg
    assert f"{__file__}:{line + 1}: note: epilogue: 40960 bytes at offset 204800" in msg
    with pytest.raises(CompileError, match="sm_100a"):
        k.compile(chip="sm_100a")


def test_shared_memory_at_the_limit_compiles():
    k = Kernel("k", block_dim=64)
    with k:
        k.smem_alloc(227 * 1024, name="ring")
    k.compile()


# -- a producer_consumer state as the producer's start state ---------------------

def test_producer_consumer_state_at_phase_0_as_producer_start():
    k = Kernel("k", block_dim=64)
    with k:
        line = here() + 1
        start = PipelineState(4, 0, 0, 0)
        async_ring(k, producer_state=start)
    with pytest.raises(CompileError) as err:
        k.compile()
    first, *notes = str(err.value).splitlines()
    assert first.startswith(f"{__file__}:{line}:")
    assert ("error: producer_consumer state starts at phase 0 and the first producer_acquire "
            "on this pipeline reads it") in first
    assert "make_pipeline_state(PipelineUserType.Producer, 4)" in first
    assert any(n.strip().startswith(f"{__file__}:{line}:") and "phase given here" in n
               for n in notes)


def test_producer_consumer_state_at_phase_1_as_producer_start():
    k = Kernel("k", block_dim=64)
    with k:
        async_ring(k, producer_state=PipelineState(4, 0, 0, 1))
    k.compile()


# -- checker warnings from compile(), in the API's words --------------------------

def test_missing_producer_tail_warns_from_compile():
    k = Kernel("k", block_dim=64)
    with k:
        async_ring(k, tail=False)
    (w,) = compile_catching(k)
    assert w.filename == __file__
    text = str(w.message)
    assert "producer role exits without producer_tail(state)" in text
    assert "pipeline.producer.tail" not in text and "unknown" not in text


def test_a_cached_compile_warns_again():
    k = Kernel("k", block_dim=64)
    with k:
        async_ring(k, tail=False)
    assert len(compile_catching(k)) == 1
    (again,) = compile_catching(k)  # the cubin comes from the cache
    assert "producer_tail(state)" in str(again.message) and again.filename == __file__


def test_producer_tail_present_gives_no_warning():
    k = Kernel("k", block_dim=64)
    with k:
        async_ring(k)
    assert compile_catching(k) == []


def tma_ring(k, guarded):
    """One TMA stage per iteration; with ``guarded`` the copy runs only while
    ``i < n`` (CUTLASS #2641) but acquire arms its bytes every time."""
    p = PipelineTmaAsync.create(num_stages=2, producer_group=T1, consumer_group=T1,
                                barrier_storage=k.alloc_barriers(4), name="ab")
    buf = k.smem_alloc(2 * 4096, align=1024)
    warp = k.warp_idx()
    with k.if_(warp == 0):
        s = make_pipeline_state(Producer, 2)
        for i, (s,) in k.range(8, carry=[s]):
            with k.elect_one():
                p.producer_acquire(s)
                if guarded:
                    with k.if_(i < k.args.n):
                        p.tma_load(s, k.args.a, [0, i], buf.stage(s.index, 4096), 4096)
                else:
                    p.tma_load(s, k.args.a, [0, i], buf.stage(s.index, 4096), 4096)
            s.advance()
        p.producer_tail(s)
    with k.if_(warp == 1):
        c = make_pipeline_state(Consumer, 2)
        for _, (c,) in k.range(8, carry=[c]):
            p.consumer_wait(c)
            with k.elect_one():
                p.consumer_release(c)
            c.advance()


@pytest.mark.parametrize("guarded", [True, False])
def test_copy_skipped_under_a_runtime_condition_warns(guarded):
    k = Kernel("k", block_dim=64, params={"a": TmaDescriptor(), "n": Int32()})
    with k:
        tma_ring(k, guarded)
    found = compile_catching(k)
    if not guarded:
        assert found == []
        return
    (w,) = found
    assert w.filename == __file__
    text = str(w.message)
    assert ("this copy runs only when a run-time condition holds, but producer_acquire "
            "arms the full barrier for its bytes on every path") in text
    assert "note: condition that may skip the copy" in text


# -- CompileError text ------------------------------------------------------------

def cluster_without_tail():
    k = Kernel("k", block_dim=64, cluster_dim=2, params={"a": TmaDescriptor()})
    with k:
        p = PipelineTmaAsync.create(num_stages=2, producer_group=T1,
                                    consumer_group=CooperativeGroup(Agent.Thread, 2),
                                    barrier_storage=k.alloc_barriers(4),
                                    cta_layout_vmnk=(1, 2, 1, 1), tx_count=4096)
        buf = k.smem_alloc(2 * 4096, align=1024)
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(Producer, 2)
            for i, (s,) in k.range(8, carry=[s]):
                with k.elect_one():
                    p.producer_acquire(s)
                    p.tma_load(s, k.args.a, [0, i], buf.stage(s.index, 4096), 4096)
                s.advance()
    return k


def test_compile_error_leads_with_the_users_line_without_ir_dumps():
    k = cluster_without_tail()
    with pytest.raises(CompileError) as err:
        k.compile()
    msg = str(err.value)
    assert msg.startswith(f"{__file__}:")
    assert "error: PipelineTmaAsync pipeline: producer role exits without producer_tail(state)" \
        in msg.splitlines()[0]
    assert "see current operation" not in msg and "scf.for" not in msg
    assert "pipeline-to-cubin" not in msg.splitlines()[0]


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_verbose_compile_error_keeps_the_ir_dump(how, monkeypatch):
    k = cluster_without_tail()
    if how == "environment":
        monkeypatch.setenv(diagnostics.ENV_VERBOSE, "1")
    with pytest.raises(CompileError) as err:
        k.compile(verbose=True) if how == "argument" else k.compile()
    msg = str(err.value)
    assert "see current operation" in msg and "(pass pipeline: pipeline-to-cubin" in msg


def test_python_terms_rewrite_ir_spellings():
    text = diagnostics.python_terms(
        "use #pipeline.group<thread, 4>; add pipeline.producer.tail after the loop; yield "
        "`pipeline.state.advance` of the state once per stage used; add "
        "nvvm.wgmma.wait.group.sync.aligned N with N <= 0 before this op")
    assert text == ("use CooperativeGroup(Agent.Thread, 4); add producer_tail(state) after "
                    "the loop; call state.advance() once per stage used in the loop body; "
                    "add wgmma.wait_group(0) before this op")


# -- kernel-layer misuse ----------------------------------------------------------

def test_plus_equals_on_a_carried_scalar_accumulates():
    k = Kernel("k", block_dim=32, params={"n": Int32(), "out": GlobalPtr()})
    with k:
        total = k.thread_idx() * 0
        for i, (total,) in k.range(k.args.n, carry=[total]):
            total += i
        after = total + 1  # used after the loop: the loop's result
    k.verify()
    text = str(k.module)
    assert "arith.addi %arg" in text and "scf.yield" in text
    assert after.ir_value.owner.operands[0].owner.name == "scf.for"


def test_plus_equals_on_an_uncarried_scalar_names_the_carry_fix():
    from pipeline_mlir.kernel.scope import ScopeError
    k = Kernel("k", block_dim=32, params={"n": Int32()})
    with k:
        total = k.thread_idx() * 0
        with pytest.raises(ScopeError, match=r"carry=\[total\]"):
            for i, _ in k.range(k.args.n):
                total += i


def test_python_range_on_a_runtime_bound_suggests_k_range():
    k = Kernel("k", block_dim=32, params={"n": Int32()})
    with k:
        with pytest.raises(TypeError, match=r"use `for i in k.range\(n\):`"):
            for _ in range(k.args.n):
                pass
        for _ in range(4):  # a Python int bound unrolls at trace time
            pass


def test_cluster_over_16_ctas_names_the_call():
    with pytest.raises(ValueError, match=r"Kernel: cluster_dim \(4, 8, 1\) has 32 CTAs; "
                       "a cluster holds at most 16"):
        Kernel("k", block_dim=32, cluster_dim=(4, 8, 1))
    k = Kernel("k", block_dim=32, cluster_dim=(4, 4, 1))
    with k:
        with pytest.raises(PipelineError, match=r"PipelineTmaAsync.create: cta_layout_vmnk "
                           r"\(1, 4, 8, 1\): .*at most 16 CTAs"):
            PipelineTmaAsync.create(num_stages=2, producer_group=T1, consumer_group=T1,
                                    tx_count=64, cta_layout_vmnk=(1, 4, 8, 1))
        PipelineTmaAsync.create(num_stages=2, producer_group=T1, consumer_group=T1,
                                tx_count=64, cta_layout_vmnk=(1, 4, 4, 1))


# -- the simulator's deadlock report ------------------------------------------------

def test_deadlock_report_leads_with_the_tx_bytes_root_cause():
    from pipeline_mlir.sim import model
    bar = model.Mbarrier(1, "pipeline 'ab' full barrier stage 0")
    bar.arrive(1, "producer", expect_tx=32768)
    bar.complete_tx(16384, "copy")
    assert bar.root_cause() == (
        "16384 tx bytes outstanding on pipeline 'ab' full barrier stage 0 (armed 32768, "
        "delivered 16384): the copies deliver fewer bytes than expect_tx armed, so phase 0 "
        "never completes")
    bar.complete_tx(16384, "copy")
    assert bar.root_cause() is None  # the phase completed


def test_deadlock_with_missing_arrivals_names_no_byte_cause():
    from pipeline_mlir.sim import model
    bar = model.Mbarrier(2, "pipeline 'ab' empty barrier stage 0")
    bar.arrive(1, "consumer")
    assert bar.root_cause() is None


# -- locations of the ops that notes point at ----------------------------------------

def _locations(k, name):
    from _ir_utils import ops_named
    return [str(op.location) for op in ops_named(k, name)]


def test_wgmma_tcgen05_and_loop_yield_ops_carry_the_users_line():
    from pipeline_mlir.kernel import tmem, wgmma
    k = Kernel("k", chip="sm_100a", block_dim=128, params={"n": Int32()})
    with k:
        holder = k.smem_alloc(4, align=4)
        line = here()
        wgmma.fence(); wgmma.commit_group(); wgmma.wait_group(0)  # noqa: E702
        tmem.alloc(holder, 32)
        s = make_pipeline_state(Producer, 2)
        for _, (s,) in k.range(k.args.n, carry=[s]):  # noqa: B007
            s.advance()
    for name in ("nvvm.wgmma.fence.aligned", "nvvm.wgmma.commit.group.sync.aligned",
                 "nvvm.wgmma.wait.group.sync.aligned"):
        (loc,) = _locations(k, name)
        assert f"test_ux_checks.py\":{line + 1}:" in loc, (name, loc)
    (loc,) = _locations(k, "nvvm.tcgen05.alloc")
    assert f"test_ux_checks.py\":{line + 2}:" in loc
    yields = [loc for loc in _locations(k, "scf.yield") if "test_ux_checks.py" in loc]
    assert any(f"\":{line + 4}:" in loc for loc in yields), _locations(k, "scf.yield")
