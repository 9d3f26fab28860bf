"""pipeline_mlir.pipeline: every builder emits the expected pipeline ops."""

import pytest

import mlir.ir as ir

from pipeline_mlir.dialects import pipeline as pl
from pipeline_mlir.kernel import Kernel, Scalar, SmemPtr, TmaDescriptor
from pipeline_mlir.pipeline import (
    Agent, CooperativeGroup, MbarrierArray, NamedBarrier, PipelineAsync,
    PipelineAsyncUmma, PipelineClcFetchAsync, PipelineConsumer, PipelineCpAsync,
    PipelineOp, PipelineOrder, PipelineProducer, PipelineState,
    PipelineStateSimple, PipelineTmaAsync, PipelineTmaMultiConsumersAsync,
    PipelineTmaStore, PipelineTmaUmma, PipelineUmmaAsync, PipelineUserType,
    TmaStoreFence, UncheckedBarrierWarning, agent_sync, make_pipeline_state,
    pipeline_init_arrive, pipeline_init_wait, sm90, sm100)

from _ir_utils import attr_names, names, ops_named

T1 = CooperativeGroup(Agent.Thread, 1)
T128 = CooperativeGroup(Agent.Thread, 128)
Producer, Consumer = PipelineUserType.Producer, PipelineUserType.Consumer


def kernel(chip="sm_90a", **kw):
    return Kernel("k", chip=chip, block_dim=256,
                  params={"desc": TmaDescriptor()}, **kw)


def test_cutlass_names_exported():
    import pipeline_mlir.pipeline as P
    for name in ["Agent", "CooperativeGroup", "PipelineOp", "PipelineUserType",
                 "PipelineState", "make_pipeline_state", "SyncObject",
                 "MbarrierArray", "NamedBarrier", "TmaStoreFence",
                 "PipelineOrder", "PipelineAsync", "PipelineCpAsync",
                 "PipelineTmaAsync", "PipelineTmaStore", "PipelineTmaUmma",
                 "PipelineAsyncUmma", "PipelineUmmaAsync",
                 "PipelineTmaMultiConsumersAsync", "PipelineClcFetchAsync",
                 "PipelineProducer", "PipelineConsumer",
                 "pipeline_init_arrive", "pipeline_init_wait", "agent_sync",
                 "PipelineStateSimple"]:
        assert hasattr(P, name), name
    assert sm90.PipelineTmaAsync is P.PipelineTmaAsync
    assert sm100.PipelineTmaUmma is P.PipelineTmaUmma


def test_cooperative_group_attr():
    k = kernel()
    with k:
        a = CooperativeGroup(Agent.Warp, 4).attr()
    assert a.agent == pl.Agent.Warp and a.size == 4
    assert CooperativeGroup(Agent.Warp, 4).thread_count() == 128
    assert CooperativeGroup(Agent.ThreadBlock).thread_count() is None


def test_create_async_type_and_storage():
    k = kernel()
    with k:
        bars = k.alloc_barriers(8)
        p = PipelineAsync.create(num_stages=4, producer_group=T128,
                                 consumer_group=CooperativeGroup(Agent.Warp, 2),
                                 barrier_storage=bars, defer_sync=True,
                                 name="ring")
    (create,) = ops_named(k, "pipeline.create")
    t = create.result.type
    assert t.kind == pl.PipelineKind.Async and t.stages == 4
    assert t.producer.agent == pl.Agent.Thread and t.producer.size == 128
    assert t.consumer.agent == pl.Agent.Warp and t.consumer.size == 2
    assert {"defer_sync", "name"} <= attr_names(create)
    assert ir.StringAttr(create.attributes["name"]).value == "ring"
    assert create.operation.operands[0] == bars.ir_value
    assert p.num_stages == 4
    k.verify()


def test_state_ops_and_advance_rebinds():
    k = kernel()
    with k:
        s = make_pipeline_state(Producer, 3)
        first = s.ir_value
        s.advance()
        assert s.ir_value != first
        s.advance(2)
        idx, ph = s.index, s.phase
        assert isinstance(idx, Scalar) and isinstance(ph, Scalar)
        cnt = s.count
        c = s.clone()
        assert c.ir_value == s.ir_value and c is not s
        ps = PipelineState(3, 5, 1, 0)
    make = ops_named(k, "pipeline.state.make")
    assert str(make[0].result.type) == "!pipeline.state<3, producer>"
    assert str(make[1].result.type) == "!pipeline.state<3, producer_consumer>"
    assert len(make[1].operation.operands) == 3
    adv = ops_named(k, "pipeline.state.advance")
    assert len(adv) == 2 and len(adv[0].operation.operands) == 1
    assert len(adv[1].operation.operands) == 2  # by %n
    assert names(k).count("pipeline.state.index") == 1
    assert names(k).count("pipeline.state.phase") == 1
    assert names(k).count("pipeline.state.count") == 1
    k.verify()


def test_consumer_state_and_simple_state():
    k = kernel()
    with k:
        s = make_pipeline_state(Consumer, 2)
        simple = make_pipeline_state(Producer, 2, simple=True)
        assert isinstance(simple, PipelineStateSimple)
        s2 = PipelineStateSimple(2, 5)
        simple.advance()
    types = [str(o.result.type) for o in ops_named(k, "pipeline.state.make")]
    assert types == ["!pipeline.state<2, consumer>",
                     "!pipeline.state<2, producer, simple>",
                     "!pipeline.state<2, producer_consumer, simple>"]
    k.verify()


def test_state_reverse_and_reset_count():
    k = kernel()
    with k:
        s = make_pipeline_state(Consumer, 4)
        s.reverse()
        s.reset_count()
    makes = ops_named(k, "pipeline.state.make")
    assert len(makes) == 3 and len(makes[-1].operation.operands) == 3
    assert ops_named(k, "arith.select")
    k.verify()


def test_tma_umma_verbs():
    k = kernel("sm_100a")
    with k:
        bars = k.alloc_barriers(6)
        buf = k.smem_alloc(3 * 1024, align=1024)
        p = PipelineTmaUmma.create(num_stages=3, producer_group=T1,
                                   consumer_group=T1, tx_count=1024,
                                   barrier_storage=bars)
        ps = make_pipeline_state(Producer, 3)
        cs = make_pipeline_state(Consumer, 3)
        tok = p.producer_try_acquire(ps)
        p.producer_acquire(ps, try_acquire_token=tok, extra_tx_count=128)
        p.tma_load(ps, k.args.desc, [0, 64], buf.stage(ps.index, 1024), 1024)
        with pytest.warns(UncheckedBarrierWarning):
            bar = p.producer_get_barrier(ps)
        assert isinstance(bar, SmemPtr)
        p.producer_commit(ps)
        t2 = p.consumer_try_wait(cs)
        p.consumer_wait(cs, try_wait_token=t2)
        p.consumer_release(cs)
        p.producer_tail(ps)
    got = names(k)
    for op in ["pipeline.create", "pipeline.producer.try_acquire",
               "pipeline.producer.acquire", "pipeline.copy.tma_load",
               "pipeline.producer.barrier", "pipeline.producer.commit",
               "pipeline.consumer.try_wait", "pipeline.consumer.wait",
               "pipeline.consumer.release", "pipeline.producer.tail"]:
        assert op in got, op
    (acq,) = ops_named(k, "pipeline.producer.acquire")
    assert len(acq.operation.operands) == 4  # pipeline, state, token, extra_tx
    (load,) = ops_named(k, "pipeline.copy.tma_load")
    assert ir.IntegerAttr(load.attributes["bytes"]).value == 1024
    assert ops_named(k, "pipeline.create")[0].result.type.tx_count == 1024
    k.verify()


def test_tma_umma_2cta_cluster_type():
    k = kernel("sm_100a", cluster_dim=(4, 1, 1))
    with k:
        p = PipelineTmaUmma.create(num_stages=2, producer_group=T1,
                                   consumer_group=T1, tx_count=4096,
                                   cta_layout_vmnk=(2, 2, 1, 1),
                                   defer_sync=True)
        pipeline_init_arrive(cta_layout_vmnk=(2, 2, 1, 1), is_relaxed=True)
        pipeline_init_wait(cta_layout_vmnk=(2, 2, 1, 1))
    t = p.type
    assert t.cta_group == 2 and t.cluster.v == 2 and t.cluster.m == 2
    assert t.multicast == pl.Multicast.M
    (arr,) = ops_named(k, "pipeline.init_arrive")
    assert ir.IntegerAttr(arr.attributes["cluster_size"]).value == 4
    assert "relaxed" in attr_names(arr)
    (wait,) = ops_named(k, "pipeline.init_wait")
    assert ir.IntegerAttr(wait.attributes["cluster_size"]).value == 4
    k.verify()


@pytest.mark.parametrize("mode,expected", [((1, 1), pl.Multicast.MN),
                                           ((1, 0), pl.Multicast.M),
                                           ((0, 1), pl.Multicast.N),
                                           ((0, 0), pl.Multicast.None_)])
def test_tma_async_multicast_modes(mode, expected):
    k = kernel(cluster_dim=(4, 1, 1))
    with k:
        p = PipelineTmaAsync.create(num_stages=2, producer_group=T1,
                                    consumer_group=CooperativeGroup(Agent.Thread, 16),
                                    tx_count=512, cta_layout_vmnk=(1, 2, 2, 1),
                                    mcast_mode_mn=mode)
    assert p.type.multicast == expected


def test_tma_load_multicast_mask_operand():
    k = kernel(cluster_dim=(2, 1, 1))
    with k:
        buf = k.smem_alloc(1024)
        p = PipelineTmaAsync.create(num_stages=2, producer_group=T1,
                                    consumer_group=CooperativeGroup(Agent.Thread, 8),
                                    tx_count=1024, cta_layout_vmnk=(1, 2, 1, 1))
        s = make_pipeline_state(Producer, 2)
        from mlir.dialects import arith
        mask = arith.constant(ir.IntegerType.get_signless(16), 3)
        p.tma_load(s, k.args.desc, [0], buf, 512, mcast_mask=mask)
    (load,) = ops_named(k, "pipeline.copy.tma_load")
    assert load.operation.operands[-1] == mask
    k.verify()


def test_flash_attention_options():
    k = kernel()
    with k:
        p = PipelineAsync.create(num_stages=2,
                                 producer_group=CooperativeGroup(Agent.Thread, 4),
                                 consumer_group=CooperativeGroup(Agent.Thread, 4),
                                 elect_one_commit=True, elect_one_release=True,
                                 syncwarp_before_release=False)
        p.producer_acquire_w_index_phase(1, 0)
        p.producer_commit_w_index(1)
        p.consumer_wait_w_index_phase(1, 1)
        p.consumer_release_w_index(1)
    (commit,) = ops_named(k, "pipeline.producer.commit")
    assert {"elect_one", "syncwarp_before"} <= attr_names(commit)
    (rel,) = ops_named(k, "pipeline.consumer.release")
    assert "elect_one" in attr_names(rel)
    assert "syncwarp_before" not in attr_names(rel)
    # One state per (index, phase): the acquire's (1, 0) serves the commit
    # too; the wait's (1, 1) and the release's (1, 0) are two.
    makes = ops_named(k, "pipeline.state.make")
    assert [str(m.result.type) for m in makes] == [
        "!pipeline.state<2, producer>", "!pipeline.state<2, consumer>",
        "!pipeline.state<2, consumer>"]
    (acquire,) = ops_named(k, "pipeline.producer.acquire")
    assert commit.operation.operands[1] == acquire.operation.operands[1] == makes[0].result
    k.verify()


def test_cp_async_and_async_umma_and_umma_async():
    k = kernel("sm_100a")
    with k:
        a = PipelineCpAsync.create(num_stages=2, producer_group=T128,
                                   consumer_group=T128)
        b = PipelineAsyncUmma.create(num_stages=2, producer_group=T128,
                                     consumer_group=T1)
        c = PipelineUmmaAsync.create(num_stages=1, producer_group=T1,
                                     consumer_group=T128)
        for p in (a, b, c):
            s = make_pipeline_state(Producer, p.num_stages)
            p.producer_acquire(s)
            p.producer_commit(s)
    kinds = [o.result.type.kind for o in ops_named(k, "pipeline.create")]
    assert kinds == [pl.PipelineKind.CpAsync, pl.PipelineKind.AsyncUmma,
                     pl.PipelineKind.UmmaAsync]
    assert len(ops_named(k, "pipeline.producer.commit")) == 3
    k.verify()


def test_clc_fetch_async():
    k = kernel("sm_100a")
    with k:
        bars = k.alloc_barriers(2)
        p = PipelineClcFetchAsync.create(barrier_storage=bars, num_stages=1,
                                         producer_group=T1, consumer_group=T128,
                                         tx_count=16)
    assert p.type.kind == pl.PipelineKind.ClcFetchAsync and p.type.tx_count == 16
    k.verify()


def test_multi_consumers_release_op_type():
    k = kernel("sm_100a")
    with k:
        p = PipelineTmaMultiConsumersAsync.create(
            num_stages=2, producer_group=T1, consumer_group_umma=T1,
            consumer_group_async=CooperativeGroup(Agent.Warp, 4), tx_count=256)
        s = make_pipeline_state(Consumer, 2)
        p.consumer_release(s, PipelineOp.TCGen05Mma)
        p.consumer_release(s, PipelineOp.AsyncThread)
    assert p.type.consumer.size == 1 + 128
    rel = ops_named(k, "pipeline.consumer.release")
    assert [str(r.attributes["op_type"]) for r in rel] and len(rel) == 2
    assert all("op_type" in attr_names(r) for r in rel)
    k.verify()


def test_tma_store_pipeline():
    k = kernel()
    with k:
        src = k.smem_alloc(512, align=128)
        p = PipelineTmaStore.create(num_stages=2, producer_group=T128)
        p.producer_acquire()
        p.tma_store(k.args.desc, [0, 1], src)
        p.producer_commit()
        p.producer_tail()
    (create,) = ops_named(k, "pipeline.create")
    assert create.result.type.kind == pl.PipelineKind.TmaStore
    assert create.result.type.producer is None
    assert names(k) == ["pipeline.create", "pipeline.state.make",
                        "pipeline.producer.acquire", "pipeline.copy.tma_store",
                        "pipeline.producer.commit", "pipeline.producer.tail"]
    k.verify()


def test_order():
    k = kernel()
    with k:
        bars = k.alloc_barriers(4)
        o = PipelineOrder.create(bars, depth=2, length=2, group_id=1,
                                 producer_group=T128)
        o.wait()
        o.arrive()
        first = o._state
        for i in k.range(3, carry=[o]):
            o.wait()
            o.arrive()
        assert o._state != first
    assert names(k).count("pipeline.order.wait") == 2
    assert names(k).count("pipeline.order.arrive") == 2
    (st,) = ops_named(k, "pipeline.order.state")
    assert str(st.result.type) == "!pipeline.state<2, producer_consumer>"
    k.verify()


def test_named_barrier_and_fence_and_agent_sync():
    k = kernel(cluster_dim=2)
    with k:
        nb = NamedBarrier(barrier_id=2, num_threads=128)
        nb.arrive()
        nb.arrive_and_wait()
        nb.sync()
        nb.arrive_unaligned()
        nb.arrive_w_index(1)
        f = TmaStoreFence(num_stages=3)
        f.arrive()
        f.wait()
        f.tail()
        agent_sync(Agent.ThreadBlock)
        agent_sync(Agent.ThreadBlockCluster, is_relaxed=True)
    arrives = ops_named(k, "pipeline.named_barrier.arrive")
    assert len(arrives) == 3
    assert ir.IntegerAttr(arrives[0].attributes["barrier_id"]).value == 2
    assert ir.IntegerAttr(arrives[0].attributes["num_threads"]).value == 128
    assert "unaligned" in attr_names(arrives[1])
    assert len(arrives[2].operation.operands) == 1
    assert len(ops_named(k, "pipeline.named_barrier.sync")) == 2
    waits = ops_named(k, "pipeline.bulk_group.wait")
    assert [ir.IntegerAttr(w.attributes["pending"]).value for w in waits] == [2, 0]
    assert len(ops_named(k, "pipeline.bulk_group.commit")) == 1
    assert ops_named(k, "nvvm.barrier0")
    assert ops_named(k, "nvvm.cluster.arrive.relaxed")
    assert ops_named(k, "nvvm.cluster.wait")
    k.verify()


def test_mbarrier_array_nvvm_ops():
    k = kernel()
    with k:
        bars = k.alloc_barriers(4)
        with pytest.warns(UncheckedBarrierWarning):
            m = MbarrierArray(bars, 4, (PipelineOp.AsyncThread,
                                        CooperativeGroup(Agent.Warp, 2)))
        m.arrive(1)
        tok = m.try_wait(1, 0)
        m.wait(2, 1)
        t = MbarrierArray(bars, 2, (PipelineOp.TmaLoad, T1), tx_count=64)
        t.arrive(0)
        t.arrive_and_expect_tx(1, 128)
    assert len(ops_named(k, "nvvm.mbarrier.init")) == 6
    assert ops_named(k, "nvvm.mbarrier.arrive")
    assert len(ops_named(k, "nvvm.mbarrier.arrive.expect_tx")) == 2
    assert ops_named(k, "nvvm.mbarrier.try_wait")
    assert ops_named(k, "nvvm.mbarrier.try_wait.parity")
    k.verify()


def test_participants_acquire_commit_wait_release():
    k = kernel()
    with k:
        p = PipelineAsync.create(num_stages=2, producer_group=T128,
                                 consumer_group=T128)
        producer, consumer = p.make_participants()
        assert isinstance(producer, PipelineProducer)
        assert isinstance(consumer, PipelineConsumer)
        for i in k.range(4, carry=[producer]):
            h = producer.acquire_and_advance()
            assert isinstance(h.index, Scalar)
            producer.commit(h)
        producer.tail()
        for i in k.range(4, carry=[consumer]):
            h = consumer.wait_and_advance()
            consumer.release(h)
        h = consumer.wait()
        h.release()
    assert names(k).count("pipeline.producer.acquire") == 1
    assert names(k).count("pipeline.producer.commit") == 1
    assert names(k).count("pipeline.producer.tail") == 1
    assert names(k).count("pipeline.consumer.wait") == 2
    assert names(k).count("pipeline.consumer.release") == 2
    loops = ops_named(k, "scf.for")
    assert [str(r.type) for r in loops[0].results] == ["!pipeline.state<2, producer>"]
    # The tail uses the producer loop's result, not the start state.
    (tail,) = ops_named(k, "pipeline.producer.tail")
    assert tail.operation.operands[1] == loops[0].results[0]
    k.verify()


def test_ported_cutedsl_code_runs_unchanged():
    """CuTe DSL-shaped code with only the imports changed."""
    from pipeline_mlir import pipeline
    from pipeline_mlir.pipeline import CooperativeGroup, Agent

    k = kernel("sm_100a")
    with k:
        storage = k.alloc_barriers(6)
        mainloop = pipeline.PipelineTmaUmma.create(
            num_stages=3,
            producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 1),
            tx_count=8192, barrier_storage=storage)
        producer_state = pipeline.make_pipeline_state(
            pipeline.PipelineUserType.Producer, 3)
        consumer_state = pipeline.make_pipeline_state(
            pipeline.PipelineUserType.Consumer, 3)
        for _ in k.range(8, carry=[producer_state, consumer_state]):
            mainloop.producer_acquire(producer_state)
            mainloop.producer_commit(producer_state)
            producer_state.advance()
            mainloop.consumer_wait(consumer_state)
            mainloop.consumer_release(consumer_state)
            consumer_state.advance()
    assert names(k).count("pipeline.state.advance") == 2
    k.verify()
