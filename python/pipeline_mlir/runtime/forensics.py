"""The watchdog's forensic dump (record version 4; version 3 is still
decoded): what every barrier of every pipeline of the stuck CTA was doing,
what our own verbs did to it (the ledger), and which warp waits on what.

The kernel side is lib/Conversion/PipelineToNVVM/Watchdog.cpp (``defineDump``,
``emitWatchdogWaitMark``); docs/watchdog.md, "The forensic dump", is the
prose version of this file. Layout (i32 words of the host buffer):

* 11: warps in the CTA; 12: barrier entries; 13: calibration samples.
* 16..47, the wait table, one word per warp: bit 31 waiting now, bit 30
  valid (the warp has waited at least once), bit 29 a thread of the warp
  returned from the kernel; bits 28..27 role (0 producer_acquire, 1
  consumer_wait, 2 order_wait), 26..19 pipeline id + 1 (0: unknown),
  18..1 stage, 0 phase parity.
* 48..62, five calibration samples (token low, token high, pending count)
  of a scratch mbarrier in states known by construction (CALIBRATION).
* 64.., nine words per barrier (version 3: the first five): header
  (pipeline id << 16 | order << 15 | created in this CTA << 14 | stages),
  index << 8 | has ledger << 2 | probes (bit p:
  mbarrier.test_wait.parity(p) was true, i.e. the phase of parity p has
  completed), token low, token high, pending arrivals; then the ledger:
  init count, arrivals, bytes announced (arrive.expect_tx), bytes of the
  copies issued towards it (tma_load / bulk copy), cumulative since the
  create.

Loads of the mbarrier word read 0 on sm_90 (measured on the H100), so the
kernel reads each barrier through ``mbarrier.expect_tx`` of 1 byte (so that
what follows cannot complete the phase) and ``mbarrier.arrive``, whose
returned token captures the state before that arrive; the pending arrival
count is ``mbarrier.pending_count`` of the token (documented by PTX: exact).
What is certain: the phase parity (from the probes, taken before the
arrive), the pending arrivals and the wait table. What is not: where the
token keeps the tx-count, which PTX does not document. :func:`fit_layout`
accepts a bit field for it only when it decodes every calibration sample;
without one, the report shows the token.

The ledger (docs/watchdog.md, "The ledger") is software: counters that the
lowered verbs themselves keep in shared memory. It is exact about what our
ops did (arrive operations issued, bytes announced, bytes of copies
issued), not about what the hardware received: a copy issued is not a copy
landed, and an arrival from a CTA that does not count it (none here: every
verb counts in the CTA it signals) or from code outside the pipeline verbs
is not in it. :func:`ledger_phase` derives the phase and the arrivals of the
phase in progress from it; :func:`ledger_bytes` the bytes announced and not
issued.
"""

import struct
from dataclasses import dataclass, field

from .watchdog import BUFFER_BYTES, RECORD_VERSION, ROLE_NAMES

WORD_WARP_COUNT, WORD_BARRIER_COUNT, WORD_SAMPLE_COUNT = 11, 12, 13
WORD_VERSION = 9
WORD_WARPS, WORD_SAMPLES, WORD_BARRIERS = 16, 48, 64
SAMPLE_WORDS = 3
LEDGER_WORDS = 4
#: words per barrier entry by record version (4: with the ledger)
BARRIER_WORDS_OF = {3: 5, 4: 5 + LEDGER_WORDS}
BARRIER_WORDS = BARRIER_WORDS_OF[RECORD_VERSION]
HAS_LEDGER = 1 << 2
MAX_WARPS = 32
MAX_BARRIERS = (BUFFER_BYTES // 4 - WORD_BARRIERS) // BARRIER_WORDS

MARK_WAITING, MARK_VALID, MARK_EXITED = 1 << 31, 1 << 30, 1 << 29

CALIB_MAX = (1 << 20) - 1
CALIB_COMPLETE = 0x12345
#: The pending word of a barrier the dump did not read (Watchdog.cpp kNotRead).
NOT_READ = 0xFFFFFFFF

#: (phase parity, pending arrivals, pending tx bytes) of the state each
#: sample's token captures (after the sample's own expect_tx(1), before its
#: arrive), in the order the kernel takes them (Watchdog.cpp, defineDump).
CALIBRATION = (
    (0, CALIB_MAX, 1),                                   # p0: init M
    (0, CALIB_MAX - 1, CALIB_MAX),                       # expect_tx M-2
    (0, CALIB_MAX - 2, CALIB_MAX - CALIB_COMPLETE + 1),  # complete_tx 0x12345
    (0, 5, 101),                                         # p1: init 5, expect_tx 100
    (1, 5, 1),                                           # complete_tx 101, 4 arrives
)
TX_COLUMN = 2


@dataclass(frozen=True)
class WarpState:
    warp: int
    waiting: bool
    valid: bool
    exited: bool
    role: int
    pipeline_id: int  # -1 unknown
    stage: int
    phase: int

    @property
    def role_name(self):
        return ROLE_NAMES.get(self.role, f"role {self.role}")


@dataclass(frozen=True)
class Barrier:
    pipeline_id: int
    index: int
    stages: int
    order: bool
    created: bool
    probes: int   # bit p: the phase of parity p has completed
    token: int    # mbarrier.arrive's state token (0 when not created)
    pending: int  # mbarrier.pending_count of the token
    ledger: object = None  # Ledger, or None (version 3, or no ledger kept)

    @property
    def parity(self):
        """Parity of the phase in progress, or None when the probes
        disagree (both or neither phase completed)."""
        if self.probes == 0b01:
            return 1   # parity 0 completed: phase of parity 1 in progress
        if self.probes == 0b10:
            return 0
        return None

    @property
    def side(self):
        """("full"|"empty"|"barrier", stage index)."""
        if self.order:
            return "barrier", self.index
        if self.index < self.stages:
            return "full", self.index
        return "empty", self.index - self.stages


@dataclass(frozen=True)
class Ledger:
    """What the lowered verbs did to one barrier since its create (counted
    by the kernel itself, WatchdogLedger.cpp emitLedgerAdd)."""
    count: int      # init count (arrivals per phase); 0: not created
    arrivals: int   # arrive operations issued on it
    announced: int  # bytes announced by arrive.expect_tx
    issued: int     # bytes of the copies issued towards it


@dataclass(frozen=True)
class Field:
    """A bit field of the state token: value = (raw >> lo) & mask, stored
    as is ("plain") or negated modulo 2**width ("neg")."""
    lo: int
    width: int
    neg: bool

    def decode(self, raw):
        v = (raw >> self.lo) & ((1 << self.width) - 1)
        return (-v) % (1 << self.width) if self.neg else v


@dataclass
class Dump:
    warp_count: int
    warps: list
    samples: list          # [(token, pending_count)]
    barriers: list
    tx_fields: list = field(default_factory=list)

    def decode(self, token, fields):
        """The value every fitted field agrees on, else None."""
        if not fields:
            return None
        values = {f.decode(token) for f in fields}
        return values.pop() if len(values) == 1 else None

    @property
    def pending_count_checked(self):
        """True when pending_count gave the known count of every calibration
        sample (False: it did not; None: samples missing)."""
        if len(self.samples) < len(CALIBRATION):
            return None
        return all(p == c[1] for (_, p), c in zip(self.samples, CALIBRATION))

    def pending(self, barrier):
        """Arrivals pending before the dump's own arrive (exact), or None for
        a tx-counting full barrier, which the dump does not arrive on (an
        extra arrive faults once every arrival is in)."""
        return None if barrier.pending == NOT_READ else barrier.pending

    def tx(self, barrier):
        """Pending tx bytes before the dump's expect_tx(1), or None when no
        field of the token fits the calibration samples."""
        v = self.decode(barrier.token, self.tx_fields)
        return None if v is None else v - 1


def fit_layout(samples, index):
    """Fields (narrowest width per start bit and encoding) that decode
    ``CALIBRATION[i][index]`` from every token ``samples[i]``; [] when the
    samples are missing or nothing fits."""
    if len(samples) < len(CALIBRATION):
        return []
    want = [c[index] for c in CALIBRATION]
    fits = []
    for neg in (False, True):
        for lo in range(64):
            for width in range(1, min(32, 64 - lo) + 1):
                f = Field(lo, width, neg)
                if all(f.decode(raw) == w for raw, w in zip(samples, want)):
                    fits.append(f)
                    break  # the narrowest: wider ones add bits no sample pins
    return fits


def decode_dump(raw):
    """The Dump of a version-3 or -4 buffer (``BUFFER_BYTES``)."""
    raw = bytes(raw)
    if len(raw) < BUFFER_BYTES:
        raise ValueError(f"watchdog buffer holds {len(raw)} bytes, expected {BUFFER_BYTES}")
    w = struct.unpack_from(f"<{BUFFER_BYTES // 4}I", raw)
    version = w[WORD_VERSION]
    if version not in BARRIER_WORDS_OF:
        raise ValueError(f"watchdog record version {version} has no dump this runtime decodes")
    words = BARRIER_WORDS_OF[version]
    nwarps = min(w[WORD_WARP_COUNT], MAX_WARPS)
    nbar = min(w[WORD_BARRIER_COUNT], (BUFFER_BYTES // 4 - WORD_BARRIERS) // words)
    nsamples = min(w[WORD_SAMPLE_COUNT], len(CALIBRATION))
    warps = []
    for i in range(nwarps):
        m = w[WORD_WARPS + i]
        pid = (m >> 19) & 0xFF
        warps.append(WarpState(warp=i, waiting=bool(m & MARK_WAITING), valid=bool(m & MARK_VALID),
                               exited=bool(m & MARK_EXITED), role=(m >> 27) & 3,
                               pipeline_id=pid - 1, stage=(m >> 1) & 0x3FFFF, phase=m & 1))
    samples = []
    for i in range(nsamples):
        lo, hi, pending = w[WORD_SAMPLES + SAMPLE_WORDS * i: WORD_SAMPLES + SAMPLE_WORDS * (i + 1)]
        samples.append((lo | (hi << 32), pending))
    barriers = []
    for i in range(nbar):
        entry = w[WORD_BARRIERS + words * i: WORD_BARRIERS + words * (i + 1)]
        h, idx, lo, hi, pending = entry[:5]
        ledger = None
        if words > 5 and idx & HAS_LEDGER:
            ledger = Ledger(*entry[5:5 + LEDGER_WORDS])
        barriers.append(Barrier(pipeline_id=h >> 16, index=idx >> 8, stages=h & 0x3FFF,
                                order=bool(h & (1 << 15)), created=bool(h & (1 << 14)),
                                probes=idx & 3, token=lo | (hi << 32), pending=pending,
                                ledger=ledger))
    return Dump(nwarps, warps, samples, barriers,
                tx_fields=fit_layout([t for t, _ in samples], TX_COLUMN))


def encode_dump(header, warps=(), samples=(), barriers=(), warp_count=None):
    """A whole buffer: ``header`` (watchdog.encode_record(..., version=3 or
    4)) followed by a dump in that version's layout; for tests. ``warps``:
    raw wait-table words; ``samples``: (token, pending_count); ``barriers``:
    (pipeline_id, index, stages, order, created, probes, token, pending[,
    ledger]) with ledger a :class:`Ledger` or (count, arrivals, announced,
    issued) (version 4 only; None or absent: no ledger)."""
    words = [0] * (BUFFER_BYTES // 4)
    words[:16] = struct.unpack("<16I", header)
    # older versions (tests of their refusal): the version-3 layout
    per = BARRIER_WORDS_OF.get(words[WORD_VERSION], BARRIER_WORDS_OF[3])
    words[WORD_WARP_COUNT] = len(warps) if warp_count is None else warp_count
    words[WORD_BARRIER_COUNT] = len(barriers)
    words[WORD_SAMPLE_COUNT] = len(samples)
    for i, m in enumerate(warps):
        words[WORD_WARPS + i] = m
    for i, (token, pending) in enumerate(samples):
        words[WORD_SAMPLES + SAMPLE_WORDS * i:WORD_SAMPLES + SAMPLE_WORDS * (i + 1)] = [
            token & 0xFFFFFFFF, token >> 32, pending]
    for i, bar in enumerate(barriers):
        pid, idx, stages, order, created, probes, token, pending = bar[:8]
        ledger = bar[8] if len(bar) > 8 else None
        if ledger is not None and per == 5:
            raise ValueError("a version-3 dump has no ledger")
        entry = [pid << 16 | int(order) << 15 | int(created) << 14 | stages,
                 idx << 8 | (HAS_LEDGER if ledger is not None else 0) | probes,
                 token & 0xFFFFFFFF, token >> 32, pending]
        if per > 5:
            if isinstance(ledger, Ledger):
                ledger = (ledger.count, ledger.arrivals, ledger.announced, ledger.issued)
            entry += list(ledger) if ledger is not None else [0] * LEDGER_WORDS
        words[WORD_BARRIERS + per * i:WORD_BARRIERS + per * (i + 1)] = entry
    return struct.pack(f"<{len(words)}I", *words)


def wait_word(role, pipeline_id, stage, phase, waiting=True, exited=False):
    """The wait-table word the kernel writes (emitWatchdogWaitMark)."""
    pid = 0 if pipeline_id < 0 or pipeline_id >= 255 else pipeline_id + 1
    return (MARK_VALID | (MARK_WAITING if waiting else 0) | (MARK_EXITED if exited else 0)
            | (role & 3) << 27 | pid << 19 | (stage & 0x3FFFF) << 1 | (phase & 1))


# -- the ledger ------------------------------------------------------------------

@dataclass(frozen=True)
class LedgerPhase:
    """The phase in progress according to the ledger (and the probes)."""
    phase: object    # its index since the create, or None (undecided)
    arrived: object  # arrivals our verbs made in it, or None
    pending: object  # count - arrived, or None
    note: str = ""   # why it is undecided, or a disagreement with the probes


def ledger_phase(b):
    """The ledger's phase of barrier ``b``, or None without a ledger.

    Every completed phase took exactly ``count`` arrivals (an mbarrier phase
    completes when its pending count reaches 0, then the count is reset),
    and no arrival can follow the last one of a phase that waits for tx
    bytes (one more faults). So with A arrivals counted, A = q * count + r:
    r > 0 means phase q with r arrivals in; r = 0 (A > 0) means phase q with
    none in or phase q - 1 with all in and its bytes missing, which the
    probes' parity decides. Exact when every arrival on the barrier came
    from a verb that counts it."""
    led = b.ledger
    if led is None or led.count == 0:
        return None
    q, r = divmod(led.arrivals, led.count)
    parity = b.parity
    if r or q == 0:
        if parity is not None and q % 2 != parity:
            return LedgerPhase(None, None, None,
                               f"the ledger's {led.arrivals} arrival(s) make it phase {q} "
                               f"(parity {q % 2}), the probes say parity {parity}: "
                               "arrivals came from outside the ledger")
        return LedgerPhase(q, r, led.count - r)
    if parity is None:
        return LedgerPhase(None, None, None,
                           f"{led.arrivals} arrival(s) = {q} x {led.count}: phase {q} with none "
                           f"in, or phase {q - 1} with all in; the probes do not say which")
    if q % 2 == parity:
        return LedgerPhase(q, 0, led.count)
    return LedgerPhase(q - 1, led.count, 0)


def ledger_missing_bytes(b):
    """Bytes announced by arrive.expect_tx on ``b`` that no copy of ours
    was issued for (announced - issued since the create; negative: copies
    issued more), or None without a ledger.

    Every completed phase received exactly what it announced (it completes
    only at tx count 0), so announced - issued = (tx bytes the phase in
    progress still expects) - (bytes issued but not landed): a positive value
    is a lower bound of the bytes that phase waits for and that no copy will
    bring."""
    led = b.ledger
    if led is None or led.count == 0:
        return None
    return led.announced - led.issued


def _ledger_state(b):
    """The ledger's phrase for barrier ``b`` ("" without a ledger)."""
    led = b.ledger
    if led is None:
        return ""
    if led.count == 0:
        return "ledger: not initialized (create not run)"
    lp = ledger_phase(b)
    if lp.phase is None:
        parts = [f"ledger: {led.arrivals} arrival(s) of {led.count} per phase ({lp.note})"]
    else:
        parts = [f"ledger: phase {lp.phase}, {lp.arrived} of {led.count} arrival(s) in "
                 f"(pending {lp.pending})"]
        if lp.note:
            parts.append(lp.note)
    if led.announced or led.issued or b.pending == NOT_READ:
        span = ("in this phase (the first)" if lp.phase == 0
                else "since the create")
        line = f"{span}: expects {led.announced} B (announced), copies issued {led.issued} B"
        missing = led.announced - led.issued
        if missing > 0:
            line += f": {missing} B never issued"
        elif missing < 0:
            line += f": copies issued {-missing} B more than announced"
        parts.append(line)
    return ", ".join(parts)


# -- the report ------------------------------------------------------------------

def _pipe_name(pid, names):
    if 0 <= pid < len(names):
        return f"'{names[pid]}'"
    return f"#{pid}" if pid >= 0 else "an unnamed pipeline"


def _waited_barrier(ws):
    """(side, stage) a waiting warp's record names: consumer_wait waits on
    full[s], producer_acquire on empty[s], order_wait on its barrier."""
    return {0: "empty", 1: "full"}.get(ws.role, "barrier"), ws.stage


def _role_word(role):
    return {0: "producer", 1: "consumer", 2: "order"}.get(role, "?")


def _find_barrier(dump, pid, side, stage):
    for b in dump.barriers:
        if b.pipeline_id == pid and b.side == (side, stage):
            return b
    return None


def _barrier_state(dump, b):
    if not b.created:
        return "not created in this CTA"
    parts = []
    parity = b.parity
    parts.append(f"phase parity {parity} in progress" if parity is not None
                 else f"phase unknown (probes {b.probes:#04b})")
    if dump.pending(b) is None:
        parts.append("hardware state not read (a tx barrier: the dump does not arrive on it)")
    else:
        parts.append(f"pending arrivals {dump.pending(b)}")
        tx = dump.tx(b)
        parts.append(f"tx bytes {tx}" if tx is not None
                     else f"tx bytes: unknown (token {b.token:#018x})")
        lp = ledger_phase(b)
        if lp is not None and lp.pending is not None and lp.pending != dump.pending(b):
            parts.append(f"the ledger counts {lp.pending} pending: "
                         f"{lp.pending - dump.pending(b)} arrival(s) not from our verbs")
    state = ", ".join(parts)
    led = _ledger_state(b)
    return f"{state}; {led}" if led else state


def _state_of(ws, names):
    """One phrase for what warp ``ws`` is doing."""
    if ws.waiting:
        side, stage = _waited_barrier(ws)
        return (f"waits ({ws.role_name}) on {_pipe_name(ws.pipeline_id, names)} "
                f"{side}[{stage}] phase {ws.phase}")
    last = ""
    if ws.valid:
        side, stage = _waited_barrier(ws)
        last = (f" (last passed {ws.role_name} on {_pipe_name(ws.pipeline_id, names)} "
                f"{side}[{stage}] phase {ws.phase})")
    if ws.exited:
        return "exited" + last
    if ws.valid:
        return "is not in a pipeline wait" + last
    return "has not waited on any pipeline barrier"


def wait_for_graph(dump, names):
    """Lines "warp W (role) waits on ...; <who arrives on it>" and the
    cycles among waiting warps."""
    # Who acts as what, from the wait table (a warp's last or current wait).
    sides = {}  # (pid, role) -> [WarpState]
    for ws in dump.warps:
        if ws.valid:
            sides.setdefault((ws.pipeline_id, ws.role), []).append(ws)
    lines, edges = [], {}
    for ws in dump.warps:
        if not ws.waiting:
            continue
        side, stage = _waited_barrier(ws)
        pipe = _pipe_name(ws.pipeline_id, names)
        b = _find_barrier(dump, ws.pipeline_id, side, stage)
        head = f"warp {ws.warp} ({_role_word(ws.role)}) waits on {pipe} {side}[{stage}] phase {ws.phase}"
        if b is not None:
            head += f" [{_barrier_state(dump, b)}]"
        if ws.role == 2:
            lines.append(head)
            continue
        # A full barrier completes by the producers' commits (and the copies'
        # bytes); an empty barrier by the consumers' releases.
        arriver_role = 0 if ws.role == 1 else 1
        who = "producer" if arriver_role == 0 else "consumer"
        arrivers = [a for a in sides.get((ws.pipeline_id, arriver_role), []) if a.warp != ws.warp]
        tx = dump.tx(b) if b is not None else None
        pending = dump.pending(b) if b is not None else None
        lp = ledger_phase(b) if b is not None else None
        missing = ledger_missing_bytes(b) if b is not None else None
        if pending is None and lp is not None:
            pending = lp.pending  # the tx barrier's arrivals, from the ledger
        notes = []
        if ws.role == 1 and lp is not None and lp.pending == 0 and b.ledger.announced:
            led = b.ledger
            span = "this phase" if lp.phase == 0 else "since the create"
            if missing > 0:
                notes.append(f"every arrival is in (ledger: {led.count} of {led.count}) and "
                             f"{span} announced {led.announced} B but copies were issued for "
                             f"{led.issued} B: {missing} B never issued: the copies deliver "
                             "fewer bytes than the expect_tx announces")
            elif missing == 0:
                notes.append(f"every arrival is in and every announced byte ({led.announced} B) "
                             "was issued by a copy: issued but not landed (a copy in flight, "
                             "faulted, or signalling this barrier in another phase)")
            else:
                notes.append(f"every arrival is in; copies were issued for {-missing} B more "
                             "than announced")
        elif pending == 0 and tx:
            notes.append(f"every arrival is in but {tx} tx byte(s) never came: the copies "
                         "deliver fewer bytes than the expect_tx")
        elif pending == 0 and tx is None and b.parity is not None:
            # A phase in progress with no arrival pending can only be
            # waiting for its tx count, even when the token does not say how
            # many bytes.
            notes.append("every arrival is in but tx bytes never came: the copies "
                         "deliver fewer bytes than the expect_tx")
        if not arrivers:
            notes.append(f"no warp of this CTA has acted as {who} of {pipe}")
        else:
            states = [f"{who} warp {a.warp} {_state_of(a, names)}" for a in arrivers]
            if all(a.exited and not a.waiting for a in arrivers):
                notes.append("nobody left who arrives on it: " + "; ".join(states))
            else:
                notes.append("; ".join(states))
            edges[ws.warp] = [a.warp for a in arrivers if a.waiting]
        lines.append(head + ": " + "; ".join(notes))
    for cycle in _cycles(edges):
        lines.append("deadlock cycle: " + " -> ".join(f"warp {w}" for w in cycle + cycle[:1]))
    return lines


def _cycles(edges):
    """Elementary cycles of the small wait-for graph, each once (smallest
    warp first)."""
    found = []
    def walk(start, node, path):
        for nxt in edges.get(node, []):
            if nxt == start:
                found.append(list(path))
            elif nxt > start and nxt not in path:
                walk(start, nxt, path + [nxt])
    for start in sorted(edges):
        walk(start, start, [start])
    return found


def _describe_fields(fields):
    """e.g. "bits 0..19" or "-(bits 32..51) mod 2^20"; several candidates
    joined with " or " (they agree on every barrier the report decodes)."""
    parts = []
    for f in fields:
        bits = f"bits {f.lo}..{f.lo + f.width - 1}"
        parts.append(f"-({bits}) mod 2^{f.width}" if f.neg else bits)
    return " or ".join(parts)


def root_causes(graph):
    """The findings of a wait-for graph that explain the hang, most specific
    first, each one line: bytes an expect_tx announced that no copy
    delivers, a wait nobody is left to end, a cycle of waits."""
    causes = []
    for line in graph:
        head, _, notes = line.partition(": ")
        for note in notes.split("; "):
            if "never issued" in note or "never came" in note:
                causes.append(f"{head}: {note}")
            elif note.startswith("nobody left who arrives on it"):
                causes.append(f"{head}: every warp that arrives on it has exited")
    for line in graph:
        if line.startswith("deadlock cycle: "):
            causes.append(line[len("deadlock cycle: "):] + ": each waits on a barrier "
                          "that only the next one arrives on (a deadlock cycle)")
    return causes


def report(record, names=None, kernel=None):
    """The multi-line forensic report of a version-3 or -4 record. It
    opens with the root cause (``root cause: ...``) where the wait-for
    graph names one; the barrier and warp tables follow."""
    names = list(names or [])
    dump = record.dump
    out = [f"forensic dump of block {tuple(record.block)} "
           f"(the first wait to time out: warp {record.warp}, {record.role_name})"]
    if dump is None:
        return out[0] + (f": no dump in this record (version {record.version} kernel; "
                         f"this runtime decodes versions 3 and {RECORD_VERSION})")
    graph = wait_for_graph(dump, names)
    out.extend(f"root cause: {c}" for c in root_causes(graph))
    out.append("  (each barrier read by expect_tx(1) + mbarrier.arrive: pending arrivals "
               "from mbarrier.pending_count of the token, before the dump's own arrive)")
    if dump.tx_fields:
        out.append("  (tx bytes decoded from the token with a field fitted to this GPU's "
                   f"calibration samples: {_describe_fields(dump.tx_fields)}, less the "
                   "dump's own byte)")
    else:
        out.append("  (no field of the token fits the calibration samples' tx bytes: "
                   "tokens shown)")
    if any(b.ledger is not None for b in dump.barriers):
        out.append("  (ledger: what our verbs did since the create, counted by the kernel: "
                   "arrive operations, bytes announced by arrive.expect_tx, bytes of the copies "
                   "issued; bytes issued are not bytes landed)")
    checked = dump.pending_count_checked
    if checked is False:
        out.append("  WARNING: mbarrier.pending_count disagrees with the calibration "
                   "samples' known counts; pending arrivals below are suspect")
    out.append("  calibration samples (token/pending_count): "
               + (", ".join(f"{t:#018x}/{p}" for t, p in dump.samples) or "none"))
    out.append("barriers:")
    last = None
    for b in dump.barriers:
        if b.pipeline_id != last:
            last = b.pipeline_id
            kind = "order" if b.order else f"{b.stages} stage(s)"
            out.append(f"  pipeline {_pipe_name(b.pipeline_id, names)} ({kind}):")
        side, stage = b.side
        out.append(f"    {side}[{stage}]: {_barrier_state(dump, b)}")
    out.append("warps:")
    for ws in dump.warps:
        out.append(f"  warp {ws.warp}: {_state_of(ws, names)}")
    if graph:
        out.append("wait-for graph:")
        out.extend("  " + line for line in graph)
    return "\n".join(out)
