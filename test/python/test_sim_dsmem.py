"""The simulator follows stores into another CTA's shared memory
(distributed shared memory: ``mapa`` then ``st.shared::cluster``, sim/
smemrace.py): the peer's reads of the bytes must be ordered after the
store by a cluster barrier (``barrier.cluster.arrive`` with its default
release, then ``wait``). A two-CTA hand-off: CTA 0 writes a word per lane
into CTA 1's buffer and both meet at the cluster barrier; CTA 1 reads its
buffer (and CTA 0 reads it back through ``mapa``). Clean; with the cluster
barrier missing, placed after the read, or arrived ``.relaxed``, a race
naming both lines."""

import inspect

import pytest
from mlir.dialects import llvm, nvvm

from pipeline_mlir.kernel import GlobalPtr, Kernel, load, store
from pipeline_mlir.kernel.values import i32, to_value
from pipeline_mlir.pipeline import Agent, CooperativeGroup, PipelineAsync
from pipeline_mlir.sim import simulate
from pipeline_mlir.user_location import UserLine


def _line():
    """The line after the caller's."""
    return inspect.currentframe().f_back.f_lineno + 1


def _remote(p, rank):
    """``p`` (this CTA's shared memory) in CTA ``rank``'s window."""
    return nvvm.mapa(llvm.PointerType.get(7), to_value(p), to_value(rank, i32()))


def _word(p, lane):
    return llvm.getelementptr(p.type, p, [to_value(lane, i32())], [-2147483648], i32(), 0)


def hand_off(plant=None):
    """``plant``: "no barrier" (neither CTA meets), "late" (CTA 1 reads
    before its arrive), "relaxed" (CTA 0 arrives .relaxed: no release),
    "read back" (CTA 0 reads CTA 1's buffer through mapa with no barrier
    after CTA 1's own store to it)."""
    k = Kernel(f"dsmem_{(plant or 'twin').replace(' ', '_')}", block_dim=32, cluster_dim=2,
               params={"out": GlobalPtr()})
    lines = {}
    with k:
        out, = k.args
        PipelineAsync.create(num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 32),
                             consumer_group=CooperativeGroup(Agent.Thread, 32),
                             barrier_storage=k.alloc_barriers(2), name="unused")
        buf = k.smem_alloc(128)
        rank, lane = k.cluster_cta_rank(), k.lane_idx()

        def meet(relaxed=False):
            if plant == "no barrier":
                return
            if relaxed:
                nvvm.cluster_arrive_relaxed()
            else:
                nvvm.cluster_arrive()
            nvvm.cluster_wait()

        with k.if_(rank == 0):
            lines["store"] = _line()
            with UserLine():
                llvm.store(to_value(lane + 1, i32()), _word(_remote(buf, 1), lane))
            meet(plant == "relaxed")
            if plant == "read back":
                lines["read back"] = _line()
                with UserLine():
                    v = llvm.load(i32(), _word(_remote(buf, 1), lane))
                store(v, out, lane)
        with k.if_(rank == 1):
            if plant == "late":
                lines["load"] = _line()
                store(load(buf, i32(), lane), out, lane + 32)
            meet()
            if plant == "read back":
                lines["own store"] = _line()
                store(lane, buf, lane)
            elif plant != "late":
                lines["load"] = _line()
                store(load(buf, i32(), lane), out, lane + 32)
    return k, lines


def _sim(k, schedules=12):
    return simulate(k.module, kernel=k.name, block_dim=k.block_dim, cluster=(2, 1, 1),
                    schedules=schedules, check=False)


def test_a_store_into_the_peer_handed_over_by_the_cluster_barrier_is_clean():
    k, _ = hand_off()
    res = _sim(k)
    assert res.ok, str(res)


@pytest.mark.parametrize("plant", ["no barrier", "late", "relaxed"])
def test_the_peer_reading_without_the_cluster_barrier_races(plant):
    k, lines = hand_off(plant)
    res = _sim(k)
    assert set(res[0].counts) == {"smem-race"}, str(res)
    f = res.findings[0]
    store_at = f"llvm.store at {__file__}:{lines['store']}:"
    load_at = f"test_sim_dsmem.py:{lines['load']}:"
    assert store_at in f.message and load_at in f.message, f.message
    # either side first: CTA 1's read of its buffer after CTA 0's store, or
    # CTA 0's store into CTA 1's buffer after CTA 1's read of it
    assert ("warp 0 of CTA 1 reads shared memory at byte" in f.message and "of CTA 1 " in f.message
            or "warp 0 of CTA 0 writes shared memory at byte" in f.message
            and "of CTA 1 " in f.message), f.message


def test_reading_the_peers_buffer_back_races_with_its_own_later_store():
    """CTA 0 reads CTA 1's buffer through mapa after the barrier while CTA 1
    stores into it after the same barrier: nothing orders the two."""
    k, lines = hand_off("read back")
    res = _sim(k)
    assert set(res[0].counts) == {"smem-race"}, str(res)
    f = res.findings[0]
    assert f"llvm.load at {__file__}:{lines['read back']}:" in f.message, f.message
    assert f"test_sim_dsmem.py:{lines['own store']}:" in f.message, f.message
    assert "of CTA 1 " in f.message


def test_a_rank_outside_the_cluster_is_refused():
    k = Kernel("dsmem_rank", block_dim=32, cluster_dim=2, params={"out": GlobalPtr()})
    with k:
        PipelineAsync.create(num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 32),
                             consumer_group=CooperativeGroup(Agent.Thread, 32),
                             barrier_storage=k.alloc_barriers(2), name="unused")
        buf = k.smem_alloc(128)
        llvm.store(to_value(1, i32()), _word(_remote(buf, 2), k.lane_idx()))
    res = _sim(k, schedules=1)
    assert set(res[0].counts) == {"unsupported"}, str(res)
    assert "CTA rank 2; the cluster has 2 CTAs" in res.findings[0].message
