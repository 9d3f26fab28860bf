"""The dialect from Python: types/attrs as classes, every op built and verified,
invalid IR raising MLIRError with the verifier's message, and the package
importing from its installed location."""

import os
import sysconfig

import pytest

import mlir.ir as ir
from mlir.dialects import arith, func, llvm

import pipeline_mlir
from pipeline_mlir.dialects import pipeline as pl


def i32(v):
    return arith.constant(ir.IntegerType.get_signless(32), v)


def group(agent, size):
    return pl.CooperativeGroupAttr.get(agent, size)


def make_type(kind, stages=3, **kw):
    return pl.PipelineType.get(kind, stages, **kw)


def test_imports_from_installed_location():
    purelib = os.path.realpath(sysconfig.get_paths()["purelib"])
    assert os.path.realpath(pipeline_mlir.__file__).startswith(purelib)


def test_type_and_attr_classes_roundtrip(ctx):
    g = group(pl.Agent.Warp, 4)
    assert isinstance(g, pl.CooperativeGroupAttr)
    assert (g.agent, g.size) == (pl.Agent.Warp, 4)
    assert str(g) == "#pipeline.group<warp, 4>"

    c = pl.ClusterLayoutAttr.get(2, 2, 1, 1)
    assert (c.v, c.m, c.n, c.l) == (2, 2, 1, 1)

    t = make_type(pl.PipelineKind.TmaUmma, 4, producer=group(pl.Agent.Thread, 1),
                  consumer=group(pl.Agent.Thread, 2), tx_count=8192, cluster=c,
                  multicast=pl.Multicast.MN, cta_group=2)
    assert t.kind == pl.PipelineKind.TmaUmma
    assert (t.stages, t.tx_count, t.cta_group, t.cluster_size) == (4, 8192, 2, 4)
    assert t.multicast == pl.Multicast.MN
    assert t.producer.agent == pl.Agent.Thread and t.consumer.size == 2
    # Printing then parsing gives back the same (uniqued) type.
    assert ir.Type.parse(str(t)) == t
    assert isinstance(ir.Type.parse(str(t)), pl.PipelineType)

    s = pl.StateType.get(4, pl.Role.Consumer, simple=True)
    assert (s.stages, s.role, s.simple) == (4, pl.Role.Consumer, True)
    assert str(s) == "!pipeline.state<4, consumer, simple>"


@pytest.mark.parametrize("make, message", [
    (lambda: pl.CooperativeGroupAttr.get(pl.Agent.Thread, 0), "size must be positive"),
    (lambda: pl.ClusterLayoutAttr.get(1, 4, 4, 2), "at most 16 CTAs"),
    (lambda: make_type(pl.PipelineKind.Async, 0, producer=group(pl.Agent.Thread, 1),
                       consumer=group(pl.Agent.Thread, 1)), "stages must be positive"),
    (lambda: make_type(pl.PipelineKind.ClcFetchAsync, producer=group(pl.Agent.Thread, 1),
                       consumer=group(pl.Agent.Thread, 1)), "tx_count must be positive"),
    (lambda: make_type(pl.PipelineKind.TmaAsync, producer=group(pl.Agent.Thread, 1),
                       consumer=group(pl.Agent.Thread, 1), tx_count=-1),
     r"tx_count must be positive \(or left out, to be derived from the copies\)"),
    (lambda: make_type(pl.PipelineKind.TmaAsync, producer=group(pl.Agent.Warp, 1),
                       consumer=group(pl.Agent.Thread, 1), tx_count=64),
     "producer agent must be 'thread'"),
    (lambda: make_type(pl.PipelineKind.TmaAsync, producer=group(pl.Agent.Thread, 1),
                       consumer=group(pl.Agent.Thread, 1), tx_count=64,
                       multicast=pl.Multicast.M), "needs a cluster"),
    (lambda: pl.StateType.get(0, pl.Role.Producer), "stages must be positive"),
])
def test_invalid_parameters_raise_with_rule(ctx, make, message):
    with pytest.raises(ValueError, match=message):
        make()


def _kernel_args(ctx):
    ptr3 = llvm.PointerType.get(3)
    ptr1 = llvm.PointerType.get(1)
    ptr0 = llvm.PointerType.get()
    return ptr3, ptr1, ptr0


def test_every_op_builds_and_verifies(ctx):
    ptr3, ptr1, ptr0 = _kernel_args(ctx)
    module = ir.Module.create()
    thread1 = group(pl.Agent.Thread, 1)
    warps = group(pl.Agent.Warp, 4)
    with ir.InsertionPoint(module.body):
        f = func.FuncOp("all_ops", ir.FunctionType.get([ptr3, ptr1, ptr0], []))
        with ir.InsertionPoint(f.add_entry_block()):
            smem, gmem, desc = f.arguments
            c0, c1, c64 = i32(0), i32(1), i32(64)
            tma_t = make_type(pl.PipelineKind.TmaAsync, 3, producer=thread1,
                              consumer=warps, tx_count=4096,
                              cluster=pl.ClusterLayoutAttr.get(1, 2, 1, 1),
                              multicast=pl.Multicast.M)
            p = pl.create_(tma_t, barrier_storage=smem, defer_sync=True, name="ab")
            pl.init_arrive(cluster_size=2, relaxed=True)
            pl.init_wait(cluster_size=2)
            ps_t = pl.StateType.get(3, pl.Role.Producer)
            cs_t = pl.StateType.get(3, pl.Role.Consumer)
            ps = pl.state_make(ps_t)
            cs = pl.state_make(cs_t, index=c0, phase=c0, count=c0)
            simple = pl.state_make(pl.StateType.get(3, pl.Role.Consumer, simple=True),
                                   index=c1)
            ps2 = pl.state_advance(ps)
            pl.state_advance(ps2, amount=c1)
            for read in (pl.state_index, pl.state_phase, pl.state_count):
                read(simple)
            tok = pl.producer_try_acquire(p, ps)
            pl.producer_acquire(p, ps, token=tok, extra_tx=c64)
            bar = pl.producer_barrier(p, ps)
            assert isinstance(bar.type, llvm.PointerType)
            mask = arith.constant(ir.IntegerType.get_signless(16), 3)
            pl.copy_tma_load(p, ps, desc, [c0, c1], smem, 4096, multicast_mask=mask)
            pl.copy_bulk(p, ps, gmem, smem, c64)
            pl.producer_commit(p, ps)
            ctok = pl.consumer_try_wait(p, cs)
            pl.consumer_wait(p, cs, token=ctok)
            pl.consumer_release(p, cs)
            pl.producer_tail(p, ps)

            async_t = make_type(pl.PipelineKind.Async, 2, producer=warps, consumer=warps)
            a = pl.create_(async_t)
            aps = pl.state_make(pl.StateType.get(2, pl.Role.Producer))
            pl.producer_commit(a, aps, elect_one=True, syncwarp_before=True)

            multi_t = make_type(pl.PipelineKind.TmaMultiConsumersAsync, 2,
                                producer=thread1, consumer=group(pl.Agent.Thread, 5),
                                tx_count=128)
            mp = pl.create_(multi_t)
            mcs = pl.state_make(pl.StateType.get(2, pl.Role.Consumer))
            pl.consumer_release(mp, mcs, op_type=ir.Attribute.parse(
                "#pipeline.op_type<tcgen05_mma>"))

            store = pl.create_(make_type(pl.PipelineKind.TmaStore, 2))
            sps = pl.state_make(pl.StateType.get(2, pl.Role.Producer))
            pl.copy_tma_store(desc, [c0, c1], smem)
            pl.producer_commit(store, sps)
            pl.bulk_group_commit()
            pl.bulk_group_wait(pending=1, read=True)

            order = pl.create_(make_type(pl.PipelineKind.Order, 2, producer=warps, length=3))
            ost = pl.order_state(pl.StateType.get(2, pl.Role.ProducerConsumer), order, c1)
            pl.order_wait(order, ost, c1)
            pl.order_arrive(order, ost, c1)

            pl.named_barrier_arrive(1, 256, index=c1)
            pl.named_barrier_sync(2, 128, unaligned=True)
            func.ReturnOp([])
    assert module.operation.verify()
    text = str(module)
    for name in ["create", "init_arrive", "init_wait", "state.make", "state.advance",
                 "state.index", "state.phase", "state.count", "producer.try_acquire",
                 "producer.acquire", "producer.barrier", "copy.tma_load", "copy.bulk",
                 "producer.commit", "consumer.try_wait", "consumer.wait",
                 "consumer.release", "producer.tail", "copy.tma_store",
                 "bulk_group.commit", "bulk_group.wait", "order.state", "order.wait",
                 "order.arrive", "named_barrier.arrive", "named_barrier.sync"]:
        assert f"pipeline.{name}" in text, name
    # The printed module parses back to the same text.
    assert str(ir.Module.parse(text)) == text


def test_invalid_op_raises_mlir_error_with_verifier_message(ctx):
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        f = func.FuncOp("bad", ir.FunctionType.get([], []))
        with ir.InsertionPoint(f.add_entry_block()):
            t = make_type(pl.PipelineKind.Async, 3, producer=group(pl.Agent.Thread, 32),
                          consumer=group(pl.Agent.Thread, 32))
            p = pl.create_(t)
            # A consumer state used by a producer verb.
            cs = pl.state_make(pl.StateType.get(3, pl.Role.Consumer))
            pl.producer_acquire(p, cs)
            func.ReturnOp([])
    with pytest.raises(ir.MLIRError) as err:
        module.operation.verify()
    message = str(err.value)
    assert "pipeline.producer.acquire" in message
    assert "is a producer verb but the state is a consumer state" in message


def test_stage_mismatch_is_rejected(ctx):
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        f = func.FuncOp("bad", ir.FunctionType.get([], []))
        with ir.InsertionPoint(f.add_entry_block()):
            p = pl.create_(make_type(pl.PipelineKind.Async, 3,
                                     producer=group(pl.Agent.Thread, 32),
                                     consumer=group(pl.Agent.Thread, 32)))
            pl.consumer_wait(p, pl.state_make(pl.StateType.get(4, pl.Role.Consumer)))
            func.ReturnOp([])
    with pytest.raises(ir.MLIRError, match="state has 4 stages but the pipeline has 3"):
        module.operation.verify()


def test_pipeline_opt_roundtrips_python_built_module(ctx, tmp_path):
    import subprocess
    import shutil

    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        f = func.FuncOp("k", ir.FunctionType.get([], []))
        with ir.InsertionPoint(f.add_entry_block()):
            p = pl.create_(make_type(pl.PipelineKind.CpAsync, 2,
                                     producer=group(pl.Agent.Thread, 128),
                                     consumer=group(pl.Agent.Thread, 128)))
            s = pl.state_make(pl.StateType.get(2, pl.Role.Producer))
            pl.producer_acquire(p, s)
            pl.producer_commit(p, s)
            func.ReturnOp([])
    path = tmp_path / "k.mlir"
    path.write_text(str(module))
    tool = shutil.which("pipeline-opt")
    assert tool, "pipeline-opt is not on PATH"
    out = subprocess.run([tool, str(path)], check=True, capture_output=True, text=True).stdout
    assert ir.Module.parse(out).operation.verify()
    assert "pipeline.producer.commit" in out
