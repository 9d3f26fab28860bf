"""The three planted hangs of test/gpu/planted_hangs.py without a GPU: the
simulator deadlocks on each with the waits that the GPU's forensic report
must show (planted_hangs.HANGS), each lowers with the watchdog to an sm_90a
cubin whose PTX carries the forensic dump, and the bundle entry launches
them as the GPU suite's copy kernels are launched."""

import os
import sys

import pytest

from pipeline_mlir.kernel import has_pipeline_to_cubin

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "gpu")))
import planted_hangs as ph  # noqa: E402

needs_lowering = pytest.mark.skipif(not has_pipeline_to_cubin(),
                                    reason="pipeline-to-cubin is not registered")

VERBS = {"producer_acquire": ("producer", "producer.acquire"),
         "consumer_wait": ("consumer", "consumer.wait")}


@pytest.mark.parametrize("name", sorted(ph.HANGS))
def test_simulator_deadlocks_like_the_gpu_should(name):
    """The simulator's deadlock names, per warp, the wait that the GPU's
    wait table must show (planted_hangs.HANGS: the same expectations
    run_forensics.py checks on the H100)."""
    rep = ph.simulate(name)
    assert not rep.ok and set(rep.first) == {"deadlock"}, rep.first
    msg = str(rep.first["deadlock"][1])
    for warp, (verb, side, stage, phase) in ph.HANGS[name][2].items():
        role, op = VERBS[verb]
        assert (f"{role} warp {warp} of CTA 0 waits on pipeline 'ab' {side} barrier stage "
                f"{stage} phase {phase} in {op}") in msg, msg
    if name == "hang_tx_bytes":
        assert (f"has 1 of 1 arrivals, {ph.TX_EXTRA} tx bytes outstanding (armed "
                f"{ph.TILE + ph.TX_EXTRA}, delivered {ph.TILE})") in msg, msg


@needs_lowering
@pytest.mark.parametrize("name", sorted(ph.HANGS))
def test_planted_hang_lowers_with_the_dump(name):
    """ptxas (or nvJitLink) accepts the sm_90a kernel with the watchdog and
    its dump; the cubin carries the symbols the runner needs."""
    k, fn, names = ph.compile_hang(name)
    assert names == ["ab"]
    image = bytes(fn)
    for symbol in (b"__pipeline_watchdog_buffer", b"__pipeline_watchdog_names"):
        assert symbol in image, symbol


@needs_lowering
def test_planted_hang_ptx_has_the_dump():
    """The PTX of one planted hang: wait-table stores in shared memory, the
    dump function with its probes and calibration, the exit mark."""
    import mlir.ir as ir
    import mlir.passmanager as pm

    import pipeline_mlir

    k = ph.hang_tx_bytes()
    with pipeline_mlir.make_context(), ir.Location.unknown():
        module = ir.Module.parse(str(k.module))
        pm.PassManager.parse("builtin.module(pipeline-to-cubin{chip=sm_90a format=isa "
                             "verify-protocol=false watchdog=true})").run(module.operation)
        from mlir.dialects import gpu
        ptx = next(bytes(gpu.ObjectAttr(o).object).decode()
                   for op in module.body.operations if op.operation.name == "gpu.binary"
                   for o in ir.ArrayAttr(op.attributes["objects"]))
    assert ".shared .align 8 .b8 __pipeline_watchdog_warps[128]" in ptx
    assert ".func __pipeline_watchdog_dump(" in ptx
    assert ptx.count("mbarrier.test_wait.parity.shared.b64") >= 2 * 8  # 8 barriers x 2
    assert "mbarrier.complete_tx" in ptx and "mbarrier.expect_tx" in ptx
    # The 4 empty barriers and 5 calibration samples, each read through
    # arrive's token; the 4 full barriers count tx bytes and are not arrived
    # on (an extra arrive faults when every arrival is in: the H100 run).
    assert ptx.count("mbarrier.pending_count.b64") == 4 + 5
    assert "atom.shared.or.b32" in ptx
    # The ledger: acquire (+1 arrival, +tx announced), tma_load (+bytes
    # issued), consumer_release (+1 arrival): one shared atomic add each.
    assert ".shared .align 8 .b8 __pipeline_watchdog_ledger[128]" in ptx  # 8 barriers x 16 B
    assert ptx.count("atom.shared.add.u32") == 4


def test_manifest_entries_launch_like_the_copy_kernels():
    """An entry copies its kind's launch (grid, arguments) and carries the
    expected waits that run_forensics.py checks."""
    import builder_kernels

    for name, (build, kind, expect) in ph.HANGS.items():
        k = build()

        class Fn:
            def metadata(self):
                return {"name": k.name}
        e = ph.manifest(name, k, Fn(), ["ab"])
        base = builder_kernels.manifest_entry(kind, k, ph.MIB, grid=ph.GRID)
        assert e["grid"] == [ph.GRID, 1, 1] and e["args"] == base["args"]
        assert e["check"] == "forensics" and e["watchdog_names"] == ["ab"]
        assert e["expect_waits"] == {str(w): list(v) for w, v in expect.items()}
        assert e["expect_ledger"] == {k: list(v) for k, v in ph.LEDGERS[name].items()}
        # every waited barrier has its expected ledger
        for role, side, stage, _ in expect.values():
            assert f"{side}[{stage}]" in e["expect_ledger"]
        # more tiles per CTA than stages: the missing release must bite
        ntiles = next(a["value"] for a in e["args"] if a["role"] == "scalar")
        assert ntiles > ph.STAGES


def _child_output(waits, parities, ok=True, pending_ok=True, ledgers=None, message="m"):
    """What gpu_child.py forensics prints, for a made-up dump whose wait
    table holds ``waits`` (warp -> (role, stage, phase)) and whose 'ab'
    barriers are in the phase ``parities[i]`` (full[0..4), empty[0..4))."""
    import base64

    from pipeline_mlir.runtime import forensics as fx
    from pipeline_mlir.runtime import watchdog as wd

    table = [fx.wait_word(role, 0, stage, phase) for _, (role, stage, phase) in sorted(waits.items())]
    ledgers = ledgers or {}
    bars = [(0, i, ph.STAGES, False, True, 0b10 if p == 0 else 0b01, 0, 1, ledgers.get(i))
            for i, p in enumerate(parities)]
    head = wd.encode_record(0, 1, 0, 0, (0, 0, 0), 1, version=wd.RECORD_VERSION)
    samples = [(0, c[1] + (0 if pending_ok else 1)) for c in fx.CALIBRATION]
    buf = fx.encode_dump(head, table, samples, bars)
    return {"ok": ok, "buffer_b64": base64.b64encode(buf).decode(), "message": message}


def test_run_forensics_check_accepts_the_expected_dump_only():
    """run_forensics.check (what the H100 run reports) on made-up dumps: the
    expected waits with the probes agreeing pass; a wrong phase, a warp not
    waiting, probes naming another phase, or pending_count disagreeing with
    the calibration samples are each reported."""
    from run_forensics import check

    entry = {"expect_waits": {"0": ["producer_acquire", "empty", 0, 0],
                              "1": ["consumer_wait", "full", 0, 1]}}
    good = _child_output({0: (0, 0, 0), 1: (1, 0, 1)}, [1, 0, 0, 0, 0, 0, 0, 0])
    assert check(entry, good) == []
    wrong_phase = _child_output({0: (0, 0, 0), 1: (1, 0, 0)}, [1, 0, 0, 0, 0, 0, 0, 0])
    assert check(entry, wrong_phase) == [
        "warp 1: expected consumer_wait full[0] phase 1, got ('consumer_wait', 'full', 0, 0)"]
    probes_disagree = _child_output({0: (0, 0, 0), 1: (1, 0, 1)}, [0] * 8)
    assert check(entry, probes_disagree) == [
        "warp 1: full[0] probes say phase parity 0 in progress, the warp waits on 1"]
    one_warp = _child_output({0: (0, 0, 0)}, [1, 0, 0, 0, 0, 0, 0, 0])
    (problem,) = check(entry, one_warp)
    assert problem.startswith("warp 1: expected waiting (consumer_wait on full[0] phase 1)")
    bad_count = _child_output({0: (0, 0, 0), 1: (1, 0, 1)}, [1, 0, 0, 0, 0, 0, 0, 0],
                              pending_ok=False)
    assert check(entry, bad_count) == [
        "mbarrier.pending_count disagrees with the calibration samples' known counts"]
    assert check(entry, {"ok": False, "exc": "KernelTimeoutError", "message": "late"}) == [
        "no forensic report: KernelTimeoutError: late"]


def test_run_forensics_checks_the_ledger_and_the_report_lines():
    """The wrong-tx-bytes entry: the ledger of full[0] and empty[0] must be
    what the planted bug leaves, and the report must name the bytes."""
    from run_forensics import check

    k = ph.hang_tx_bytes()

    class Fn:
        def metadata(self):
            return {"name": k.name}
    entry = ph.manifest("hang_tx_bytes", k, Fn(), ["ab"])
    waits = {0: (0, 0, 0), 1: (1, 0, 0)}
    parities = [0] * 8
    good_ledgers = {0: (1, 1, ph.TILE + ph.TX_EXTRA, ph.TILE), ph.STAGES: (1, 0, 0, 0)}
    text = "\n".join(entry["expect_report"])
    assert check(entry, _child_output(waits, parities, ledgers=good_ledgers, message=text)) == []
    # the copies brought what was announced: the ledger says otherwise
    right_bytes = dict(good_ledgers)
    right_bytes[0] = (1, 1, ph.TILE, ph.TILE)
    assert check(entry, _child_output(waits, parities, ledgers=right_bytes, message=text)) == [
        f"full[0]: expected ledger (count, arrivals, announced, issued) "
        f"(1, 1, {ph.TILE + ph.TX_EXTRA}, {ph.TILE}), the dump has (1, 1, {ph.TILE}, {ph.TILE})"]
    # no ledger at all (a version-3 kernel)
    problems = check(entry, _child_output(waits, parities, message=text))
    assert sorted(problems) == [
        "empty[0]: expected ledger (count, arrivals, announced, issued) (1, 0, 0, 0), "
        "the dump has None",
        f"full[0]: expected ledger (count, arrivals, announced, issued) "
        f"(1, 1, {ph.TILE + ph.TX_EXTRA}, {ph.TILE}), the dump has None"]
    # a report that does not name the bytes
    (problem,) = check(entry, _child_output(waits, parities, ledgers=good_ledgers, message="m")
                       )[:1]
    assert problem.startswith("the report lacks: full[0]: phase parity 0 in progress")


def test_report_of_the_tx_hang_names_the_bytes():
    """forensics.report on the dump the tx hang leaves (its ledgers, the
    unread full barriers) contains the lines run_forensics.py requires."""
    from pipeline_mlir.runtime import forensics as fx
    from pipeline_mlir.runtime import watchdog as wd

    table = [fx.wait_word(0, 0, 0, 0), fx.wait_word(1, 0, 0, 0)]
    full = [(0, i, ph.STAGES, False, True, 0b10, 0, fx.NOT_READ,
             (1, 1, ph.TILE + ph.TX_EXTRA, ph.TILE)) for i in range(ph.STAGES)]
    empty = [(0, ph.STAGES + i, ph.STAGES, False, True, 0b10, 0, 1, (1, 0, 0, 0))
             for i in range(ph.STAGES)]
    head = wd.encode_record(0, 1, 0, 0, (0, 0, 0), 1, version=wd.RECORD_VERSION)
    samples = [(0, c[1]) for c in fx.CALIBRATION]
    rec = wd.decode_record(fx.encode_dump(head, table, samples, full + empty))
    rep = fx.report(rec, ["ab"])
    for line in ph.REPORT_LINES["hang_tx_bytes"]:
        assert line in rep
