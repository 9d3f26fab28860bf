"""The host half of the watchdog's forensic dump (runtime/forensics.py) on
synthetic buffers: pending arrivals from pending_count, the tx field fitted
from the calibration tokens and its fallback to the token, the per-barrier
lines and the wait-for graph."""

import pytest

from pipeline_mlir.runtime import forensics as fx
from pipeline_mlir.runtime import watchdog as wd


def layout(phase_bit, pending_lo, tx_lo, tx_neg):
    """A made-up state-token layout: encode(phase, pending, tx) -> u64."""
    def encode(phase, pending, tx):
        txv = (-tx) % (1 << 21) if tx_neg else tx
        return (phase << phase_bit) | (pending << pending_lo) | (txv << tx_lo)
    return encode


def samples_of(encode):
    """(token, pending_count) of each calibration sample."""
    return [(encode(*c), c[1]) for c in fx.CALIBRATION]


def buffer(warps, barriers, samples, record=(0, 1, 0, 0), warp=1, warp_count=None):
    pid, role, stage, phase = record
    head = wd.encode_record(pid, role, stage, phase, (3, 0, 0), warp, elapsed_us=500_000,
                            version=wd.RECORD_VERSION)
    return fx.encode_dump(head, warps, samples, barriers, warp_count)


W = fx.wait_word
ENC = layout(phase_bit=63, pending_lo=0, tx_lo=32, tx_neg=True)


def ring(enc, states, pid=0, stages=2):
    """Barrier tuples of one pipeline: states[i] = (parity in progress,
    pending, tx) of barrier i (full[0..S), empty[0..S)), as the dump reads
    them: the token carries the dump's own expect_tx byte, pending_count the
    arrivals pending before the dump's arrive."""
    return [(pid, i, stages, False, True, 0b10 if par == 0 else 0b01, enc(par, pend, tx + 1), pend)
            for i, (par, pend, tx) in enumerate(states)]


def test_layout_fit_recovers_the_tx_field():
    dump = fx.decode_dump(buffer([], ring(ENC, [(0, 1, 4112)]), samples_of(ENC)))
    assert fx.Field(32, 20, True) in dump.tx_fields
    assert dump.pending_count_checked is True
    (b,) = dump.barriers
    assert (dump.pending(b), dump.tx(b), b.parity) == (1, 4112, 0)


@pytest.mark.parametrize("enc", [layout(0, 1, 22, False), layout(62, 40, 0, True)])
def test_layout_fit_follows_the_samples(enc):
    """Whatever the (unknown) layout, a field is accepted only where the
    samples put it, and decodes the barriers' tokens with it."""
    dump = fx.decode_dump(buffer([], ring(enc, [(1, 7, 0), (0, 0, 16)]), samples_of(enc)))
    assert [(dump.pending(b), dump.tx(b)) for b in dump.barriers] == [(7, 0), (0, 16)]


def test_no_fit_shows_the_token_and_still_the_pending_count():
    # The same token for different states: no field fits; pending_count right.
    junk = [(0x1234, c[1]) for c in fx.CALIBRATION]
    token = ENC(0, 1, 4113)
    rec = wd.decode_record(buffer([W(1, 0, 0, 0)], ring(ENC, [(0, 1, 4112)]), junk))
    assert rec.dump is not None and rec.dump.tx_fields == []
    rep = fx.report(rec, ["ab"])
    assert (f"full[0]: phase parity 0 in progress, pending arrivals 1, "
            f"tx bytes: unknown (token {token:#018x})") in rep
    assert "tokens shown" in rep
    assert "WARNING" not in rep


def test_pending_count_that_disagrees_with_the_samples_is_flagged():
    bad = [(t, p + 1) for t, p in samples_of(ENC)]
    rec = wd.decode_record(buffer([], ring(ENC, [(0, 1, 0)]), bad))
    assert rec.dump.pending_count_checked is False
    assert "WARNING: mbarrier.pending_count disagrees" in fx.report(rec, ["ab"])


def test_missing_samples_leave_tx_unknown():
    dump = fx.decode_dump(buffer([], ring(ENC, [(0, 1, 0)]), samples_of(ENC)[:3]))
    (b,) = dump.barriers
    assert dump.tx(b) is None and dump.pending(b) == 1
    assert dump.pending_count_checked is None


def test_version_2_dumps_are_not_decoded():
    """Version 2 laid out loads of the mbarrier word (4 words per barrier);
    reading it with the version-3 layout would report nonsense."""
    head = wd.encode_record(0, 1, 0, 0, (3, 0, 0), 1, version=2)
    rec = wd.decode_record(fx.encode_dump(head, [], samples_of(ENC), ring(ENC, [(0, 1, 0)])))
    assert rec.version == 2 and rec.dump is None
    assert "no dump in this record (version 2 kernel" in fx.report(rec)


def test_probes_that_disagree_give_no_phase():
    bars = [(0, 0, 1, False, True, 0b11, ENC(0, 1, 1), 1), (0, 1, 1, False, True, 0b00, ENC(0, 1, 1), 1)]
    dump = fx.decode_dump(buffer([], bars, samples_of(ENC)))
    assert [b.parity for b in dump.barriers] == [None, None]
    rep = fx.report(wd.decode_record(buffer([], bars, samples_of(ENC))), ["ab"])
    assert "phase unknown (probes 0b11)" in rep and "phase unknown (probes 0b00)" in rep


def test_start_phase_deadlock_is_a_cycle():
    """Producer warp 0 waits on empty[0] phase 0, consumer warp 1 on full[0]
    phase 0: each waits for the other."""
    warps = [W(0, 0, 0, 0), W(1, 0, 0, 0)]
    bars = ring(ENC, [(0, 32, 0), (0, 32, 0), (0, 32, 0), (0, 32, 0)])
    rec = wd.decode_record(buffer(warps, bars, samples_of(ENC)))
    rep = fx.report(rec, ["ab"])
    assert ("warp 1 (consumer) waits on 'ab' full[0] phase 0 [phase parity 0 in progress, "
            "pending arrivals 32, tx bytes 0]: producer warp 0 waits "
            "(producer_acquire) on 'ab' empty[0] phase 0") in rep
    assert "warp 0 (producer) waits on 'ab' empty[0] phase 0" in rep
    assert "deadlock cycle: warp 0 -> warp 1 -> warp 0" in rep
    assert "pipeline 'ab' (2 stage(s)):" in rep
    assert "forensic dump of block (3, 0, 0) (the first wait to time out: warp 1, consumer_wait)" in rep


def test_exited_producer_leaves_nobody_to_arrive():
    warps = [W(0, 0, 1, 1, waiting=False, exited=True), W(1, 0, 0, 1)]
    rep = fx.report(wd.decode_record(buffer(warps, ring(ENC, [(1, 32, 0)] * 4),
                                            samples_of(ENC))), ["ab"])
    assert ("warp 1 (consumer) waits on 'ab' full[0] phase 1 [phase parity 1 in progress, "
            "pending arrivals 32, tx bytes 0]: nobody left who arrives on it: "
            "producer warp 0 exited (last passed producer_acquire on 'ab' empty[1] phase 1)") in rep
    assert "deadlock cycle" not in rep


def test_missing_bytes_are_named():
    warps = [W(0, 0, 0, 0), W(1, 0, 0, 0)]
    bars = ring(ENC, [(0, 0, 16), (0, 0, 16), (0, 1, 0), (0, 1, 0)])
    rep = fx.report(wd.decode_record(buffer(warps, bars, samples_of(ENC))), ["ab"])
    assert ("full[0] phase 0 [phase parity 0 in progress, pending arrivals 0, tx bytes 16]: every arrival is in but 16 tx byte(s) never came") in rep


def test_missing_bytes_are_named_without_a_tx_fit():
    """pending_count 0 on a phase in progress: only tx bytes can be missing,
    even when no field of the token gives their number."""
    warps = [W(0, 0, 0, 0), W(1, 0, 0, 0)]
    bars = ring(ENC, [(0, 0, 16), (0, 0, 16), (0, 1, 0), (0, 1, 0)])
    junk = [(0x1234, c[1]) for c in fx.CALIBRATION]
    rep = fx.report(wd.decode_record(buffer(warps, bars, junk)), ["ab"])
    assert ("full[0] phase 0 [phase parity 0 in progress, pending arrivals 0, tx bytes: unknown "
            f"(token {ENC(0, 0, 17):#018x})]: every arrival is in but tx bytes never came") in rep
    # one arrival pending: nothing to say about bytes
    bars = ring(ENC, [(0, 1, 16), (0, 1, 16), (0, 1, 0), (0, 1, 0)])
    assert "never came" not in fx.report(wd.decode_record(buffer(warps, bars, junk)), ["ab"])


def test_warp_table_states():
    warps = [0, W(1, 0, 2, 1, waiting=False), W(0, 0, 0, 0, waiting=False, exited=True),
             fx.MARK_EXITED, W(2, -1, 5, 1)]
    dump = fx.decode_dump(buffer(warps, [], samples_of(ENC)))
    lines = fx.report(wd.decode_record(buffer(warps, [], samples_of(ENC))), ["ab"]).splitlines()
    assert "  warp 0: has not waited on any pipeline barrier" in lines
    assert ("  warp 1: is not in a pipeline wait (last passed consumer_wait on 'ab' full[2] "
            "phase 1)") in lines
    assert "  warp 2: exited (last passed producer_acquire on 'ab' empty[0] phase 0)" in lines
    assert "  warp 3: exited" in lines
    assert "  warp 4: waits (order_wait) on an unnamed pipeline barrier[5] phase 1" in lines
    assert dump.warps[4].pipeline_id == -1
    # ids past the 8-bit field read as unknown, never as another pipeline
    (big,) = fx.decode_dump(buffer([W(1, 300, 0, 0)], [], samples_of(ENC))).warps
    assert big.pipeline_id == -1 and big.waiting


def test_not_created_and_order_pipelines():
    bars = [(0, 0, 1, False, False, 0, 0, 0), (0, 1, 1, False, False, 0, 0, 0),
            (1, 0, 2, True, True, 0b10, ENC(0, 1, 1), 1), (1, 1, 2, True, True, 0b01, ENC(1, 1, 1), 1)]
    rep = fx.report(wd.decode_record(buffer([], bars, samples_of(ENC))), ["ab", "ord"])
    assert "  pipeline 'ab' (1 stage(s)):\n    full[0]: not created in this CTA" in rep
    assert "  pipeline 'ord' (order):\n    barrier[0]: phase parity 0 in progress" in rep
    assert "    barrier[1]: phase parity 1 in progress" in rep


def test_version_1_records_have_no_dump():
    rec = wd.decode_record(wd.encode_record(0, 1, 2, 1, (3, 0, 0), 4))
    assert rec.version == 1 and rec.dump is None


def test_fault_error_appends_the_report():
    rec = wd.decode_record(buffer([W(0, 0, 0, 0), W(1, 0, 0, 0)], ring(ENC, [(0, 32, 0)] * 4),
                                  samples_of(ENC)))
    err = wd.fault_error("kernel launch", 719, "CUDA_ERROR_LAUNCH_FAILED", "k", rec, ["ab"],
                         "grid (8, 1, 1)")
    msg = str(err)
    assert msg.index("consumer_wait on pipeline 'ab' stage 0 phase 0 timed out") < msg.index(
        "deadlock cycle: warp 0 -> warp 1 -> warp 0")


def test_short_buffer_is_refused():
    with pytest.raises(ValueError, match="expected 4096"):
        fx.decode_dump(b"\0" * 64)


# -- the ledger (record version 4) ----------------------------------------------

def tx_ring(full, empty, parity=0, stages=2):
    """Barriers of a TMA pipeline as the dump writes them: the full barriers
    unread (tx barriers: pending word NOT_READ) with ledgers ``full[i]``,
    the empty barriers read (pending 1 of 1) with ledgers ``empty[i]``;
    every phase of parity ``parity`` in progress."""
    probes = 0b10 if parity == 0 else 0b01
    bars = [(0, i, stages, False, True, probes, 0, fx.NOT_READ, led)
            for i, led in enumerate(full)]
    bars += [(0, stages + i, stages, False, True, probes, ENC(parity, 1, 1), 1, led)
             for i, led in enumerate(empty)]
    return bars


def test_ledger_round_trips_and_version_3_still_decodes():
    led = fx.Ledger(count=1, arrivals=7, announced=0xFFFFFFF0, issued=4096)
    dump = fx.decode_dump(buffer([], tx_ring([led], [None]), samples_of(ENC)))
    assert [b.ledger for b in dump.barriers] == [led, None]
    # version 3: five words per barrier, no ledger (e.g. the stored H100 runs)
    head = wd.encode_record(0, 1, 0, 0, (3, 0, 0), 1, version=3)
    v3 = fx.decode_dump(fx.encode_dump(head, [], samples_of(ENC), ring(ENC, [(0, 1, 0), (1, 2, 0)])))
    assert [(b.index, b.pending, b.ledger) for b in v3.barriers] == [(0, 1, None), (1, 2, None)]
    with pytest.raises(ValueError, match="no ledger"):
        fx.encode_dump(head, [], [], tx_ring([led], []))


@pytest.mark.parametrize("arrivals,count,parity,want", [
    (0, 32, 0, (0, 0, 32)),      # nothing arrived yet
    (37, 32, 1, (1, 5, 27)),     # phase 0 done, 5 of phase 1 in
    (64, 32, 0, (2, 0, 32)),     # two phases done, the third (parity 0) waits for all
    (64, 32, 1, (1, 32, 0)),     # all of phase 1 in, still in progress: held by tx bytes
    (1, 1, 0, (0, 1, 0)),        # the tx hang: the one arrival in, bytes missing
    (1, 1, 1, (1, 0, 1)),        # phase 0 completed
])
def test_ledger_phase_from_arrivals_and_probes(arrivals, count, parity, want):
    (b,) = fx.decode_dump(buffer([], tx_ring([(count, arrivals, 0, 0)], [], parity=parity),
                                 samples_of(ENC))).barriers
    lp = fx.ledger_phase(b)
    assert (lp.phase, lp.arrived, lp.pending) == want and lp.note == ""


def test_ledger_phase_undecided_or_contradicted():
    """Without a phase from the probes a whole number of phases is
    ambiguous; a partial phase whose parity the probes contradict means
    arrivals the ledger did not count."""
    bar = (0, 0, 1, False, True, 0b11, 0, fx.NOT_READ, (1, 2, 0, 0))
    (b,) = fx.decode_dump(buffer([], [bar], samples_of(ENC))).barriers
    lp = fx.ledger_phase(b)
    assert lp.phase is None and "phase 2 with none in, or phase 1 with all in" in lp.note
    (b,) = fx.decode_dump(buffer([], tx_ring([(32, 33, 0, 0)], [], parity=0),
                                 samples_of(ENC))).barriers
    lp = fx.ledger_phase(b)
    assert lp.phase is None and "arrivals came from outside the ledger" in lp.note


def test_wrong_tx_bytes_are_named_from_the_ledger():
    """The planted hang's shape: every full barrier armed with 4112 B and
    given a 4096 B copy; the full barriers are not read (a tx barrier), so
    only the ledger says why full[0] never completes."""
    warps = [W(0, 0, 0, 0), W(1, 0, 0, 0)]
    full = [(1, 1, 4112, 4096)] * 2
    empty = [(1, 0, 0, 0)] * 2
    rep = fx.report(wd.decode_record(buffer(warps, tx_ring(full, empty), samples_of(ENC))), ["ab"])
    assert ("    full[0]: phase parity 0 in progress, hardware state not read (a tx barrier: the "
            "dump does not arrive on it); ledger: phase 0, 1 of 1 arrival(s) in (pending 0), "
            "in this phase (the first): expects 4112 B (announced), copies issued 4096 B: "
            "16 B never issued") in rep
    assert ("warp 1 (consumer) waits on 'ab' full[0] phase 0 [") in rep
    assert ("]: every arrival is in (ledger: 1 of 1) and this phase announced 4112 B but copies "
            "were issued for 4096 B: 16 B never issued: the copies deliver fewer bytes than the "
            "expect_tx announces; producer warp 0 waits (producer_acquire) on 'ab' empty[0] "
            "phase 0") in rep
    # empty barriers: hardware and ledger agree (1 pending); no bytes line
    assert ("    empty[0]: phase parity 0 in progress, pending arrivals 1, tx bytes 0; ledger: "
            "phase 0, 0 of 1 arrival(s) in (pending 1)\n") in rep
    assert "bytes issued are not bytes landed" in rep


def test_ledger_after_completed_phases_and_bytes_in_flight():
    """Later phases: the totals since the create; every announced byte
    issued: the report says issued but not landed, not "never issued"."""
    warps = [W(1, 0, 1, 1)]
    full = [(1, 3, 12288, 12288), (1, 2, 8192, 8192)]
    rep = fx.report(wd.decode_record(buffer(warps, tx_ring(full, [(1, 1, 0, 0)] * 2, parity=1),
                                            samples_of(ENC))), ["ab"])
    # 3 arrivals, parity 1 in progress: phases 0..2 done, none of phase 3 in
    assert ("full[0]: phase parity 1 in progress, hardware state not read (a tx barrier: the dump "
            "does not arrive on it); ledger: phase 3, 0 of 1 arrival(s) in (pending 1), since the "
            "create: expects 12288 B (announced), copies issued 12288 B\n") in rep
    # 2 arrivals, parity 1 in progress: phase 1 has its arrival, not its bytes
    assert ("full[1]: phase parity 1 in progress, hardware state not read (a tx barrier: the dump "
            "does not arrive on it); ledger: phase 1, 1 of 1 arrival(s) in (pending 0)") in rep
    assert ("warp 0 (consumer) waits on 'ab' full[1] phase 1 [") in rep
    assert ("every arrival is in and every announced byte (8192 B) was issued by a copy: "
            "issued but not landed") in rep
    assert "never issued" not in rep


def test_hardware_and_ledger_disagree():
    """An empty barrier read by the dump with 1 arrival pending while the
    ledger counts 2 pending: one arrival came from outside our verbs."""
    bar = (0, 2, 2, False, True, 0b10, ENC(0, 1, 1), 1, (2, 0, 0, 0))
    rep = fx.report(wd.decode_record(buffer([], [bar], samples_of(ENC))), ["ab"])
    assert "the ledger counts 2 pending: 1 arrival(s) not from our verbs" in rep


def _second_line(rep):
    return rep.splitlines()[1]


def test_report_leads_with_the_root_cause_bytes_never_issued():
    """The wrong-tx hang: the line after the title names the barrier, the
    announced and issued bytes (not the sixth clause of a graph line)."""
    warps = [W(0, 0, 0, 0), W(1, 0, 0, 0)]
    full = [(1, 1, 4112, 4096)] * 2
    empty = [(1, 0, 0, 0)] * 2
    rep = fx.report(wd.decode_record(buffer(warps, tx_ring(full, empty), samples_of(ENC))), ["ab"])
    line = _second_line(rep)
    assert line.startswith("root cause: warp 1 (consumer) waits on 'ab' full[0] phase 0")
    assert "16 B never issued" in line


def test_report_leads_with_the_root_cause_cycle_and_exit():
    warps = [W(0, 0, 0, 0), W(1, 0, 0, 0)]
    bars = ring(ENC, [(0, 32, 0), (0, 32, 0), (0, 32, 0), (0, 32, 0)])
    rep = fx.report(wd.decode_record(buffer(warps, bars, samples_of(ENC))), ["ab"])
    assert _second_line(rep) == ("root cause: warp 0 -> warp 1 -> warp 0: each waits on a "
                                 "barrier that only the next one arrives on (a deadlock cycle)")
    warps = [W(0, 0, 1, 1, waiting=False, exited=True), W(1, 0, 0, 1)]
    rep = fx.report(wd.decode_record(buffer(warps, ring(ENC, [(1, 32, 0)] * 4),
                                            samples_of(ENC))), ["ab"])
    assert _second_line(rep) == ("root cause: warp 1 (consumer) waits on 'ab' full[0] phase 1 "
                                 "[phase parity 1 in progress, pending arrivals 32, tx bytes 0]: "
                                 "every warp that arrives on it has exited")
