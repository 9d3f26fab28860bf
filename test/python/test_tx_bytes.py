"""tx_count derived from the copies when a TMA pipeline's create leaves it
out (the pipeline-derive-tx-count pass, which counts with the checker's
code), and the checker agreeing with the result."""

import pytest

import mlir.ir as ir
from mlir.dialects import arith

from pipeline_mlir import compiler
from pipeline_mlir.kernel import Int32, Kernel, TmaDescriptor
from pipeline_mlir.kernel.compile import run_passes
from pipeline_mlir.pipeline import (Agent, CooperativeGroup,
                                    PipelineTmaAsync, PipelineTmaUmma,
                                    PipelineUserType, make_pipeline_state)

from _ir_utils import ops_named

T1 = CooperativeGroup(Agent.Thread, 1)
Producer = PipelineUserType.Producer


def kernel(chip="sm_90a", **kw):
    return Kernel("k", chip=chip, block_dim=160,
                  params={"a": TmaDescriptor(), "b": TmaDescriptor()}, **kw)


def produce(k, p, loads, stages=2, trips=4, extra=None):
    """A producer loop over ``trips`` stages issuing ``loads`` =
    [(descriptor, bytes, mask)] per stage, and its tail."""
    buf = k.smem_alloc(stages * 65536, align=1024)
    s = make_pipeline_state(Producer, stages)
    for _, _ in k.range(trips, carry=[s]):
        p.producer_acquire(s, extra_tx_count=extra)
        with k.elect_one():
            for desc, nbytes, mask in loads:
                p.tma_load(s, desc, [0, 0], buf.stage(s.index, 65536), nbytes,
                           mcast_mask=mask)
        p.producer_commit(s)
        s.advance()
    p.producer_tail(s)


DERIVE = "pipeline-derive-tx-count"


def created(module):
    (create,) = ops_named(module, "pipeline.create")
    return create


def derived(k):
    """The module after pipeline-derive-tx-count (what compile() lowers)."""
    return run_passes(k.module, DERIVE)


def check_protocol(k):
    """Derive, then run the C++ checker; raises with its diagnostics on a
    finding."""
    run_passes(k.module, f"{DERIVE},pipeline-verify-protocol")


def test_derived_from_the_copies_of_one_stage():
    k = kernel()
    with k:
        p = PipelineTmaAsync.create(num_stages=2, producer_group=T1,
                                    consumer_group=CooperativeGroup(Agent.Thread, 4),
                                    barrier_storage=k.alloc_barriers(4))
        produce(k, p, [(k.args.a, 8192, None), (k.args.b, 4096, None)])
    # The builder leaves tx_count 0 ("derive"); the pass sets it, and every
    # verb sees the same type.
    assert p.type.tx_count == 0
    module = derived(k)
    assert created(module).result.type.tx_count == 12288
    (acq,) = ops_named(module, "pipeline.producer.acquire")
    assert "tx_count = 12288" in str(acq.operation.operands[0].type)
    k.verify()
    check_protocol(k)


def test_explicit_tx_count_is_kept_and_checked():
    k = kernel()
    with k:
        p = PipelineTmaAsync.create(num_stages=2, producer_group=T1,
                                    consumer_group=CooperativeGroup(Agent.Thread, 4),
                                    tx_count=8192, barrier_storage=k.alloc_barriers(4))
        produce(k, p, [(k.args.a, 8192, None), (k.args.b, 4096, None)])
    assert p.type.tx_count == 8192
    # The checker names both numbers and the copies.
    with pytest.raises(ir.MLIRError) as err:
        check_protocol(k)
    text = str(err.value)
    assert "expects 8192 bytes (tx_count 8192)" in text
    assert "deliver 12288" in text
    assert "copy of 8192 bytes" in text and "copy of 4096 bytes" in text


def test_multicast_counts_every_sender_of_the_mask():
    k = kernel(cluster_dim=(2, 1, 1))
    layout = (1, 2, 1, 1)
    with k:
        p = PipelineTmaAsync.create(num_stages=2, producer_group=T1,
                                    consumer_group=CooperativeGroup(Agent.Thread, 8),
                                    barrier_storage=k.alloc_barriers(4),
                                    cta_layout_vmnk=layout)
        mask = arith.constant(ir.IntegerType.get_signless(16), 3)
        produce(k, p, [(k.args.a, 8192, None), (k.args.b, 2048, mask)])
    # A: 8192 from this CTA; B: a 2048-byte slice from each of the 2 CTAs.
    assert created(derived(k)).result.type.tx_count == 8192 + 2 * 2048
    check_protocol(k)


def test_two_cta_pair_counts_the_peer():
    k = kernel("sm_100a", cluster_dim=(2, 1, 1))
    with k:
        p = PipelineTmaUmma.create(num_stages=2, producer_group=T1,
                                   consumer_group=T1,
                                   barrier_storage=k.alloc_barriers(4),
                                   cta_layout_vmnk=(2, 1, 1, 1))
        produce(k, p, [(k.args.a, 4096, None), (k.args.b, 4096, None)])
    assert p.type.cta_group == 2
    assert created(derived(k)).result.type.tx_count == 2 * 8192
    check_protocol(k)


def test_extra_tx_count_is_not_part_of_tx_count():
    k = kernel()
    with k:
        p = PipelineTmaAsync.create(num_stages=2, producer_group=T1,
                                    consumer_group=CooperativeGroup(Agent.Thread, 4),
                                    barrier_storage=k.alloc_barriers(4))
        produce(k, p, [(k.args.a, 8192, None), (k.args.b, 1024, None)], extra=1024)
    assert created(derived(k)).result.type.tx_count == 8192
    check_protocol(k)


def test_productions_that_differ_raise_at_the_second_acquire():
    k = kernel()
    with k:
        p = PipelineTmaAsync.create(num_stages=2, producer_group=T1,
                                    consumer_group=CooperativeGroup(Agent.Thread, 4),
                                    barrier_storage=k.alloc_barriers(4))
        buf = k.smem_alloc(2 * 16384, align=1024)
        s = make_pipeline_state(Producer, 2)
        # A peeled first stage loads A and B ...
        p.producer_acquire(s)
        with k.elect_one():
            p.tma_load(s, k.args.a, [0, 0], buf.stage(s.index, 16384), 8192)
            p.tma_load(s, k.args.b, [0, 0], buf.stage(s.index, 16384), 8192)
        p.producer_commit(s)
        s.advance()
        # ... the next one forgets B.
        p.producer_acquire(s)  # line of the error
        line = __import__("inspect").currentframe().f_lineno - 1
        with k.elect_one():
            p.tma_load(s, k.args.a, [0, 0], buf.stage(s.index, 16384), 8192)
        p.producer_commit(s)
        p.producer_tail(s)
    with pytest.raises(compiler.CompileError) as err:
        compiler.to_nvvm(k.module)
    msg = str(err.value)
    assert msg.startswith(f"{__file__}:{line}:")
    assert ("this production's copies deliver 8192 bytes per stage but the first "
            "production delivered 16384") in msg
    assert "note: copy of 8192 bytes" in msg


def test_a_copy_by_every_lane_of_the_producer_warp_is_refused():
    """A tma_load the producer warp runs without elect_one issues 32 copies
    (one per lane): the derived tx_count would be 32 x the box, so the
    derivation refuses it at the copy; with an explicit tx_count of one
    box the checker reports the 32 copies against it."""
    for explicit in (None, 8192):
        k = kernel()
        with k:
            kw = {} if explicit is None else {"tx_count": explicit}
            p = PipelineTmaAsync.create(num_stages=2, producer_group=T1,
                                        consumer_group=CooperativeGroup(Agent.Thread, 4),
                                        barrier_storage=k.alloc_barriers(4), **kw)
            buf = k.smem_alloc(2 * 8192, align=1024)
            with k.if_(k.warp_idx() == 4):
                s = make_pipeline_state(Producer, 2)
                for _, (s,) in k.range(4, carry=[s]):
                    p.producer_acquire(s)
                    line = __import__("inspect").currentframe().f_lineno + 1
                    p.tma_load(s, k.args.a, [0, 0], buf.stage(s.index, 8192), 8192)
                    p.producer_commit(s)
                    s.advance()
                p.producer_tail(s)
        with pytest.raises(compiler.CompileError) as err:
            compiler.to_nvvm(k.module)
        msg = str(err.value)
        if explicit is None:
            assert msg.startswith(f"{__file__}:{line}:"), msg
            assert ("tx_count is not derived from this copy: every lane of warp 4 issues "
                    "it (32 copies of 8192 bytes into the same stage)") in msg
        else:
            assert "but the 1 copy bound to this stage deliver 262144" in msg
            assert "copy of 8192 bytes x 32 lanes that issue it (warp 4" in msg


def test_no_copy_is_refused_before_compiling():
    k = kernel()
    with k:
        p = PipelineTmaAsync.create(num_stages=2, producer_group=T1,
                                    consumer_group=CooperativeGroup(Agent.Thread, 4),
                                    barrier_storage=k.alloc_barriers(4), name="ab")
        s = make_pipeline_state(Producer, 2)
        p.producer_acquire(s)
        p.producer_commit(s)
    with pytest.raises(compiler.CompileError,
                       match="pipeline 'ab' was created without tx_count"):
        compiler.to_nvvm(k.module)


def test_runtime_mask_cannot_be_derived():
    k = kernel(cluster_dim=(2, 1, 1))
    with k:
        p = PipelineTmaAsync.create(num_stages=2, producer_group=T1,
                                    consumer_group=CooperativeGroup(Agent.Thread, 8),
                                    barrier_storage=k.alloc_barriers(4),
                                    cta_layout_vmnk=(1, 2, 1, 1))
        s = make_pipeline_state(Producer, 2)
        p.producer_acquire(s)
        mask = (k.cluster_cta_rank() + 1).to(16)
        p.tma_load(s, k.args.a, [0, 0], k.smem_alloc(1024), 1024, mcast_mask=mask)
        p.producer_tail(s)
    with pytest.raises(compiler.CompileError, match="multicast mask or trip count is only "
                       "known at run time"):
        compiler.to_nvvm(k.module)


def handle_kernel(own_bytes=False):
    """A TMA ring whose producer takes the stage's barrier handle
    (producer_get_barrier) next to its tma_load, as CuTe DSL code passes it
    to cute.copy; with ``own_bytes`` it also arms bytes of its own on the
    handle. Returns (kernel, line of the handle's raw use)."""
    import inspect
    import warnings

    from mlir.dialects import nvvm

    k = Kernel("k", block_dim=64, params={"a": TmaDescriptor(), "n": Int32()})
    line = None
    with k:
        p = PipelineTmaAsync.create(num_stages=2, producer_group=T1,
                                    consumer_group=T1,
                                    barrier_storage=k.alloc_barriers(4), name="ab")
        buf = k.smem_alloc(2 * 8192, align=1024)
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(Producer, 2)
            for _, (s,) in k.range(k.args.n, carry=[s]):
                p.producer_acquire(s)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the handle goes unchecked
                    bar = p.producer_get_barrier(s)
                with k.elect_one():
                    p.tma_load(s, k.args.a, [0, 0], buf.stage(s.index, 8192), 8192)
                    if own_bytes:
                        # A raw op built from Python has no location of its
                        # own: give it this line.
                        line = inspect.currentframe().f_lineno
                        nvvm.mbarrier_expect_tx(bar.ir_value, arith.constant(
                            ir.IntegerType.get_signless(32), 1024),
                            loc=ir.Location.file(__file__, line, 1))
                s.advance()
            p.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            c = make_pipeline_state(PipelineUserType.Consumer, 2)
            for _, (c,) in k.range(k.args.n, carry=[c]):
                p.consumer_wait(c)
                p.consumer_release(c)
                c.advance()
    return k, line


def test_a_barrier_handle_next_to_the_tma_load_still_derives():
    # producer_get_barrier on a state that also has a tma_load made the
    # derivation answer "no tma_load is bound".
    k, _ = handle_kernel()
    assert created(derived(k)).result.type.tx_count == 8192
    check_protocol(k)
    compiler.to_nvvm(k.module)
    assert k.simulate({"n": 5}, schedules=10).ok


def test_bytes_of_ones_own_on_the_barrier_handle_are_refused_at_their_line():
    # The twin: bytes armed by hand on the handle are invisible to the
    # derivation; it refuses them where they are, naming the fix.
    k, line = handle_kernel(own_bytes=True)
    with pytest.raises(compiler.CompileError) as info:
        compiler.to_nvvm(k.module)
    msg = str(info.value)
    assert msg.startswith(f"{__file__}:{line}:1: error: pipeline 'ab': "
                          "nvvm.mbarrier.expect_tx receives the stage's full barrier from "
                          "producer_get_barrier(state)"), msg
    assert "or give tx_count to create" in msg


def test_clc_pipeline_still_needs_tx_count():
    from pipeline_mlir.pipeline import PipelineClcFetchAsync
    k = kernel("sm_100a")
    with k:
        with pytest.raises(TypeError):
            PipelineClcFetchAsync.create(barrier_storage=k.alloc_barriers(2),
                                         num_stages=1, producer_group=T1,
                                         consumer_group=T1)


# -- the derivation against the numbers written by hand ------------------------

def _build_both_ways(build, monkeypatch):
    """tx_count of every TMA pipeline of ``build()``: as written, and derived
    when create is called without it (same kernel otherwise)."""
    import pipeline_mlir.pipeline.base as base

    def tx_counts():
        module = derived(build())
        return [op.result.type.tx_count for op in ops_named(module, "pipeline.create")
                if "tx_count" in str(op.result.type)
                and "clc_fetch_async" not in str(op.result.type)]

    written = tx_counts()
    original = base.PipelineBase._build.__func__

    def without_tx_count(cls, **kw):
        if base._derives_tx_count(cls.kind):
            kw["tx_count"] = None
        return original(cls, **kw)

    monkeypatch.setattr(base.PipelineBase, "_build", classmethod(without_tx_count))
    return written, tx_counts()


def _examples():
    import os
    import sys
    here = os.path.dirname(__file__)
    sys.path.insert(0, os.path.abspath(os.path.join(here, "..", "..", "examples")))
    from dataclasses import replace

    import blackwell_gemm
    import hopper_gemm
    import tma_reduction
    import tma_umma_mainloop
    from skeletons import cute_blackwell_gemm, cute_hopper_gemm, fa3_hopper_fwd
    return {
        "hopper_gemm": lambda: hopper_gemm.build(),
        "hopper_gemm_cluster2": lambda: hopper_gemm.build(
            replace(hopper_gemm.GemmConfig(), cluster_m=2)),
        "blackwell_gemm": lambda: blackwell_gemm.build(),
        "blackwell_gemm_pair": lambda: blackwell_gemm.build(
            replace(blackwell_gemm.GemmConfig(), cta_group=2)),
        "tma_reduction_cluster": lambda: tma_reduction.build(cluster=2),
        "tma_umma_mainloop": lambda: tma_umma_mainloop.build(),
        "cute_hopper_gemm": lambda: cute_hopper_gemm.build(),
        "cute_blackwell_gemm_pair": lambda: cute_blackwell_gemm.build(cta_pair=True),
        "fa3_hopper_fwd": lambda: fa3_hopper_fwd.build(),
    }


@pytest.mark.parametrize("case", sorted(_examples()))
def test_derived_equals_the_examples_hand_written_tx_count(case, monkeypatch):
    written, derived = _build_both_ways(_examples()[case], monkeypatch)
    assert written and derived == written
