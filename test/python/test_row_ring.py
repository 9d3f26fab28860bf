"""Rows staged through shared memory (python/pipeline_mlir/kernel/row_ring.py)
and the row kernels built on them (examples/row_softmax.py and
examples/rmsnorm.py from 16 KiB rows on), without a GPU: which rows take a
ring and how deep, the instructions of the ring kernels (one bulk copy per
row, the row read from shared memory, named-barrier reductions, no spill
through ptxas where it is on PATH), the checker and the simulator on them,
with a planted mistake and its twin, and misuse refused with the rule and
the fix. The GPU checks the values and the speed:
benchmarks/rows/bench_rows.py."""

import os
import re
import shutil
import sys

import pytest

from pipeline_mlir.kernel import (GlobalPtr, Int32, Kernel, RowRing, Rows, ring_stages,
                                  row_cluster, row_parts, row_plan, row_stages, row_threads)
from pipeline_mlir.kernel import row_ring as ring_mod

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import rmsnorm  # noqa: E402
import row_softmax  # noqa: E402
import rows_host  # noqa: E402
from _example_checks import messages, protocol_warnings, simulate, verify_protocol  # noqa: E402
from _ptxas import registers_and_spills, spill_bytes  # noqa: E402

ASSEMBLER = "ptxas" if shutil.which("ptxas") else "nvjitlink"
BULK = r"cp\.async\.bulk\.shared::cluster\.global\.mbarrier::complete_tx::bytes"


def count(pattern, ptx):
    return len(re.findall(pattern, ptx))


# -- which rows take a ring ------------------------------------------------------------

def test_stages_fit_the_shared_memory_of_one_or_two_rings_per_sm():
    # 96 KiB rings (two CTAs per SM) while a row is at most a third of that...
    assert [row_stages(n) for n in (2048, 8192, 12288, 16384, 24576)] == [4, 4, 4, 3, 2]
    # ...longer rows: one CTA per SM, up to 200 KiB
    assert row_stages(32768) == 3 and row_stages(51200) == 2
    assert row_stages(65536) == 0               # two rows of 128 KiB do not fit
    assert row_stages(16383) == 0               # not a multiple of 16 bytes: no bulk copy
    assert row_stages(16384, "f32") == 3 and row_stages(4096, "f32") == 4
    for n in (8192, 12288, 20000, 32768):
        s = row_stages(n)
        assert s * n * 2 <= ring_mod.MAX_RING


def test_a_cta_per_row_takes_a_ring_from_16_kib_rows():
    def stages(n, dtype="bf16"):
        return ring_stages(Rows(n, dtype, threads=row_threads(n, dtype)))

    assert [stages(n) for n in (2048, 3000, 4096, 6000)] == [0, 0, 0, 0]   # registers
    assert [stages(n) for n in (8192, 12288, 16384, 20000, 32768)] == [4, 4, 3, 2, 3]
    assert stages(4096, "f32") == 4             # 16 KiB of f32
    assert stages(16383) == 0                   # scalar rows: no bulk copy
    assert stages(65536) == 0                   # 1024 threads leave no room for a producer
    assert ring_stages(Rows(16384, threads=1024)) == 0


def test_rows_past_512_threads_of_64_values_come_in_parts():
    assert [row_parts(n) for n in (2048, 16384, 32768)] == [1, 1, 1]
    assert row_parts(16384, "f32") == 1
    assert [row_parts(n) for n in (32784, 40000, 65536)] == [2, 2, 2]
    # a row and a part of the next must fit one CTA's shared memory: 256 KiB
    # do not, and such rows stay in registers
    assert row_parts(131072) == 0 and row_parts(65536, "f32") == 0
    assert row_plan(65536, "f32")[1:] == (1, 0)
    assert row_parts(40001) == 0 and row_parts(32772) == 0     # parts of whole 16-byte vectors
    rows, parts, stages = row_plan(65536)
    assert (rows.n, rows.threads, rows.count, parts, stages) == (32768, 512, 64, 2, 3)
    # a row and a part of the next, whatever the depth asked for
    assert row_plan(65536, most=2)[2] == 3 and row_plan(40000, most=2)[1:] == (2, 3)
    # no ring, no parts: the whole row in registers
    rows, parts, stages = row_plan(65536, stages=0)
    assert (rows.n, rows.threads, parts, stages) == (65536, 1024, 1, 0)
    rows, parts, stages = row_plan(40001)
    assert (rows.n, parts, stages) == (40001, 1, 0)


def test_row_threads_never_picks_a_cta_of_1024_while_512_hold_the_row():
    """About 32 values per thread over at most 512 threads; up to 64 before
    1024 threads (measured slow: rows.py's notes)."""
    assert [row_threads(n) for n in (2048, 3000, 4096, 8192, 12288, 16384, 32768)] == \
        [32, 128, 128, 256, 512, 512, 512]
    assert row_threads(40000) == 1024 and row_threads(65536) == 1024
    for n in range(2049, 32769, 997):           # ragged lengths, any vector width
        t = row_threads(n)
        assert t <= 512 and Rows(n, threads=t).count <= 64, n


# -- the kernels -------------------------------------------------------------------------

def compiled_ptx(k):
    ptx = k.to_ptx()
    cubin = k.compile(assembler=ASSEMBLER)
    return ptx, cubin


def _spills(k):
    return spill_bytes(k.to_ptx()) if ASSEMBLER == "ptxas" else None


@pytest.mark.parametrize("n", [8192, 20000, 32768])
def test_softmax_ring_kernel_instructions(n):
    k = row_softmax.build(n, cluster=1)
    rows, stages = k.rows, k.stages
    assert stages == row_stages(n) and k.block_dim[0] == rows.threads + 32
    ptx, _ = compiled_ptx(k)
    # one bulk copy of the whole row per row, by the producer; no global load of it
    assert count(BULK, ptx) == 1 and count(r"ld\.global", ptx) == 0
    assert re.search(rf"mov\.b32\s+%r\d+, {n * 2};", ptx)          # its byte count
    # the row out of the stage, one ld.shared.v4 per chunk (+ the block reductions' loads)
    warps = rows.threads // 32
    assert count(r"ld\.shared\.v4", ptx) == rows.chunks + 2 * (warps // 4)
    assert count(r"st\.global[.\w]*\.v4", ptx) == rows.chunks
    # the reductions sync the row's threads only: bar.sync id, threads
    assert count(rf"bar\.sync\s+\d+, {rows.threads};", ptx) == 4
    assert count(r"bar\.sync\s+0;", ptx) == 1                      # the pipeline's init
    assert count(r"ex2\.approx", ptx) == rows.count
    assert k.smem_bytes >= stages * n * 2
    assert _spills(k) in (None, 0)


@pytest.mark.parametrize("n,stream", [(40000, None), (65536, None), (24576, True)])
def test_softmax_streamed_reads_the_row_twice(n, stream):
    """In parts (or asked for): the online max and
    sum in one pass over shared memory (an ex2 per value and one per chunk
    for the rescale), then the output (an ex2 per value); two block
    reductions (the max, the rescaled sums)."""
    k = row_softmax.build(n, stream=stream, cluster=1)
    rows, parts = k.rows, k.parts
    assert k.stream and (parts > 1 or stream)
    ptx, _ = compiled_ptx(k)
    assert count(BULK, ptx) == parts and count(r"ld\.global", ptx) == 0
    warps = rows.threads // 32
    assert count(r"ld\.shared\.v4", ptx) == 2 * parts * rows.chunks + 2 * (warps // 4)
    assert count(r"st\.global[.\w]*\.v4", ptx) == parts * rows.chunks
    assert count(r"ex2\.approx", ptx) == parts * (2 * rows.count + rows.chunks) + 1
    assert count(rf"bar\.sync\s+\d+, {rows.threads};", ptx) == 4
    assert _spills(k) in (None, 0)


def test_rmsnorm_in_parts_loads_the_weight_of_each_part():
    k = rmsnorm.build(65536)
    rows = k.rows
    ptx, _ = compiled_ptx(k)
    assert count(r"ld\.global[.\w]*\.v4", ptx) == 2 * rows.chunks        # the weight, once
    assert count(BULK, ptx) == 2 and k.stages == 3
    assert _spills(k) in (None, 0)


def test_rmsnorm_ring_reads_the_row_twice_from_shared_memory():
    """x is read for the sum of squares and again for the output: it need
    not stay in registers across the reduction."""
    k = rmsnorm.build(16384)
    rows = k.rows
    ptx, _ = compiled_ptx(k)
    warps = rows.threads // 32
    assert count(r"ld\.shared\.v4", ptx) == 2 * rows.chunks + warps // 4
    assert count(r"ld\.global[.\w]*\.v4", ptx) == rows.chunks        # the weight, once
    assert count(BULK, ptx) == 1
    assert count(rf"bar\.sync\s+\d+, {rows.threads};", ptx) == 2
    assert _spills(k) in (None, 0)


def test_meta_records_the_ring():
    k = row_softmax.build(16384)
    assert rows_host.meta_of(k.rows, k) == {"n": 16384, "dtype": "bf16", "threads": 512,
                                            "rows_per_cta": 1, "block": 544, "stages": 3,
                                            "parts": 1}
    k = row_softmax.build(65536, cluster=1)      # the launcher checks the whole row's length
    assert rows_host.meta_of(k.rows, k) == {"n": 65536, "dtype": "bf16", "threads": 512,
                                            "rows_per_cta": 1, "block": 544, "stages": 3,
                                            "parts": 2}
    k = row_softmax.build(65536)                 # four slices of 16384 over a cluster
    assert rows_host.meta_of(k.rows, k) == {"n": 65536, "dtype": "bf16", "threads": 512,
                                            "rows_per_cta": 1, "block": 544, "stages": 3,
                                            "parts": 1, "cluster": 4}
    k = rmsnorm.build(16384, stages=0)
    assert rows_host.meta_of(k.rows, k)["stages"] == 0 and k.block_dim[0] == 512


# -- rows over a cluster ------------------------------------------------------------------

def test_rows_past_48_kib_split_over_a_cluster():
    # up to 48 KiB: one CTA per row; past it the fewest CTAs (2, 4) whose
    # slices are at most 40 KiB of whole 16-byte vectors
    assert [row_cluster(n) for n in (4096, 20000, 24576)] == [1, 1, 1]
    assert [row_cluster(n) for n in (24584, 32768, 40000, 49152, 65536, 81920)] == \
        [1, 2, 2, 4, 4, 4]
    assert row_cluster(32776) == 1 and row_cluster(40001) == 1      # slices not of 16 bytes
    assert row_cluster(131072) == 1             # slices of 64 KiB: one CTA, in parts
    assert row_cluster(16384, "f32") == 2 and row_cluster(65536, "f32") == 1
    # the softmax takes the rule by default; the slice's plan is a 16 KiB..40 KB row's
    k = row_softmax.build(32768)
    assert (k.cluster, k.rows.n, k.parts, k.stages, k.stream) == (2, 16384, 1, 3, False)
    assert k.cluster_dim == (2, 1, 1)
    assert row_softmax.build(32768, stages=3).cluster == 1          # a plan asked for: none
    # no .minnctapersm: ptxas picks 56 registers anyway (two CTAs per SM),
    # and with min_ctas_per_sm=2 the same kernel ran at 0.83 of copy, 0.92
    # without (benchmarks/rows/results/h200-run4)
    assert k.min_ctas_per_sm is None and ".minnctapersm" not in k.to_ptx()


@pytest.mark.parametrize("n,cluster", [(32768, 2), (65536, 4)])
def test_cluster_softmax_instructions(n, cluster):
    """Each CTA bulk-copies its slice (at its rank's offset) and stores it;
    per row two exchanges (the max, the sum): one arrive that expects the
    other CTAs' 4 bytes, one st.async to each other CTA, a wait; the
    cluster synchronised once after the barriers' init and once before
    exit; 56 registers at most, so two CTAs share an SM."""
    k = row_softmax.build(n)
    rows, others = k.rows, cluster - 1
    assert k.cluster == cluster and rows.n == n // cluster
    ptx, _ = compiled_ptx(k)
    assert count(BULK, ptx) == 1 and count(r"ld\.global", ptx) == 0
    assert re.search(rf"mov\.b32\s+%r\d+, {rows.n * 2};", ptx)     # a slice per copy
    assert count(r"%cluster_ctarank", ptx) >= 1
    assert count(r"st\.global[.\w]*\.v4", ptx) == rows.chunks
    # the two exchanges' arrives, each expecting the other CTAs' 4 bytes (and
    # the ring's own arrive for the slice's bulk copy)
    armed = re.findall(r"mbarrier\.arrive\.expect_tx\.shared\.b64 %rd\d+, \[%r\d+\], (%r\d+);",
                       ptx)
    tx = [int(v) for r in armed for v in re.findall(rf"mov\.[bu]32\s+{re.escape(r)}, (\d+);", ptx)]
    assert sorted(tx) == sorted([4 * others, 4 * others, rows.n * 2]), tx
    st_async = r"st\.async\.shared::cluster\.mbarrier::complete_tx::bytes\.f32"
    assert count(st_async, ptx) == 2 * others
    assert count(r"mapa\.shared::cluster\.u32", ptx) == 4 * others
    assert count(r"barrier\.cluster\.arrive;", ptx) == 2
    assert count(r"fence\.mbarrier_init\.release\.cluster", ptx) >= 1
    if ASSEMBLER == "ptxas":
        regs, spills = registers_and_spills(ptx)
        assert spills == 0 and regs <= 56, regs


def test_cluster_misuse_names_the_rule():
    rows = Rows(16384, threads=512)
    k = Kernel("ring_cluster_misuse", block_dim=544, params={"x": GlobalPtr()})
    with k, pytest.raises(ValueError, match=r"needs the kernel's cluster_dim=\(2, 1, 1\)"):
        RowRing(rows, k, 3, cluster=2, exchanges=2)
    k = Kernel("ring_cluster_misuse2", block_dim=544, cluster_dim=2, params={"x": GlobalPtr()})
    with k, pytest.raises(ValueError, match="needs exchanges >= 1"):
        RowRing(rows, k, 3, cluster=2)


# -- rows out through their stage (a bulk store; off by default) -------------------------

def test_bulk_store_kernel_and_what_the_simulator_says(monkeypatch):
    """``store="bulk"``: the consumers write the row's output over the row in
    its stage (each thread its own values), fence it for the async proxy and
    release; the producer bulk-copies the stage out before reloading it
    (and the last stages after its tail), waiting until the copy has read
    the stage (``cp.async.bulk.wait_group.read 0``) before its next load
    into it. Measured on an H200 it was no steady gain
    (benchmarks/rows/results/h200-run4): off by default. The simulator
    checks the in-place writes byte by byte against the other warps' reads
    of the stage (not as one buffer) and passes it; without the wait, the
    load into the stage while the bulk store may still read it is found."""
    k = row_softmax.build(16384, store="bulk")
    ptx, _ = compiled_ptx(k)
    assert count(r"st\.global", ptx) == 0 and count(r"st\.shared\.v4", ptx) == k.rows.chunks
    # in the loop before each reload, and after the tail for each stage
    assert count(r"cp\.async\.bulk\.global\.shared::cta\.bulk_group", ptx) == 1 + k.stages
    assert count(r"cp\.async\.bulk\.wait_group\.read\s+0;", ptx) == 1 + k.stages
    assert count(r"fence\.proxy\.async\.shared::cta", ptx) == 1
    text = str(k.module)
    assert verify_protocol(text) == []
    (report,) = simulate(text, schedules=2, args={2: 2 * k.stages + 1}).values()
    assert report.ok, messages(report)
    assert row_softmax.build(16384).store == "global"
    # The store out without its wait (commit only): the next load into the stage races it.
    from pipeline_mlir.pipeline import TmaStoreFence
    monkeypatch.setattr(TmaStoreFence, "arrive_and_wait", TmaStoreFence.arrive)
    bad = str(row_softmax.build(16384, store="bulk").module)
    assert "pipeline.bulk_group.wait" in text and "pipeline.bulk_group.wait" not in bad
    (report,) = simulate(bad, schedules=1, args={2: 2 * k.stages + 1}).values()
    found = messages(report)
    assert set(found) == {"async-read"}, found
    assert ("runs pipeline.copy.bulk on stage 0 of pipeline 'row ring' while "
            "nvvm.cp.async.bulk.global.shared.cta may still read that stage") in found["async-read"]


# -- the checker and the simulator -------------------------------------------------------

CASES = [(row_softmax, 8192, None), (row_softmax, 20000, None), (rmsnorm, 16384, None),
         (row_softmax, 3000, 2),       # a ragged last chunk and a two-stage ring
         (row_softmax, 65536, 3), (rmsnorm, 40000, None),        # rows in parts
         (row_softmax, 40000, None)]   # a cluster's slices (its exchange goes unmodelled)


@pytest.mark.parametrize("module,n,stages", CASES,
                         ids=lambda c: getattr(c, "__name__", str(c)))
def test_ring_kernels_check_and_simulate_clean(module, n, stages):
    """More rows than stages (the ring wraps around twice) in one CTA."""
    k = module.build(n, stages=stages)
    text = str(k.module)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    m_arg = 2 if module is row_softmax else 3
    (report,) = simulate(text, schedules=3, args={m_arg: 2 * k.stages + 1}).values()
    assert report.ok and report.schedules == 3, report


def _planted(plant):
    """A softmax-like ring kernel with ``plant``: the reductions' barrier
    counting the producer warp, or a consumer that never releases."""
    from pipeline_mlir.pipeline import NamedBarrier, PipelineUserType, make_pipeline_state

    rows = Rows(4096, "bf16", threads=128)
    k = Kernel(f"ring_{plant}", block_dim=RowRing.block_threads(rows),
               params={"src": GlobalPtr(), "dst": GlobalPtr(), "m": Int32()})
    with k:
        src, dst, m = k.args
        ring = RowRing(rows, k, 2)
        if plant == "barrier":
            ring.reductions = NamedBarrier(num_threads=k.block_dim[0])
        ring.produce(src, m)
        with ring.consumers():
            if plant == "release":
                state = make_pipeline_state(PipelineUserType.Consumer, 2)
                for row, _ in k.range(k.block_idx(), m, k.grid_dim(), carry=[state]):
                    ring.pipe.consumer_wait(state)
                    x = rows._load_at(ring.buffer.stage(state.index, ring.row_bytes), 0, None,
                                      0.0, "bf16", rows.thread(k))
                    rows.store(x * x.sum(), dst, row)
                    state.advance()
            else:
                for row, stage in ring.rows(m):
                    x = stage.load()
                    rows.store(x * x.sum(), dst, row)
    return str(k.module)


def test_the_planted_twin_is_clean():
    text = _planted("none")
    assert verify_protocol(text) == []
    (report,) = simulate(text, schedules=2, args={2: 5}).values()
    assert report.ok


def test_a_reduction_barrier_counting_the_producer_is_caught():
    text = _planted("barrier")
    errors = verify_protocol(text)
    assert errors and "waits for 160 threads but only 128 (warps 0-3) reach it" in errors[0]
    (report,) = simulate(text, schedules=2, args={2: 5}).values()
    assert not report.ok and "named barrier" in messages(report)["deadlock"]


def test_a_consumer_that_never_releases_is_caught():
    text = _planted("release")
    errors = verify_protocol(text)
    assert errors and "waits on 1 stage but releases 0" in errors[0]
    (report,) = simulate(text, schedules=2, args={2: 5}).values()
    assert not report.ok and "producer.acquire" in messages(report)["deadlock"]


# -- misuse ------------------------------------------------------------------------------

def test_misuse_names_the_rule_and_the_fix():
    def kernel(rows, block):
        return Kernel("ring_misuse", block_dim=block, params={"x": GlobalPtr()})

    rows = Rows(1024)                                   # a warp per row
    k = kernel(rows, 128)
    with k, pytest.raises(ValueError, match="a warp per row holds its row in registers"):
        RowRing(rows, k)
    rows = Rows(4100, threads=128)                      # 8200 bytes: not a multiple of 16
    k = kernel(rows, 160)
    with k, pytest.raises(ValueError, match=r"multiple of 16 bytes.*row_stages\(4100, 'bf16', 1\) = 0"):
        RowRing(rows, k)
    rows = Rows(4096, threads=128)
    k = kernel(rows, 128)
    with k, pytest.raises(ValueError, match=r"needs block_dim=160 \(128 consumers and a producer"):
        RowRing(rows, k)
    k = kernel(rows, 160)
    with k, pytest.raises(ValueError, match="and at most 204800 bytes"):
        RowRing(rows, k, stages=40)
    k = kernel(rows, 160)
    with k, pytest.raises(ValueError, match="store must be one of"):
        RowRing(rows, k, 2, store="tma")
