"""The simulator's tensor memory (sim/tmem.py): allocation per CTA and per
CTA pair, and tcgen05.ld in flight until tcgen05.wait::ld.

One CTA: warp 0 allocates and publishes the address (fence, CTA barrier,
fence); each of the two warps loads its rows, waits, stores them; after a
CTA barrier warp 0 frees the columns. A CTA pair: the same with
cta_group::2 between two cluster barriers. Each planted mistake is found
at its line; the clean kernels pass."""

import pytest

from pipeline_mlir.kernel import Kernel, store, tcgen05, tmem

from _held_out_bugs import _next_line

SCHEDULES = 8


def _cta(plant):
    k = Kernel(f"tmem_{plant}", chip="sm_100a", block_dim=64)
    lines = {}
    with k:
        holder = k.smem_alloc(tmem.HOLDER_BYTES, align=16, name="TMEM address")
        out = k.smem_alloc(64 * 4, align=16, name="out")
        with k.if_(k.warp_idx() == 0):
            if plant == "leak":
                lines["bug"] = _next_line()
            tmem.alloc(holder, 32)
            tmem.relinquish_alloc_permit()
            if plant == "alloc_after_relinquish":
                lines["bug"] = _next_line()
                tmem.alloc(holder, 32)
        tcgen05.fence_before_thread_sync()
        k.sync_threads()
        tcgen05.fence_after_thread_sync()
        rows = tmem.offset(tmem.load_address(holder), lane=k.warp_idx() * 32)
        bits = tcgen05.load_32x32b(rows, 1)
        if plant == "use_unwaited":
            lines["bug"] = _next_line()
            store(bits, out, k.thread_idx())
            tcgen05.wait_load()
        else:
            tcgen05.wait_load()
            store(bits, out, k.thread_idx())
        if plant != "unordered_dealloc":  # else warp 1 may still load
            tcgen05.fence_before_thread_sync()
            k.sync_threads()
        with k.if_(k.warp_idx() == 0):
            tcgen05.fence_after_thread_sync()
            if plant == "dealloc_unwaited":
                tcgen05.load_32x32b(rows, 1)
            if plant != "leak":
                lines.setdefault("bug", _next_line())
                tmem.dealloc(tmem.load_address(holder), 32)
            if plant == "twice":
                lines["bug"] = _next_line()
                tmem.dealloc(tmem.load_address(holder), 32)
            if plant == "use_after":   # (the report names the dealloc)
                tcgen05.load_32x32b(rows, 1)
                tcgen05.wait_load()
    return k, lines


def _pair(plant):
    """A CTA pair: cluster barrier, cta_group::2 alloc, the rows loaded by
    warp 1, then a cluster barrier (plant "cta_barrier": a CTA barrier
    only) before the cta_group::2 dealloc."""
    k = Kernel(f"tmem_pair_{plant}", chip="sm_100a", block_dim=64, cluster_dim=(2, 1, 1))
    lines = {}
    with k:
        holder = k.smem_alloc(tmem.HOLDER_BYTES, align=16, name="TMEM address")
        out = k.smem_alloc(64 * 4, align=16, name="out")
        k.cluster_sync()
        with k.if_(k.warp_idx() == 0):
            tmem.alloc(holder, 32, cta_group=2)
            tmem.relinquish_alloc_permit(cta_group=2)
        tcgen05.fence_before_thread_sync()
        k.sync_threads()
        tcgen05.fence_after_thread_sync()
        with k.if_(k.warp_idx() == 1):
            rows = tmem.offset(tmem.load_address(holder), lane=32)
            bits = tcgen05.load_32x32b(rows, 1)
            tcgen05.wait_load()
            store(bits, out, k.thread_idx())
        tcgen05.fence_before_thread_sync()
        if plant == "cta_barrier":
            k.sync_threads()
        else:
            k.cluster_sync()
        with k.if_(k.warp_idx() == 0):
            tcgen05.fence_after_thread_sync()
            lines["bug"] = _next_line()
            tmem.dealloc(tmem.load_address(holder), 32, cta_group=2)
    return k, lines


def _run(build, plant):
    k, lines = build(plant)
    return k.simulate(schedules=SCHEDULES, check=False), lines.get("bug")


@pytest.mark.parametrize("build", [_cta, _pair], ids=["cta", "pair"])
def test_clean_kernel_passes(build):
    result, _ = _run(build, "none")
    assert result.ok, str(result)


@pytest.mark.parametrize("plant, kind, words", [
    ("twice", "tmem", "already freed (dealloc twice)"),
    ("leak", "tmem", "exits with the tensor memory"),
    ("use_after", "tmem", "TMEM use after dealloc"),
    ("alloc_after_relinquish", "tmem", "after warp 0 of CTA 0's "
                                       "tcgen05.relinquish_alloc_permit"),
    ("unordered_dealloc", "tmem", "tcgen05.dealloc"),
    ("use_unwaited", "tcgen05-ld", "llvm.store uses the registers it loads"),
    ("dealloc_unwaited", "tcgen05-ld", "this tcgen05.dealloc frees tensor memory while the "
                                       "tcgen05.ld"),
])
def test_planted_mistake_is_found_at_its_line(plant, kind, words):
    result, line = _run(_cta, plant)
    assert not result.ok
    kinds = {f.kind for f in result.findings}
    assert kinds == {kind}, str(result)
    if plant != "unordered_dealloc":   # every schedule
        assert result[0].counts[kind] == SCHEDULES, str(result)
    assert words in str(result), str(result)
    assert f"{__file__}:{line}:" in str(result), str(result)


def test_pair_dealloc_after_a_cta_barrier_only_is_found():
    """The peer's alloc and load are ordered before this CTA's cta_group::2
    dealloc by a cluster barrier only: with a CTA barrier the dealloc is a
    finding in every schedule (the alloc after a cluster barrier is not)."""
    result, line = _run(_pair, "cta_barrier")
    assert {f.kind for f in result.findings} == {"tmem"}, str(result)
    assert result[0].counts["tmem"] == SCHEDULES, str(result)
    assert "tcgen05.dealloc.cta_group::2" in str(result), str(result)
    assert f"{__file__}:{line}:" in str(result), str(result)


def _store_then_load(plant):
    """Each warp stores 4 columns of its rows (tcgen05.st 32x32b.x4), waits
    (wait::st) and loads them back. ``plant``: "no_wait" (the load before
    the wait), "other_columns" (no wait, but the load reads the 4 columns
    after them: no overlap), "known_overlap" (no wait; the store at column
    0 and the load at column 2 of known addresses)."""
    import mlir.ir as ir
    from mlir.dialects import llvm, nvvm

    from pipeline_mlir.kernel.values import i32, to_value
    from pipeline_mlir.user_location import UserLine

    k = Kernel(f"tmem_st_{plant}", chip="sm_100a", block_dim=64)
    lines = {}
    with k:
        holder = k.smem_alloc(tmem.HOLDER_BYTES, align=16, name="TMEM address")
        out = k.smem_alloc(64 * 4, align=16, name="out")
        with k.if_(k.warp_idx() == 0):
            tmem.alloc(holder, 32)
            tmem.relinquish_alloc_permit()
        tcgen05.fence_before_thread_sync()
        k.sync_threads()
        tcgen05.fence_after_thread_sync()
        if plant == "known_overlap":   # lane 32 w, columns 0 and 2
            lane = (k.warp_idx() * 32) << 16
            rows, later = (llvm.inttoptr(tmem.tmem_ptr_type(), to_value(x, i32()))
                           for x in (lane, lane + 2))
        else:
            rows = tmem.offset(tmem.load_address(holder), lane=k.warp_idx() * 32)
            later = tmem.offset(rows, column=4) if plant == "other_columns" else rows
        vec = nvvm.tcgen05_ld(ir.VectorType.get([4], i32()), nvvm.Tcgen05LdStShape.SHAPE_32X32B,
                              tmem._tmem(rows, "st"))
        tcgen05.wait_load()
        lines["st"] = _next_line()
        with UserLine():
            nvvm.tcgen05_st(nvvm.Tcgen05LdStShape.SHAPE_32X32B, tmem._tmem(rows, "st"), vec)
        if plant == "none":
            tcgen05.wait_store()
        lines["ld"] = _next_line()
        bits = tcgen05.load_32x32b(later, 1)
        tcgen05.wait_load()
        store(bits, out, k.thread_idx())
        tcgen05.wait_store()
        tcgen05.fence_before_thread_sync()
        k.sync_threads()
        with k.if_(k.warp_idx() == 0):
            tcgen05.fence_after_thread_sync()
            tmem.dealloc(tmem.load_address(holder), 32)
    return k, lines


@pytest.mark.parametrize("plant", ["none", "other_columns"])
def test_a_load_after_the_stores_wait_or_of_other_columns_is_clean(plant):
    k, _ = _store_then_load(plant)
    result = k.simulate(schedules=SCHEDULES, check=False)
    assert result.ok, str(result)


@pytest.mark.parametrize("plant", ["no_wait", "known_overlap"])
def test_a_load_of_stored_columns_before_wait_st_is_found(plant):
    k, lines = _store_then_load(plant)
    result = k.simulate(schedules=SCHEDULES, check=False)
    assert {f.kind for f in result.findings} == {"tcgen05-st"}, str(result)
    assert result[0].counts["tcgen05-st"] == SCHEDULES, str(result)
    msg = result.findings[0].message
    assert f"tcgen05.ld at {__file__}:{lines['ld']}:" in msg, msg
    assert f"tcgen05.st at {__file__}:{lines['st']}:" in msg, msg
    assert "may still be writing in lanes 0-31 (no tcgen05.wait::st in those lanes" in msg
