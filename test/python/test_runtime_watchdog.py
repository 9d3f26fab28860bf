"""Deviceless: the watchdog record contract, its messages, and the host
deadline."""

import os
import re
import sys
import types

import pytest

from pipeline_mlir import runtime as rt
from pipeline_mlir.runtime import _driver, watchdog

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_record_round_trip_and_message():
    raw = watchdog.encode_record(pipeline_id=0, role=1, stage=2, phase=1, block=(3, 0, 0),
                                 warp=4, elapsed_us=2_000_123)
    assert len(raw) == watchdog.RECORD_BYTES == 64
    assert raw[:4] == b"GODW"  # 0x57444F47 little-endian
    rec = watchdog.decode_record(raw)
    assert rec == rt.WatchdogRecord(0, 1, 2, 1, (3, 0, 0), 4, 1, 2_000_123)
    assert rec.message(["ab"]) == ("consumer_wait on pipeline 'ab' stage 2 phase 1 timed out "
                                   "in block (3,0,0) warp 4")
    assert rec.message(["ab"], kernel="gemm").startswith("kernel 'gemm': consumer_wait")


@pytest.mark.parametrize("pid,role,names,text", [
    (5, 0, ["ab"], "producer_acquire on pipeline #5 stage"),
    (-1, 2, [], "order_wait on an unnamed pipeline stage"),
    (1, 0, ["ab", "epi"], "producer_acquire on pipeline 'epi' stage"),
])
def test_message_variants(pid, role, names, text):
    rec = watchdog.decode_record(watchdog.encode_record(pid, role, 0, 0, (0, 1, 2), 0))
    assert rec.message(names).startswith(text)
    assert rec.message(names).endswith("in block (0,1,2) warp 0")


def test_empty_and_malformed_buffers():
    assert watchdog.decode_record(b"\0" * 64) is None
    with pytest.raises(ValueError, match="not the magic 0x57444f47"):
        watchdog.decode_record(watchdog.encode_record(0, 0, 0, 0, (0, 0, 0), 0, magic=0x50495045))
    with pytest.raises(ValueError, match="unknown role 7"):
        watchdog.decode_record(watchdog.encode_record(0, 7, 0, 0, (0, 0, 0), 0))
    with pytest.raises(ValueError, match="holds 8 bytes"):
        watchdog.decode_record(b"\0" * 8)


def test_names_global_decoding():
    assert watchdog.decode_names(b"ab\0epi\0\0\0") == ["ab", "epi"]
    assert watchdog.decode_names(b"\0\0") == []


def test_fault_error_messages():
    rec = watchdog.decode_record(watchdog.encode_record(0, 0, 0, 0, (7, 0, 0), 0))
    err = watchdog.fault_error("kernel launch", 719, "CUDA_ERROR_LAUNCH_FAILED", "k", rec, ["ab"],
                               "grid (8, 1, 1), block (64, 1, 1), smem 0 B")
    assert isinstance(err, rt.PipelineWatchdogError) and isinstance(err, rt.KernelFaultError)
    assert err.record is rec and err.code == 719
    assert ("kernel 'k': producer_acquire on pipeline 'ab' stage 0 phase 0 timed out in block "
            "(7,0,0) warp 0 (device watchdog; grid (8, 1, 1)") in str(err)
    assert "context is unusable" in str(err)
    plain = watchdog.fault_error("kernel launch", 700, "CUDA_ERROR_ILLEGAL_ADDRESS", "k", None,
                                 [], "grid (1, 1, 1)")
    assert type(plain) is rt.KernelFaultError and "CUDA_ERROR_ILLEGAL_ADDRESS" in str(plain)


class _FakeDriver(types.SimpleNamespace):
    """cuEventQuery answering from a script: 'busy' forever or an error."""

    def __init__(self, answers):
        super().__init__(CUresult=types.SimpleNamespace(CUDA_ERROR_NOT_READY=600))
        self.answers = list(answers)

    def cuEventQuery(self, event):
        return (self.answers.pop(0) if len(self.answers) > 1 else self.answers[0],)

    def cuGetErrorName(self, code):
        return (0, b"CUDA_ERROR_LAUNCH_FAILED")


@pytest.fixture
def fake_driver(monkeypatch):
    def install(answers):
        drv = _FakeDriver(answers)
        monkeypatch.setattr(_driver, "_cuda", drv)
        return drv

    return install


def test_host_deadline(fake_driver):
    fake_driver([600])  # never ready
    desc = ("spin", "grid (1, 1, 1), block (64, 1, 1), smem 0 B")
    with pytest.raises(rt.KernelTimeoutError) as e:
        watchdog.wait_event(object(), 0.05, lambda: desc)
    assert str(e.value).startswith("kernel 'spin' did not finish within 0.1 s (grid (1, 1, 1), "
                                   "block (64, 1, 1), smem 0 B)")
    assert "cannot be reused" in str(e.value)


def test_wait_reports_device_errors_and_success(fake_driver):
    fake_driver([600, 600, 719])
    assert watchdog.wait_event(object(), 5, lambda: ("k", "")) == (719, "CUDA_ERROR_LAUNCH_FAILED")
    fake_driver([600, 0])
    assert watchdog.wait_event(object(), 5, lambda: ("k", "")) == (0, None)


def test_reference_kernel_follows_the_contract():
    """test/gpu/ref_kernels.py (the device half used on the GPU) writes the
    layout this module decodes: pointer global, magic last, names global."""
    pytest.importorskip("mlir.ir")
    sys.path.insert(0, os.path.join(ROOT, "test", "gpu"))
    try:
        import builders
        import ref_kernels
    finally:
        sys.path.pop(0)
    import mlir.ir as ir
    import mlir.passmanager as pm

    import pipeline_mlir

    text = ref_kernels.async_copy_kernel("k", producer_phase=0, watchdog=True)
    with pipeline_mlir.make_context(), ir.Location.unknown():
        m = ir.Module.parse(text)
        pm.PassManager.parse("builtin.module(" + builders.UPSTREAM_LOWERING.replace(
            "format=bin", "format=isa").format(chip="sm_90a") + ")").run(m.operation)
        ptx = builders._gpu_binary(m).decode()
    assert re.search(r"\.visible \.global \.align 8 \.u64 __pipeline_watchdog_buffer;", ptx)
    assert ".visible .global .align 1 .b8 __pipeline_watchdog_names[3] = {97, 98" in ptx
    stores = re.findall(r"st\.volatile(?:\.global)?\.b32\s+\[%rd\d+(?:\+(\d+))?\], ([^;]+);", ptx)
    offsets = [int(o or 0) for o, _ in stores]
    # per wait site: words 1..10, then the magic at offset 0, then trap
    assert offsets[:11] == [4 * w for w in range(1, 11)] + [0]
    assert stores[10][1].strip() == str(watchdog.MAGIC)
    assert "membar.sys" in ptx and "trap" in ptx


def test_lowering_follows_the_contract():
    """convert-pipeline-to-nvvm{watchdog=true} on a dialect kernel (the GPU
    suite's pipeline_async) emits what this module decodes: the pointer
    global the runner sets, the names, and at every wait (producer acquire,
    producer tail, consumer wait) words 1..10 then the magic, then trap."""
    pytest.importorskip("mlir.ir")
    sys.path.insert(0, os.path.join(ROOT, "test", "gpu"))
    try:
        import dialect_kernels
    finally:
        sys.path.pop(0)
    import mlir.ir as ir

    import pipeline_mlir
    from pipeline_mlir import compiler

    text = dialect_kernels.pipeline_async("k", producer_phase=0)
    with pipeline_mlir.make_context(), ir.Location.unknown():
        m = ir.Module.parse(text)
        ptx, plain = (compiler.to_ptx(m, watchdog=on, verify_protocol=False, use_cache=False)
                      for on in (True, False))
    ptx, plain = (p.decode() if isinstance(p, bytes) else p for p in (ptx, plain))
    assert re.search(r"\.visible \.global \.align 8 \.u64 __pipeline_watchdog_buffer;", ptx)
    assert re.search(r"\.global \.align 4 \.u32 __pipeline_watchdog_claim;", ptx)
    assert ".visible .global .align 1 .b8 __pipeline_watchdog_names[3] = {97, 98" in ptx
    assert re.search(r"atom\.global\.exch\.b32\s+%r\d+, \[__pipeline_watchdog_claim\], 1;", ptx)
    # The kernel, then the forensic dump it calls (defined after it).
    dump_at = ptx.index(".func __pipeline_watchdog_dump(")
    kernel, dump = ptx[ptx.index(".entry"):dump_at], ptx[dump_at:]
    stores = re.findall(r"st\.volatile(?:\.global)?\.b32\s+\[%rd\d+(?:\+(\d+))?\], ([^;]+);",
                        kernel)
    # six wait sites: producer acquire, producer tail (one per stage), consumer wait
    assert len(stores) == 6 * 11, stores
    # each winner calls the dump between word 10 and the magic
    assert len(re.findall(r"call\.uni\s+__pipeline_watchdog_dump", kernel)) == 6
    assert re.search(r"st\.volatile(?:\.global)?\.b32\s+\[%rd\d+\+40\], [^;]+;\s*"
                     r"(?:[^\n]*\n){0,8}?\s*call\.uni\s+__pipeline_watchdog_dump", kernel)
    # the dump: words 11..13, the wait table (16..47), the samples (48..62)
    # and 9 words per barrier from word 64 (4 stages: 8 barriers; the last
    # four of each, the ledger)
    offsets = {int(o or 0) for o, _ in re.findall(
        r"st\.volatile(?:\.global)?\.b32\s+\[%rd\d+(?:\+(\d+))?\], ([^;]+);", dump)}
    assert {44, 48, 52} | {4 * w for w in range(16, 63)} | {
        256 + 4 * w for w in range(9 * 8)} == offsets, sorted(offsets)
    assert dump.count("mbarrier.test_wait.parity.shared.b64") == 2 * 8
    # each barrier and each of the 5 samples is read through expect_tx(1),
    # arrive and pending_count, never by a load of its word
    assert dump.count("mbarrier.pending_count.b64") == 8 + 5
    assert not re.search(r"ld(?:\.volatile)?\.shared\.b64", dump)
    for site in range(6):
        words = stores[11 * site:11 * (site + 1)]
        assert [int(o or 0) for o, _ in words] == [4 * w for w in range(1, 11)] + [0]
        assert words[0][1].strip() == "0"                           # pipeline id of 'ab'
        assert words[8][1].strip() == str(watchdog.RECORD_VERSION)  # word 9
        assert words[10][1].strip() == str(watchdog.MAGIC)
    # the producer waits report role 0, the consumer wait role 1
    assert sorted(stores[11 * s + 1][1].strip() for s in range(6)) == ["0"] * 5 + ["1"]
    assert ptx.count("membar.sys") == 12 and ptx.count("trap;") >= 6
    # the winner releases the losers (claim = 2), who wait for it before trapping
    assert len(re.findall(r"atom\.global\.exch\.b32\s+%r\d+, \[__pipeline_watchdog_claim\], 2;",
                          ptx)) == 6
    assert re.search(r"ld\.volatile\.global\.[bu]32\s+%r\d+, \[__pipeline_watchdog_claim\];", ptx)
    assert "globaltimer" not in plain and "__pipeline_watchdog" not in plain
