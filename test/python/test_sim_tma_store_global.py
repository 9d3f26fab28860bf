"""The simulator follows TMA tensor stores and reduce-adds into global memory
(sim/gmem.py) through the tensor map a launch describes
(``simulate(tensor_maps=)``, ``pipeline-sim --tensor-map``): the box at the
copy's coordinates, clipped at the tensor's bounds, lands when a
``cp.async.bulk.wait_group`` without ``.read`` retires its group; a
reduce-add is an atomic add per element. A box staged in shared memory,
TMA-stored into a workspace and handed to another cluster by a flag: clean
with the full wait before the fence, a race naming the store with only the
``.read`` wait, with the wait after the flag or with none; two CTAs'
reduce-adds of one box read by a third after both flags: clean, and a
race when one of them stores instead of adding, or when the reader waits
for one flag only."""

import inspect
import random

import mlir.ir as ir
import pytest
from mlir.dialects import arith, llvm, nvvm, scf

from pipeline_mlir.dialects import pipeline as pl
from pipeline_mlir.kernel import GlobalPtr, Kernel, TmaDescriptor, load, store
from pipeline_mlir.kernel.memory import fence_view_async_shared
from pipeline_mlir.kernel.values import i32, to_value
from pipeline_mlir.pipeline import Agent, CooperativeGroup, PipelineAsync, tma_store
from pipeline_mlir.sim import TensorMap, simulate
from pipeline_mlir.user_location import UserLine

# The workspace: a 16 x 8 fp32 tensor (rows of 16, innermost first); a box
# is 8 columns x 4 rows (128 bytes, a word per lane).
WS_MAP = TensorMap(4, (16, 8), (8, 4), buffer=0)


def _line():
    """The line after the caller's."""
    return inspect.currentframe().f_back.f_lineno + 1


def _ptr(base, index):
    return llvm.getelementptr(base.type, base, [to_value(index, i32())], [-2147483648], i32(), 0)


def _poll(flag, count):
    """Every lane polls ``flag`` until it reads ``count`` or more, then
    fences."""
    loop = scf.WhileOp([], [])
    before, after = loop.before.blocks.append(), loop.after.blocks.append()
    with ir.InsertionPoint(before):
        seen = llvm.load(i32(), _ptr(to_value(flag), 0), alignment=4,
                         ordering=llvm.AtomicOrdering.monotonic, syncscope="device")
        waiting = arith.cmpi(arith.CmpIPredicate.ult, seen, to_value(count, i32()))
        scf.ConditionOp(nvvm.vote_sync(ir.IntegerType.get_signless(1), to_value(-1, i32()),
                                       waiting, nvvm.VoteSyncKind.any), [])
    with ir.InsertionPoint(after):
        scf.YieldOp([])
    nvvm.MembarOp(nvvm.MemScopeKind.GPU)


def _kernel(name):
    return Kernel(name, block_dim=32, params={"ws": GlobalPtr(), "desc": TmaDescriptor(),
                                              "flag": GlobalPtr(align=4), "out": GlobalPtr()})


def _buffer(k):
    """The box's staging buffer (and a pipeline: the simulator runs kernels
    with pipeline ops)."""
    PipelineAsync.create(num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 32),
                         consumer_group=CooperativeGroup(Agent.Thread, 32),
                         barrier_storage=k.alloc_barriers(2), name="unused")
    return k.smem_alloc(128)


def _stage(k, buf):
    """Every lane writes its word of the box into ``buf``, fenced for the
    async proxy."""
    store(k.lane_idx() + 1, buf, k.lane_idx())
    fence_view_async_shared()
    nvvm.bar_warp_sync(to_value(-1, i32()))


def _read_box(k, ws, out, col, row):
    """Each lane loads its word of the box at (``col``, ``row``)."""
    lane = k.lane_idx()
    line = _line()
    store(load(ws, i32(), (row + lane // 8) * 16 + col + lane % 8), out, lane)
    return line


def tma_handover(plant=None, coords=(8, 4), read=True):
    """CTA 0 TMA-stores the box at ``coords`` (lane 0), commits, waits for
    the group (``plant``: "read" waits with .read only, "late" after the
    flag, "no wait" never; "pipeline" stores and waits with the pipeline
    dialect's ops), fences and bumps the flag; CTA 1 polls it, fences and
    reads the box at (8, 4) (``read``)."""
    k = _kernel(f"tma_{(plant or 'twin').replace(' ', '_')}")
    lines = {}
    with k:
        ws, desc, flag, out = k.args
        buf = _buffer(k)
        cta, lane = k.block_idx(), k.lane_idx()
        with k.if_(cta == 0):
            _stage(k, buf)
            with k.if_(lane == 0):
                lines["store"] = _line()
                with UserLine():
                    if plant == "pipeline":
                        tma_store(desc, list(coords), buf)
                    else:
                        nvvm.CpAsyncBulkTensorSharedCTAToGlobalOp(
                            to_value(desc), to_value(buf), [to_value(c, i32()) for c in coords])
                if plant == "pipeline":
                    pl.bulk_group_commit()
                    pl.bulk_group_wait(pending=0, read=False)
                else:
                    nvvm.cp_async_bulk_commit_group()
                    if plant in (None, "read"):
                        nvvm.cp_async_bulk_wait_group(0, read=plant == "read")
                nvvm.MembarOp(nvvm.MemScopeKind.GPU)
                lines["flag"] = _line()
                with UserLine():
                    llvm.atomicrmw(llvm.AtomicBinOp.add, _ptr(to_value(flag), 0),
                                   arith.constant(i32(), 1), llvm.AtomicOrdering.monotonic,
                                   syncscope="device")
                if plant == "late":
                    nvvm.cp_async_bulk_wait_group(0, read=False)
        with k.if_(cta == 1):
            _poll(flag, 1)
            if read:
                lines["load"] = _read_box(k, ws, out, 8, 4)
    return k, lines


def _sim(k, ctas=2, schedules=12, maps=None):
    # clusters of one CTA: the hand-over crosses clusters
    return simulate(k.module, kernel=k.name, block_dim=k.block_dim, cluster=(1, 1, 1),
                    grid=(ctas, 1, 1), schedules=schedules, check=False,
                    tensor_maps={"desc": WS_MAP} if maps is None else maps)


@pytest.mark.parametrize("form", [None, "pipeline"])
def test_a_tma_store_waited_before_the_release_is_handed_over_clean(form):
    k, _ = tma_handover(form)
    res = _sim(k)
    assert res.ok, str(res)


@pytest.mark.parametrize("plant", ["read", "late", "no wait"])
def test_a_tma_store_not_retired_before_the_release_is_a_race(plant):
    k, lines = tma_handover(plant)
    res = _sim(k)
    assert set(res[0].counts) == {"gmem-race"}, str(res)
    assert res[0].counts["gmem-race"] == res[0].schedules      # in every schedule
    f = res.findings[0]
    # the box's first word: row 4, column 8
    assert "warp 0 of CTA 1 reads `ws` (argument 0) byte 288" in f.message, f.message
    assert f"test_sim_tma_store_global.py:{lines['load']}:" in f.message
    assert (f"nvvm.cp.async.bulk.tensor.global.shared.cta at {__file__}:{lines['store']}:"
            in f.message)
    if plant == "late":
        assert (f"warp 0 of CTA 0 set `flag` (argument 2) byte 0 (llvm.atomicrmw at "
                f"{__file__}:{lines['flag']}:") in f.message, f.message
        assert "between that TMA store and the flag" in f.message, f.message
    else:
        assert ("no cp.async.bulk.wait_group (without .read) of warp 0 of CTA 0 retired that "
                "TMA store before the release") in f.message, f.message


def test_without_a_tensor_map_the_store_is_not_followed():
    """The kernel alone does not say where the box lands: with no map the
    planted mistake goes unseen (as before TMA stores were followed)."""
    k, _ = tma_handover("no wait")
    assert _sim(k, maps={}).ok


def _words(k, maps, ctas=2):
    """The words of ``ws`` one schedule of ``k`` writes (byte offsets)."""
    from pipeline_mlir.sim.engine import run_one
    from pipeline_mlir.sim.frontend import kernels as sim_kernels
    from pipeline_mlir.sim.interp import Launch, make_world_factory

    with k.module.context:
        sk, = [x for x in sim_kernels(k.module) if x.name == k.name]
    make = make_world_factory(sk, Launch(sk.block_dim, (1, 1, 1), grid=(ctas, 1, 1),
                                         tensor_maps=maps))
    rng = random.Random(0)
    w = run_one(make, lambda n, cont: rng.randrange(n), 0)
    return sorted(off for (pos, off), wd in w.gmem.words.items() if pos == 0 and wd.written)


def test_the_box_is_clipped_at_the_tensors_bounds():
    """A box at columns 12..19, rows 6..9 of the 16 x 8 tensor writes its
    columns 12..15 of rows 6 and 7 only; through a map of 4-byte strides
    of 80 bytes (padded rows), the same elements at their padded offsets."""
    k, _ = tma_handover(coords=(12, 6), read=False)
    assert _words(k, {1: WS_MAP}) == [(r * 16 + c) * 4 for r in (6, 7) for c in range(12, 16)]
    padded = TensorMap(4, (16, 8), (8, 4), strides=(80,), buffer=0, offset=16)
    assert _words(k, {1: padded}) == [16 + r * 80 + c * 4 for r in (6, 7) for c in range(12, 16)]


def reduce_handover(plant=None):
    """CTAs 0 and 1 each add a box into the same words of ``ws`` (TMA
    reduce-add), wait for the group, fence and bump the flag; CTA 2 polls
    until the flag reads 2, fences and reads the box. ``plant``: "store"
    (CTA 1 stores instead of adding), "one flag" (CTA 2 waits for 1)."""
    k = _kernel(f"reduce_{(plant or 'twin').replace(' ', '_')}")
    lines = {}
    with k:
        ws, desc, flag, out = k.args
        buf = _buffer(k)
        cta, lane = k.block_idx(), k.lane_idx()
        for who in (0, 1):
            with k.if_(cta == who):
                _stage(k, buf)
                with k.if_(lane == 0):
                    lines[who] = _line()
                    with UserLine():
                        if plant == "store" and who == 1:
                            nvvm.CpAsyncBulkTensorSharedCTAToGlobalOp(
                                to_value(desc), to_value(buf),
                                [to_value(c, i32()) for c in (0, 0)])
                        else:
                            nvvm.CpAsyncBulkTensorReduceOp(
                                to_value(desc), to_value(buf), nvvm.TMAReduxKind.ADD,
                                [to_value(c, i32()) for c in (0, 0)],
                                mode=nvvm.TMAStoreMode.TILE)
                    nvvm.cp_async_bulk_commit_group()
                    nvvm.cp_async_bulk_wait_group(0, read=False)
                    nvvm.MembarOp(nvvm.MemScopeKind.GPU)
                    llvm.atomicrmw(llvm.AtomicBinOp.add, _ptr(to_value(flag), 0),
                                   arith.constant(i32(), 1), llvm.AtomicOrdering.monotonic,
                                   syncscope="device")
        with k.if_(cta == 2):
            _poll(flag, 1 if plant == "one flag" else 2)
            lines["load"] = _read_box(k, ws, out, 0, 0)
    return k, lines


def test_reduce_adds_of_one_box_by_two_ctas_need_no_order_between_them():
    k, _ = reduce_handover()
    res = _sim(k, ctas=3)
    assert res.ok, str(res)
    assert _words(k, {1: WS_MAP}, ctas=3) == [(r * 16 + c) * 4 for r in range(4)
                                                for c in range(8)]


def test_a_store_among_the_reduce_adds_is_a_race():
    """CTA 1 stores the box over CTA 0's adds (or CTA 0 adds to CTA 1's
    store): either order, a race naming both lines."""
    k, lines = reduce_handover("store")
    res = _sim(k, ctas=3)
    assert set(res[0].counts) == {"gmem-race"}, str(res)
    f = res.findings[0]
    assert (f"nvvm.cp.async.bulk.tensor.global.shared.cta at {__file__}:{lines[1]}:"
            in f.message), f.message
    assert f"nvvm.cp.async.bulk.tensor.reduce at {__file__}:{lines[0]}:" in f.message
    assert ("warp 0 of CTA 1 writes `ws` (argument 0) byte 0" in f.message
            and "added to by warp 0 of CTA 0" in f.message
            or "warp 0 of CTA 0 adds to `ws` (argument 0) byte 0" in f.message
            and "the add may be lost under the other write" in f.message), f.message


def test_a_read_after_one_of_two_flags_races_with_the_other_add():
    k, lines = reduce_handover("one flag")
    res = _sim(k, ctas=3, schedules=20)
    assert set(res[0].counts) == {"gmem-race"}, str(res)
    f = res.findings[0]
    # the read first (the add is not ordered after it), or the add first
    assert ("warp 0 of CTA 2 reads `ws` (argument 0) byte 0" in f.message
            and "added to by warp 0 of CTA" in f.message
            or "adds to `ws` (argument 0) byte 0" in f.message
            and "read by warp 0 of CTA 2" in f.message), f.message
    assert f"test_sim_tma_store_global.py:{lines['load']}:" in f.message
    assert "nvvm.cp.async.bulk.tensor.reduce at" in f.message


# The attention backward's dQ: each consumer warpgroup's leader adds its
# fp32 dQ tile into the accumulator (kernels/attention_bwd/dq_reduce.py);
# on two CTAs (two key blocks) four warps add to every dQ word. The map is
# the host's (batch, seqlen_q, heads * d) view with 32-column x 64-row
# boxes (ops/attention_bwd_host._descriptor), 120 queries: the last query
# block's boxes are clipped at row 120.
ATTN_ARGS = {"batch": 1, "heads": 2, "heads_kv": 1, "seqlen_q": 120, "seqlen_k": 256}
DQ_MAP = TensorMap(4, (2 * 128, 120, 1), (32, 64, 1))


def _attention_bwd():
    from pipeline_mlir.kernels import attention_bwd as ab
    return ab.build(ab.AttentionBwdConfig())


def _sim_attention(k, maps):
    return simulate(k.module, kernel=k.name, args=k._sim_args(ATTN_ARGS),
                    block_dim=k.block_dim, cluster=(1, 1, 1), grid=(2, 1, 1), schedules=1,
                    tensor_maps=maps, check=False)


def test_the_attention_backwards_dq_reduce_adds_simulate_clean():
    """One schedule run to its end with no finding (run_one raises one)."""
    k = _attention_bwd()
    from pipeline_mlir.sim.engine import run_one
    from pipeline_mlir.sim.frontend import kernels as sim_kernels
    from pipeline_mlir.sim.interp import Launch, make_world_factory

    with k.module.context:
        sk, = sim_kernels(k.module)
    make = make_world_factory(sk, Launch(sk.block_dim, (1, 1, 1), None,
                                         k._sim_args(ATTN_ARGS), grid=(2, 1, 1),
                                         tensor_maps={6: DQ_MAP}))
    rng = random.Random(0)
    w = run_one(make, lambda n, cont: rng.randrange(n), 0)
    assert not w.deferred
    dq = {key: wd for key, wd in w.gmem.words.items() if key[0] == 6}
    # every word of the 120 x 256 dQ, none past row 120, added to by two
    # warps of each CTA
    assert sorted(off for _, off in dq) == list(range(0, 120 * 256 * 4, 4))
    assert {frozenset((w.agents[r].cta for r in wd.adds)) for wd in dq.values()} == {
        frozenset({0, 1})}
    assert {len(wd.adds) for wd in dq.values()} == {4}


def test_a_dq_tile_stored_instead_of_added_is_a_race(monkeypatch):
    """The reduce-add planted as a plain TMA store: the tiles of the other
    warps (and CTA) that add to the same dQ rows overwrite each other."""
    from pipeline_mlir.kernels.attention_bwd import dq_reduce
    from pipeline_mlir.pipeline.emit import smem_pointer

    lines = {}

    def store_instead(desc, coords, src):
        lines["store"] = _line()
        with UserLine():
            nvvm.CpAsyncBulkTensorSharedCTAToGlobalOp(
                to_value(desc), smem_pointer(src, "store"), [to_value(c, i32()) for c in coords])
    monkeypatch.setattr(dq_reduce, "tma_reduce_add", store_instead)
    res = _sim_attention(_attention_bwd(), {"dq_accum": DQ_MAP})
    assert set(res[0].counts) == {"gmem-race"}, str(res)
    f = res.findings[0]
    at = f"nvvm.cp.async.bulk.tensor.global.shared.cta at {__file__}:{lines['store']}:"
    assert f.message.count(at) == 2, f.message    # both sides: the same line
    assert "writes `dq_accum` (argument 6) byte" in f.message, f.message
    assert "whichever lands last wins" in f.message
