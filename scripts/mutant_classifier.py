"""Which survivors of the mutation campaign (scripts/mutation_campaign.py)
break no protocol: mutants the checker and the simulator both accept are
decided here, by rules read off the mutated IR text, as ``harmless``,
``schedule-only`` or (neither rule applies) protocol-breaking.

Survivors that change nothing a barrier observes are marked ``harmless``
by rule (``_harmless``: a duplicated or moved op whose effect is idempotent
or order-free with respect to its neighbours: fences, setmaxnreg,
wgmma.fence, a doubled wgmma wait or commit group, a doubled TMA store of
the same tile or PipelineTmaStore tail, two TMA stores of one group
swapped, a doubled CTA-wide barrier every thread runs; a TMA producer's
commit, which emits nothing, and moves past it; two copies of one stage,
or two pipelines' tails, swapped; a stage count below the buffers; a one-CTA
kernel's ``init_arrive``, which emits nothing, and its producer tail; a
proxy fence moved past the hand-over barrier, which the storing thread then
runs before its store; a move past an identical line, which changes
nothing; one of two back-to-back syncs of one role dropped; a loop one trip
short that only stores through a PipelineTmaStore); the rest are listed for
a reader to explain. Also harmless: a wgmma fence or commit group and a
consumer.wait or named-barrier op swapped with only address arithmetic
between them (the checker's register-fence rule proves the fence still
orders the register accesses), two syncs of one role swapped on barriers
the other roles only arrive on, a dropped setmaxnreg (a drop that overruns
the register file is rejected by the checker first), a PipelineOrder loop
every thread runs one trip short, a wgmma.fence moved below MMAs that an
earlier fence of its block already orders (nothing between the two reads
or writes an MMA's registers), a doubled tcgen05 fence, a one-CTA
``init_wait`` (bar.sync 0, which every thread passes) doubled, a move
past a one-CTA ``init_arrive`` (it emits nothing), a loop one trip short
that also waits for its own TMEM loads (the Blackwell epilogue's), a hand-over
sync moved above its proxy fence (the same program as the fence moved below
it), a wgmma commit group moved down past a consumer.wait or named-barrier
op across no MMA and no wait_group (it closes the same group), a
flipped start phase of a state no verb uses, and a tcgen05 after-fence
moved above the barrier that publishes the TMEM alloc (the checker's
after-alloc rule, which accepted it, proves each user fences after it).

**schedule-only** survivors (``_schedule_only``) change when a warpgroup
waits or takes its turn, never what a barrier or buffer sees: a ping-pong
turn's arrive or sync (a named barrier whose first turn is an arrive
outside every loop) moved past a wgmma fence, commit or wait or a
consumer.wait, two pipelines' consumer.waits swapped with nothing read
between them, an accumulator stage's (umma_async) commit moved below
another pipeline's consumer.wait (the same MMAs tracked, handed over
later), and a stage released after another pipeline's wait instead of
before it (held longer). They have their own column and are not protocol-breaking.
"""

import re


# Ops whose removal, doubling or reordering is a protocol slip.
VERB = re.compile(r"^(\s*)((?:pipeline\.(?:producer|consumer|copy|named_barrier|order|init_|"
                  r"clc|tmem|bulk|fence|arrive|mbarrier)[\w.]*)|(?:nvvm\.(?:fence|wgmma\.(?:fence|"
                  r"commit|wait)|tcgen05\.(?:fence|commit|wait|dealloc)|barrier|setmaxregister|"
                  r"cp\.async\.(?:bulk\.wait|commit|wait)|mbarrier)[\w.]*))\b")

# Ops a move or a duplicate cannot change the protocol of (idempotent, or
# ordered only against memory the pipeline does not hand over).
HARMLESS_DUP = ("nvvm.fence", "nvvm.setmaxregister", "nvvm.wgmma.fence", "nvvm.tcgen05.fence")
HARMLESS_MOVE = ("nvvm.setmaxregister",)


def _harmless(kind, what, text=""):
    if what.endswith("(no change)"):
        return True
    if kind == "drop" and "named_barrier.sync" in what and _drops_twin_sync(text, what):
        # one of two back-to-back syncs with nothing between them: the other
        # one is the same barrier for the same warps
        return True
    if kind == "trip-1" and _loop_of_one_side(text, what):
        # a loop that only stores through a PipelineTmaStore (and syncs its
        # own warps): one tile fewer is stored, every barrier still balances
        return True
    if kind == "drop" and "nvvm.setmaxregister" in what:
        # a warpgroup keeps the launch's registers instead of resizing:
        # ptxas compiles its code within them. A drop that overruns the
        # register file (a producer's decrease) is the checker's register
        # budget rule, which rejects it before this classifier is asked
        return True
    if kind == "trip-1" and _order_loop_of_all(text, what):
        # a PipelineOrder loop every thread runs: each group takes one turn
        # fewer, the turns still rotate and balance; one tile fewer is
        # processed, which is data, not synchronization
        return True
    if kind == "dup" and any(op in what for op in HARMLESS_DUP):
        return True
    if (kind in ("drop", "dup") or kind.startswith("move")) and "producer.commit" in what \
            and any(f"<{k}>" in what for k in NOOP_COMMIT_KINDS):
        # a TMA (or CLC) producer's commit emits nothing: the copies'
        # complete_tx completes the full barrier (the kind table's commit
        # target is none)
        return True
    passed = _passed_line(text, what) if kind.startswith("move") else ""
    if "pipeline.init_arrive" in passed and "cluster_size" not in passed \
            and "cluster_size" not in text:
        # moved past a one-CTA init_arrive, which emits nothing
        return True
    if "pipeline.producer.commit" in passed and any(f"<{k}," in passed
                                                     for k in NOOP_COMMIT_KINDS):
        # moved past a commit that emits nothing
        return True
    if "copy.tma_load" in what and "copy.tma_load" in passed and _same_stage_copy(
            text, what, passed):
        # two copies of one stage, between the same acquire and commit, in
        # the other order
        return True
    if "producer.tail" in what and "producer.tail" in passed:
        # two pipelines' tails in the other order: each waits for its own
        # consumers' releases
        return True
    if kind == "stages-1":   # fewer stages than buffers and barriers: still a correct ring
        return True
    if kind == "drop" and "producer.tail" in what and not re.search(
            r"known_cluster_size|multicast|cta_pair|cluster_rank|mapa", text):
        # the tail keeps a CTA alive while cluster peers may still arrive on
        # its barriers; a kernel of one-CTA clusters has no such peers
        return True
    if kind.startswith("move") and any(op in what for op in HARMLESS_MOVE):
        return True
    if "init_arrive" in what or ("init_wait" in what and kind == "move-up"
                                 and _moved_past(text, what, "pipeline.init_arrive")):
        # init_arrive of a one-CTA cluster emits nothing (the wait is the
        # whole sync): dropping, doubling or reordering it changes nothing
        return "cluster_size" not in text
    if kind == "dup" and "pipeline.init_wait" in what and _one_cta_init_wait(text, what):
        # a one-CTA init_wait is a CTA-wide bar.sync 0 every thread passes:
        # twice is one more full barrier (a cluster's is a cluster wait,
        # which needs an arrive of its own)
        return True
    if kind.startswith("move") and _after_fence_above_barrier(text, what):
        # tcgen05.fence::after_thread_sync above the CTA barrier that
        # publishes the TMEM alloc instead of below it: the checker's
        # after-alloc rule, which accepted the mutant, proves every other
        # warp's tcgen05 op still follows an after-fence of its own role
        # after the barrier (the Blackwell GEMM's epilogue and MMA warps)
        return True
    if kind == "flip-phase" and _dead_state(text, what):
        # a state no verb ever uses (carried through loops and yielded
        # back unchanged): its phase reaches no barrier
        return True
    if kind == "move-up" and "named_barrier.sync" in what and _sync_above_proxy_fence(
            text, what):
        # the hand-over barrier moved above the proxy fence: the same program
        # as the fence moved below the barrier (next rule)
        return True
    if kind == "move-down" and "nvvm.fence.proxy" in what and _moved_past(
            text, what, "named_barrier.sync"):
        # the proxy fence after the hand-over barrier instead of before it:
        # every thread that crossed the barrier, the storing one included,
        # fences before the store, which orders the writes before it through
        # the barrier (the checker accepts a storer's fence after the barrier)
        return True
    if kind.startswith("move") and "copy.tma_store" in what and _moved_past(
            text, what, "pipeline.copy.tma_store"):
        # two stores of one bulk group in the other order
        return True
    if kind == "dup" and "copy.tma_store" in what:
        # the same tile stored twice from the same buffer in one bulk group:
        # the group's wait covers both reads, and the bytes are the same
        return True
    if kind == "dup" and "producer.tail" in what and _line_of(text, what, "tma_store"):
        # a PipelineTmaStore's tail is a bulk-group wait: waiting twice is
        # waiting once
        return True
    if kind == "dup" and ("nvvm.wgmma.wait.group" in what or "nvvm.wgmma.commit.group" in what):
        # waiting twice for the same count is waiting once; an extra (empty)
        # commit group only makes the next wait_group N wait for more
        return True
    if kind.startswith("move") and _fence_or_commit_past_wait(text, what):
        # a wgmma.fence or commit group and a consumer.wait / named-barrier
        # op in the other order, with only address arithmetic between them:
        # the wait or barrier touches no wgmma register, the fence still
        # sits between the register writes and the MMAs (the checker's
        # register-fence rule proves that), the commit still closes the
        # same MMAs
        return True
    if kind == "move-down" and _fence_moved_past_unread_mmas(text, what):
        # a wgmma.fence moved below MMAs that an earlier fence of the same
        # block already orders: no register is read or written between the
        # two fences but by the MMAs themselves (chained) and constants
        return True
    if kind.startswith("move") and _syncs_met_by_arrives(text, what):
        # two syncs of one role in the other order, on barriers the other
        # roles only arrive on (never wait): each sync still waits for the
        # same arrivals, nothing else can block
        return True
    if kind == "dup" and "nvvm.barrier0" in what and _outside_branches(text, what):
        # a CTA barrier every thread runs, twice: one more full barrier
        return True
    if kind == "dup" and "named_barrier.sync" in what and (
            _whole_cta_sync(text, what) or _one_role_syncs(text, what)):
        # every thread the barrier counts runs every op on its id in the same
        # straight-line order (the whole CTA, or one role that only syncs on
        # it): one more sync is one more full barrier
        return True
    return False


# Lines that only compute addresses and values: a verb moved across them
# changes nothing but its order with the verb it passed.
PURE_LINE = re.compile(r"^\s*(?:(?:%[\w#:]+(?:, %[\w#:]+)*) = )?(?:arith\.\w+|llvm\.(?:getelementptr|"
                       r"ptrtoint|inttoptr|zext|sext|trunc|bitcast|mlir\.(?:constant|undef|zero|"
                       r"poison))|pipeline\.state\.(?:index|phase|count|advance|make))\b")


def _move_span(text, what):
    """For a move: (moved line, passed line, [lines between them], index of
    the moved line) in the mutated text, or None."""
    lines = text.split("\n")
    m = re.match(r"line (\d+): .* (before|past) line (\d+)", what)
    if not m:
        return None
    i, j = int(m.group(1)) - 1, int(m.group(3)) - 1
    if m.group(2) == "past":   # moved from i to j; the passed verb at j - 1
        between = lines[i:j - 1]
        moved, passed = j, j - 1
    else:                      # moved from i to j; the passed verb at j + 1
        between = lines[j + 2:i + 1]
        moved, passed = j, j + 1
    if not (0 <= moved < len(lines) and 0 <= passed < len(lines)):
        return None
    return lines[moved], lines[passed], between, moved


def _only_pure_between(between):
    return all(not line.strip() or PURE_LINE.match(line) for line in between)


WAITS_AND_BARRIERS = ("pipeline.consumer.wait", "pipeline.named_barrier.sync",
                      "pipeline.named_barrier.arrive")


def _fence_or_commit_past_wait(text, what):
    """A wgmma.fence or wgmma.commit.group and a consumer.wait or
    named-barrier op swapped (either moved), with only pure lines between."""
    span = _move_span(text, what)
    if not span:
        return False
    moved, passed, between, _ = span
    pair = (moved, passed)
    wgmma = [x for x in pair if "nvvm.wgmma.fence" in x or "nvvm.wgmma.commit.group" in x]
    # a ping-pong turn's barrier is the schedule's (_schedule_only), not this
    other = [x for x in pair if any(v in x for v in WAITS_AND_BARRIERS)
             and not _token_ring(text, x)]
    if len(wgmma) != 1 or len(other) != 1:
        return False
    if "nvvm.wgmma.commit.group" in moved:
        # a commit closes the same group wherever it sits as long as no MMA
        # (nor a wait_group, which would count it) lies between its two
        # places: register arithmetic in between is not its business
        return not any("wgmma" in x or "llvm.call" in x for x in between)
    return _only_pure_between(between)


def _one_cta_init_wait(text, what):
    """The duplicated init_wait lowers to bar.sync 0 (no cluster_size) and
    every thread runs it (it lies in no branch)."""
    i = _mutated_line(text, what)
    if i is None:
        return False
    line = text.split("\n")[i]
    return "pipeline.init_wait" in line and "cluster_size" not in line and _outside_branches(
        text, what)


def _dead_state(text, what):
    """The state a flip-phase mutant remakes reaches no verb: its value (and
    the loop arguments and results it flows into) is only carried by
    scf.for iter_args and yielded back. Block arguments are looked up in
    their loop's body only (sibling regions reuse their names)."""
    m = re.match(r"line \d+: (%[\w#]+) \(", what)
    if not m:
        return False
    lines = text.split("\n")

    def indent(k):
        return len(lines[k]) - len(lines[k].lstrip())

    def body_end(k):   # the first line after the op of line k's regions
        j = k + 1
        while j < len(lines) and (not lines[j].strip() or indent(j) > indent(k)):
            j += 1
        return j

    seen, todo = set(), [(m.group(1), 0, len(lines))]
    while todo:
        name, lo, hi = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        pat = re.compile(re.escape(name) + r"(?![\w#])")
        for k in range(lo, hi):
            line = lines[k]
            if not pat.search(line) or re.match(rf"\s*{re.escape(name)}(?::\d+)? = ", line):
                continue
            bound = re.findall(r"(%[\w#]+) = " + re.escape(name) + r"(?![\w#])", line)
            if "scf.for" in line and bound:
                todo += [(b, k + 1, body_end(k)) for b in bound]   # carried into the loop
                continue
            y = re.match(r"\s*scf\.yield (.*?) :", line)
            if not y:
                return False           # any other use may reach a barrier
            pos = [x.strip() for x in y.group(1).split(",")].index(name)
            loop = next((j for j in range(k - 1, -1, -1)
                         if lines[j].strip() and indent(j) < indent(k)), None)
            r = re.match(r"\s*(%[\w]+)(:\d+)? = scf\.for ", lines[loop] if loop is not None
                         else "")
            if not r:
                return False
            todo.append((f"{r.group(1)}#{pos}" if r.group(2) else r.group(1), loop + 1,
                         len(lines)))
    return True


def _after_fence_above_barrier(text, what):
    """A tcgen05.fence <after> and the CTA barrier after it (a one-CTA
    init_wait or nvvm.barrier0) swapped, with only pure lines between."""
    span = _move_span(text, what)
    if not span:
        return False
    moved, passed, between, _ = span
    if "past" in what:   # moved below the passed line
        above, below = passed, moved
    else:                # moved above the passed line
        above, below = moved, passed
    barrier = ("nvvm.barrier0" in below or ("pipeline.init_wait" in below
                                            and "cluster_size" not in below))
    return (barrier and "nvvm.tcgen05.fence <after>" in above
            and _only_pure_between(between))


def _sync_above_proxy_fence(text, what):
    """A named_barrier.sync moved up past a fence.proxy with only pure lines
    between: the fence now follows the barrier, as when it is moved down."""
    span = _move_span(text, what)
    if not span:
        return False
    moved, passed, between, _ = span
    return ("named_barrier.sync" in moved and "nvvm.fence.proxy" in passed
            and _only_pure_between(between))


FLOAT_TYPES = re.compile(r"\b(?:f16|bf16|f32|f64|f8\w*|vector<)")


def _register_free(line, constants):
    """The line neither reads nor writes a register an MMA accesses:
    address and index arithmetic, constants and undef, a constant inserted
    into a struct (position-less: the back end places it), an MMA or its
    commit and wait, a pipeline or named-barrier verb."""
    stripped = line.strip()
    if not stripped or stripped == "}" or "nvvm.wgmma." in stripped:
        return True
    if re.search(r"= (?:arith\.constant|llvm\.mlir\.(?:undef|poison|zero|constant))\b", stripped):
        return True
    m = re.search(r"= llvm\.insertvalue (%[\w#]+), ", stripped)
    if m:
        return m.group(1) in constants
    if re.match(r"(?:%[\w#:]+(?:, %[\w#:]+)* = )?pipeline\.", stripped):
        return True
    return bool(PURE_LINE.match(line)) and not FLOAT_TYPES.search(stripped)


def _fence_moved_past_unread_mmas(text, what):
    """For a wgmma.fence moved down: an earlier wgmma.fence of the same
    block precedes it, and every line between that fence and the moved
    one's new place is register-free (_register_free)."""
    if "nvvm.wgmma.fence" not in what:
        return False
    span = _move_span(text, what)
    if not span:
        return False
    lines = text.split("\n")
    j = span[3]
    indent = len(lines[j]) - len(lines[j].lstrip())
    constants = set(re.findall(r"(%[\w#]+) = arith\.constant\b", text))
    for k in range(j - 1, -1, -1):
        line = lines[k]
        ind = len(line) - len(line.lstrip())
        if line.strip() and ind < indent:
            return False   # the block's start: no earlier fence in it
        if ind == indent and "nvvm.wgmma.fence" in line:
            return True
        if not _register_free(line, constants):
            return False
    return False


def _barrier_base(line):
    m = re.search(r"named_barrier\.\w+ id = (\d+)", line)
    return m and m.group(1)


def _syncs_met_by_arrives(text, what):
    """Two named-barrier syncs of one role swapped, nothing but pure lines
    between, and every op of another role on their barriers an arrive."""
    span = _move_span(text, what)
    if not span:
        return False
    moved, passed, between, i = span
    if "named_barrier.sync" not in moved or "named_barrier.sync" not in passed \
            or not _only_pure_between(between):
        return False
    lines = text.split("\n")
    role = _enclosing_branches(lines, i)[-1:]   # the outermost branch: the role
    bases = {_barrier_base(moved), _barrier_base(passed)}
    for k, line in enumerate(lines):
        if _barrier_base(line) in bases and "named_barrier.sync" in line \
                and _enclosing_branches(lines, k)[-1:] != role:
            return False   # another role waits on it too: the order may matter
    return True


def _token_ring(text, line):
    """The named barrier of ``line`` hands a turn around (a ping-pong
    schedule, a warpgroup order): some arrive on its id lies outside every
    loop (the first turn, given once)."""
    base = _barrier_base(line)
    if base is None:
        return False
    lines = text.split("\n")
    for k, x in enumerate(lines):
        if "named_barrier.arrive" in x and _barrier_base(x) == base:
            indent = len(x) - len(x.lstrip())
            outside = True
            for j in range(k - 1, -1, -1):
                ind = len(lines[j]) - len(lines[j].lstrip())
                if ind < indent and lines[j].strip():
                    if "scf.for" in lines[j] or "scf.while" in lines[j]:
                        outside = False
                        break
                    if "gpu.func" in lines[j] or "func.func" in lines[j]:
                        break
                    indent = ind
            if outside:
                return True
    return False


SCHEDULE_VERBS = ("nvvm.wgmma.fence", "nvvm.wgmma.commit.group", "nvvm.wgmma.wait.group",
                  "pipeline.consumer.wait")


def _schedule_only(kind, what, text=""):
    """Survivors that only change when a warpgroup waits or gives its turn,
    never what any barrier or buffer sees: listed in their own column, not
    counted as protocol-breaking (docs/VerifyProtocol.md says why)."""
    if not kind.startswith("move"):
        return False
    span = _move_span(text, what)
    if not span:
        return False
    moved, passed, between, _ = span
    pair = (moved, passed)
    turn = [x for x in pair if "named_barrier." in x and _token_ring(text, x)]
    if len(turn) == 1 and any(v in x for x in pair if x is not turn[0]
                              for v in SCHEDULE_VERBS):
        # a ping-pong turn (its arrive or sync) moved past a wgmma fence,
        # commit or wait or a consumer.wait: the barrier only orders when
        # the warpgroups issue their MMAs; it guards no data
        return True
    if kind == "move-down" and "pipeline.producer.commit <umma_async>" in what \
            and "pipeline.consumer.wait" in passed and _only_pure_between(between):
        # an accumulator stage's commit (tcgen05.commit: its barrier
        # completes when all the thread's earlier MMAs do) after the wait
        # for another pipeline: it tracks the same MMAs, the epilogue is
        # handed the stage later (a deadlock is the simulator's)
        return True
    waits_release = sorted(x.split("%")[0].strip() for x in (moved, passed))
    if waits_release == ["pipeline.consumer.release", "pipeline.consumer.wait"] \
            and _only_pure_between(between) and (
                ("past" in what) == ("pipeline.consumer.release" in moved)):
        a = re.search(r"consumer\.\w+ (%[\w#]+),", moved)
        b = re.search(r"consumer\.\w+ (%[\w#]+),", passed)
        # a stage released after the wait for another pipeline instead of
        # before it: held longer, which only delays its producer (a
        # deadlock, the producer needing it to fill the awaited stage, is
        # the simulator's)
        return bool(a and b and a.group(1) != b.group(1))
    if "pipeline.consumer.wait" in moved and "pipeline.consumer.wait" in passed \
            and _only_pure_between(between):
        a = re.search(r"consumer\.wait (%[\w#]+),", moved)
        b = re.search(r"consumer\.wait (%[\w#]+),", passed)
        # two pipelines' waits in the other order, nothing read between
        # them: both complete on their own (a deadlock is the simulator's)
        return bool(a and b and a.group(1) != b.group(1))
    return False


# Kinds whose producer.commit emits nothing (the kind table's commit target
# is none: the full barrier completes by transaction bytes).
NOOP_COMMIT_KINDS = ("tma_async", "tma_umma", "tma_multi_consumers_async", "clc_fetch_async")


def _passed_line(text, what):
    """For a move: the line of the verb the moved one passed."""
    lines = text.split("\n")
    m = re.search(r"(before|past) line (\d+)", what)
    if not m:
        return ""
    j = int(m.group(2)) - 1
    k = j + 1 if m.group(1) == "before" else j - 1
    return lines[k] if 0 <= k < len(lines) else ""


def _same_stage_copy(text, what, passed):
    """The moved copy names the same (pipeline, state) as ``passed``."""
    m = re.search(r"(before|past) line (\d+)", what)
    lines = text.split("\n")
    j = int(m.group(2)) - 1
    moved = lines[j] if 0 <= j < len(lines) else ""
    key = re.compile(r"copy\.tma_load (%[\w#]+), (%[\w#]+),")
    a, b = key.search(moved), key.search(passed)
    return bool(a and b and a.groups() == b.groups())


def _mutated_line(text, what):
    """The 0-based index of the verb a mutation names (``line N: ...``)."""
    m = re.match(r"line (\d+):", what)
    return int(m.group(1)) - 1 if m else None


def _line_of(text, what, needle):
    i = _mutated_line(text, what)
    lines = text.split("\n")
    return i is not None and i < len(lines) and needle in lines[i]


def _moved_past(text, what, op):
    """For a move: the verb the moved one passed is ``op``."""
    lines = text.split("\n")
    m = re.search(r"(before|past) line (\d+)", what)
    if not m:
        return False
    j = int(m.group(2)) - 1
    # move-up: the moved verb now sits at j, the passed one after it;
    # move-down: the moved verb sits at j, the passed one before it
    k = j + 1 if m.group(1) == "before" else j - 1
    return 0 <= k < len(lines) and op in lines[k]


def _outside_branches(text, what, line=None):
    """True when the line a mutation names (or ``line``) lies in no
    ``scf.if`` branch (loops and the function body only)."""
    lines = text.split("\n")
    i = _mutated_line(text, what) if line is None else line
    if i is None:
        return False
    indent = len(lines[i]) - len(lines[i].lstrip())
    for k in range(i - 1, -1, -1):   # the enclosing ops, innermost first
        ind = len(lines[k]) - len(lines[k].lstrip())
        if ind < indent and lines[k].strip():
            if "scf.if" in lines[k] or "} else {" in lines[k]:
                return False
            if "gpu.func" in lines[k] or "func.func" in lines[k]:
                return True
            indent = ind
    return True


def _enclosing_branches(lines, i):
    """The ``scf.if`` / ``} else {`` lines enclosing line ``i`` (indices)."""
    out, indent = [], len(lines[i]) - len(lines[i].lstrip())
    for k in range(i - 1, -1, -1):
        ind = len(lines[k]) - len(lines[k].lstrip())
        if ind < indent and lines[k].strip():
            if "scf.if" in lines[k] or "} else {" in lines[k]:
                out.append(k)
            if "gpu.func" in lines[k] or "func.func" in lines[k]:
                break
            indent = ind
    return out


def _drops_twin_sync(text, what):
    """For a dropped ``named_barrier.sync`` right next to an identical one:
    every op on its id is such a sync under the same branches."""
    i = _mutated_line(text, what)
    if not what.endswith("(next to its twin)") or i is None:
        return False
    lines = text.split("\n")
    j = i if i < len(lines) and "named_barrier.sync" in lines[i] else i - 1
    return _one_role_syncs(text, f"line {j + 1}: pipeline.named_barrier.sync")


def _loop_verbs(text, what):
    """(the loop's line index, the protocol verbs of its body) of the loop a
    ``trip-1`` mutation names (``what`` = "line N ..."), or None."""
    lines = text.split("\n")
    m = re.match(r"line (\d+)", what)
    if not m:
        return None
    i = int(m.group(1))   # the loop line, after the inserted constant
    indent = len(lines[i]) - len(lines[i].lstrip())
    body = []
    for line in lines[i + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    return i, [line for line in body if VERB.match(line)]


def _loop_of_one_side(text, what):
    """For ``trip-1``: every protocol verb in the loop is a PipelineTmaStore
    verb, a TMA store, a named-barrier sync, a fence or a wait for the
    thread's own TMEM loads (the Blackwell epilogue's sub-tile loop)."""
    found = _loop_verbs(text, what)
    if found is None:
        return False
    _, verbs = found
    return bool(verbs) and all(
        "<tma_store" in line or "copy.tma_store" in line or "named_barrier.sync" in line
        or "nvvm.fence" in line or "nvvm.tcgen05.wait <load>" in line for line in verbs)


def _order_loop_of_all(text, what):
    """For ``trip-1``: the loop lies in no ``scf.if`` (every thread of the
    block runs it) and its only protocol verbs are PipelineOrder's."""
    found = _loop_verbs(text, what)
    if found is None:
        return False
    i, verbs = found
    return (bool(verbs) and all("pipeline.order." in line for line in verbs)
            and _outside_branches(text, what, i))


def _one_role_syncs(text, what):
    """True when every op on a duplicated sync's barrier (same id, count and
    index) is a sync under the same branches: the warps of one role that
    only sync on it together, each running all of them."""
    i = _mutated_line(text, what)
    lines = text.split("\n")
    m = i is not None and re.search(r"named_barrier\.sync (id = .*)$", lines[i])
    if not m:
        return False
    sites = [j for j, line in enumerate(lines)
             if re.search(r"named_barrier\.\w+ " + re.escape(m.group(1)) + "$", line)
             or re.search(r"named_barrier\.\w+ id = " + m.group(1).split(",")[0][5:] + r"\b",
                          line)]
    if "index" in m.group(1):   # a range of ids: every named barrier op is one of them
        sites = [j for j, line in enumerate(lines) if "named_barrier." in line]
    if any("named_barrier.sync " + m.group(1) not in lines[j] for j in sites):
        return False   # an arrive, or the id with another count or index
    chains = {tuple(_enclosing_branches(lines, j)) for j in sites}
    return len(chains) == 1


def _whole_cta_sync(text, what):
    """True when the named barrier a duplicated sync waits at counts every
    thread of the block and every op on its id lies outside any ``scf.if``
    (each thread runs the same sequence of them)."""
    i = _mutated_line(text, what)
    lines = text.split("\n")
    m = i is not None and re.search(r"named_barrier\.sync id = (\d+), threads = (\d+)", lines[i])
    block = re.search(r"known_block_size = array<i32: (\d+), (\d+), (\d+)>", text)
    if not m or not block:
        return False
    if int(m.group(2)) != int(block.group(1)) * int(block.group(2)) * int(block.group(3)):
        return False
    for j, line in enumerate(lines):
        if not re.search(rf"named_barrier\.\w+ id = {m.group(1)}\b", line):
            continue
        if "index" in line.split("threads", 1)[1] or not _outside_branches(text, what, j):
            return False   # a ring of ids, or a role's barrier
    return True
