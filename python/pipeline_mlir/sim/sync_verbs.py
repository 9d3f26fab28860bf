"""The barrier verbs: mbarrier waits (``try_wait.parity`` loops), the
init sync after ``pipeline.create``, the cluster barrier and named
barriers, as steps on the model (:mod:`.verbs` runs the pipeline verbs on
top of them).

A wait passes on a phase the way the hardware's does (any phase of the
other parity), and passing on an earlier phase than the waiter's state
means is a finding (:func:`wait`). Every barrier step also moves the vector
clocks (:mod:`.clocks`): arrivals release, passing waits acquire.
"""

from __future__ import annotations

from .engine import Agent, Step, World
from .model import BarrierName, Mbarrier, SimError, source_location
from .pipeline_types import PipelineSpec, PipeRef


# -- barriers of a pipeline -------------------------------------------------------

def _slot_name(spec: PipelineSpec, slot: int, cta: int) -> BarrierName:
    if spec.kind == "order":
        return BarrierName(spec.name, "order", slot, cta)
    if slot < spec.stages:
        return BarrierName(spec.name, "full", slot, cta)
    return BarrierName(spec.name, "empty", slot - spec.stages, cta)


def _barrier(w: World, a: Agent, p: PipeRef, slot: int, cta: int) -> Mbarrier:
    """Barrier ``slot`` of ``p`` in CTA ``cta`` (the grid's number), which
    must lie in ``a``'s cluster (a CTA signals barriers of its own cluster
    only)."""
    if cta not in w.cluster_ctas(a):
        raise SimError("unsupported", f"pipeline '{p.spec.name}' signals CTA "
                                      f"{cta - w.cta_of(a, 0)}, outside the launched cluster "
                                      f"of {w.cluster.size} CTA(s)")
    bar = w.ctas[cta].barriers.get((p.pid, slot))
    if bar is None:
        name = _slot_name(p.spec, slot, cta)
        raise SimError(
            "uninitialized",
            f"{a.label(p.spec.name)} uses {name} before warp 0 of CTA {cta} initialized it "
            f"(missing sync after pipeline.create, or init_wait)")
    return bar


def _where(name: BarrierName, a: Agent) -> str:
    s = f"pipeline '{name.pipeline}' {name.side} barrier stage {name.stage}"
    return s if name.cta == a.cta else f"{s} of CTA {name.cta}"


def wait(w: World, a: Agent, p: PipeRef, slot: int, cta: int, parity: int, verb: str, after=None,
         exact: int | None = None):
    """A blocking try_wait.parity loop, as one step enabled when it passes.

    ``exact``: the phase number the waiter's state means (State.phase_number),
    when known. The wait then passes as the hardware's does, whenever the
    barrier's current parity differs from ``parity``, and passing on an
    earlier phase of that parity (phase #n-1 not yet complete: the state
    jumped over phases another agent waits on, and nothing ordered this
    wait after them) is a finding: the stage still holds what it held two
    phases ago."""
    name = _slot_name(p.spec, slot, cta)

    def bar():
        return w.ctas[cta].barriers.get((p.pid, slot))

    def enabled():
        b = bar()
        if b is None:
            return True
        n = b.target_phase(a.id, parity, exact)
        return b.phase_done(n) or (n == exact and b.parity != parity)

    def located(who):
        loc = source_location(a.where)
        return [f"{who} at {loc}"] if loc else []

    def fire():
        b = _barrier(w, a, p, slot, cta)
        n = b.target_phase(a.id, parity, exact)
        who = a.label(p.spec.name)
        if n == -1 and name.side == "full":
            raise SimError(
                "initial-phase",
                f"{who} passes {verb} on {_where(name, a)} phase {parity} before any phase of it "
                f"completed: a consumer state must start at phase 0 (wrong initial phase)",
                located(who))
        if not b.phase_done(n):
            kind = "early-read" if name.side == "full" else "overwrite"
            raise SimError(
                kind,
                f"{who} passes {verb} on {_where(name, a)} for phase {parity} (#{n}) while "
                f"phase #{b.completed} is in progress: parity {parity} also names phase "
                f"#{b.completed - 1}, which completed, so the wait returns on the stage's old "
                f"{'contents' if name.side == 'full' else 'reader'}. Its state jumped over "
                f"phase #{n - 1} of this barrier (state.advance(n) over stages another agent "
                f"consumes) and nothing orders this wait after that phase: make the agents "
                f"take turns (PipelineOrder.wait before the loop, arrive after it, as "
                f"CUTLASS's ping-pong consumers do) or give each its own stages",
                located(who))
        try:
            b.observe(a.id, n, who)
        except SimError as e:
            e.where = e.where or located(who)
            raise
        w.clocks.acquire(a, b.phase_clocks.get(n))
        if after:
            after()

    def what():
        b = bar()
        detail = f" ({b.describe()})" if b else " (not initialized)"
        return f"{a.label(p.spec.name)} waits on {_where(name, a)} phase {parity} in {verb}{detail}"

    def cause():
        b = bar()
        return b.root_cause() if b else None

    yield Step(fire, enabled, what, p.spec.name, cause)


def _try_wait(w: World, a: Agent, p: PipeRef, slot: int, parity: int, exact: int | None = None):
    def fire():
        b = _barrier(w, a, p, slot, a.cta)
        n = b.target_phase(a.id, parity, exact)
        if not b.phase_done(n):
            return 0
        b.observe(a.id, n, a.label(p.spec.name))
        w.clocks.acquire(a, b.phase_clocks.get(n))
        return 1
    return (yield Step(fire, None, lambda: f"{a.label(p.spec.name)} try_wait", p.spec.name))



# -- init sync, cluster barrier, named barriers ----------------------------------

def init_arrive(w: World, a: Agent, cluster_size: int, lanes: list[int]):
    if cluster_size <= 1:
        return
    yield from cluster_arrive(w, a, lanes)


def init_wait(w: World, a: Agent, cluster_size: int, lanes: list[int]):
    if cluster_size <= 1:
        yield from named_sync(w, a, 0, w.block_threads, False, lanes)
        return
    yield from cluster_wait(w, a, lanes, "pipeline.init_wait", "init_arrive")


def _live(w: World, a: Agent):
    return w.live_in_cluster(a)


def cluster_arrive(w: World, a: Agent, lanes: list[int], relaxed: bool = False):
    """``barrier.cluster.arrive`` by the active lanes (model.ClusterBarrier)
    on the barrier of the warp's own cluster (it counts, and orders, the
    CTAs of that cluster only); ``.relaxed`` orders no memory (it releases
    no clock)."""
    cb = w.clusters[a.cluster].barrier

    def fire():
        gen = cb.arrive(a, len(lanes), a.label(), _live(w, a))
        if not relaxed:
            w.clocks.named_arrived(cb, gen)
        a.cluster_gen = gen
    yield Step(fire, None, lambda: f"{a.label()} arrives on {cb.name}")


def cluster_wait(w: World, a: Agent, lanes: list[int], verb: str = "barrier.cluster.wait",
                 arrive: str = "barrier.cluster.arrive"):
    """``barrier.cluster.wait``: until the phase of this warp's last arrive
    completes (every thread of the cluster not exited arrived)."""
    cb = w.clusters[a.cluster].barrier
    if a.cluster_gen is None:
        raise SimError("unbalanced", f"{a.label()} runs {verb} without {arrive} before it")
    gen = a.cluster_gen

    def fire():
        w.clocks.named_passed(a, cb, gen)
        a.cluster_gen = None
        a.cluster_waited = True  # the cluster's CTAs have launched (tmem.py)
    yield Step(fire, lambda: cb.generation > gen,
               lambda: f"{a.label()} waits on {cb.name} ({cb.progress(_live(w, a))})")


def named_arrive(w: World, a: Agent, bar_id: int, threads: int, unaligned: bool, lanes: list[int],
                 start_signal: bool = False):
    """``bar.arrive``; ``start_signal``: the op lies outside every loop (a
    first turn handed over once, whose arrivals may be left pending at the
    CTA's exit: see ``World.agent_finished``)."""
    nb = w.ctas[a.cta].named_barrier(bar_id)
    k = len(lanes) if unaligned else a.threads
    where = a.where

    def fire():
        if start_signal:
            nb.credit += k
        gen = nb.arrive(k, threads, a.label(), None if unaligned else a.warp)
        nb.last_arrive = (a.label(), where)
        w.clocks.named_arrived(nb, gen)
        return gen
    yield Step(fire, None, lambda: f"{a.label()} arrives on {nb.name}")


def named_sync(w: World, a: Agent, bar_id: int, threads: int, unaligned: bool, lanes: list[int],
               site=None):
    """``bar.sync`` / ``barrier.sync``. ``site``: the op (a frontend Node)
    of an aligned sync: the blocking participants of one generation of an
    aligned barrier must run the same barrier instruction (PTX: from
    distinct sites it is undefined; compute-sanitizer reports divergent
    barriers), a ``divergent-barrier`` finding."""
    nb = w.ctas[a.cta].named_barrier(bar_id)
    k = len(lanes) if unaligned else a.threads

    def arrive():
        gen = nb.arrive(k, threads, a.label(), None if unaligned else a.warp)
        if site is not None and not unaligned:
            _same_site(w, a, nb, bar_id, threads, gen, site)
        w.clocks.named_arrived(nb, gen)
        return gen
    gen = yield Step(arrive, None, lambda: f"{a.label()} arrives on {nb.name}")
    yield Step(lambda: w.clocks.named_passed(a, nb, gen), lambda: nb.generation > gen,
               lambda: f"{a.label()} waits on {nb.name} ({nb.count} of {threads} threads arrived)")



def _same_site(w: World, a: Agent, nb, bar_id: int, threads: int, gen: int, site) -> None:
    key = (a.cta, bar_id, gen)
    first = w.aligned_sites.setdefault(key, (site, a.label()))
    if first[0] is site:
        return
    if any(e.kind == "divergent-barrier" for e in w.deferred):
        return  # one per schedule
    here, there = source_location(site.loc), source_location(first[0].loc)
    other = ("another barrier instruction built from the same line" if here == there
             else "another site")
    # Not the end of the schedule: the hang or race the barrier leads to
    # (two roles' hand-overs counted together, say) is reported too.
    w.deferred.append(SimError(
        "divergent-barrier",
        f"{a.label()} syncs {nb.name} (bar.sync {bar_id}, {threads}){f' at {here}' if here else ''}"
        f" in the generation {first[1]} synced at {other}"
        f"{f' ({there})' if there and here != there else ''}: an aligned barrier's blocking "
        f"participants must run the same barrier instruction (undefined otherwise; "
        f"compute-sanitizer reports divergent barriers). Sync at one site, or use the "
        f"unaligned form (barrier.sync, NamedBarrier.wait_unaligned) at each",
        [x for x in (f"{a.label()} at {here}" if here else None,
                     f"{first[1]} at {there}" if there else None) if x]))


# -- the register file (setmaxnreg) -----------------------------------------------

REGISTER_FILE = 65536   # registers of an SM, which the CTA's warps divide
_MAX_REGISTERS = 256    # per thread: the cap of a kernel with .reqntid


def launch_registers(block_threads: int) -> int:
    """Registers per thread every warp starts with: the register file over
    the block's threads in steps of 8, at most 256 (as the checker's
    register budget, RegisterBudgetChecks.cpp)."""
    return min(_MAX_REGISTERS, REGISTER_FILE // block_threads // 8 * 8)


def set_max_registers(w: World, a: Agent, count: int, where: str | None) -> None:
    """``setmaxnreg.{inc,dec}.sync.aligned.u32 count`` by a warp, as a
    check, not a scheduling point (the schedules of a kernel stay those it
    had without it). A decrease gives registers back to the CTA's pool; an
    increase takes what it adds (32 lanes x the difference) from the pool,
    and when the pool does not hold them yet the warp waits for them on
    the GPU. The simulator lets it run on, owing them; a later
    ``setmaxnreg.dec`` of another warp pays the debts first owed, but only
    those of warps whose progress past their increase it does not depend
    on (happens-before, clocks.py: a decrease that waited, through some
    barrier, on what the owing warp did after its increase cannot have run
    while that warp waited). Registers still owed when the CTA exits were
    never given back: the increase waits forever, a deadlock (naming the
    dependent decrease, if one came: the two wait for each other).

    Registers stay with their warp until it decreases them: a warp that
    exits returns none (the checker's budget counts what each warpgroup
    holds at the most)."""
    entry = launch_registers(w.block_threads)
    pools = w.register_pool
    if a.cta not in pools:
        pools[a.cta] = REGISTER_FILE - entry * w.block_threads
        w.ctas[a.cta].exit_checks.append(lambda: _registers_owed(w, a.cta, entry))
    held = entry if a.registers is None else a.registers
    a.registers = count
    delta = 32 * (count - held)
    debts = w.register_debts.setdefault(a.cta, [])
    verb = f"setmaxnreg.{'inc' if delta > 0 else 'dec'} {count}"
    if delta > 0:
        take = min(delta, pools[a.cta])
        pools[a.cta] -= take
        if take < delta:
            # Owed: [warp, registers owed, its clock at the increase, what,
            # where, the last decrease that depended on it].
            debts.append([a, delta - take, a.vc[a.id], verb, where, None])
        return
    freed = -delta
    for d in debts:
        if not freed:
            break
        owing, epoch = d[0], d[2]
        if owing is a or a.vc[owing.id] >= epoch:
            d[5] = (a.label(), verb, where)  # it waited on the owing warp
            continue
        pay = min(freed, d[1])
        d[1] -= pay
        freed -= pay
    debts[:] = [d for d in debts if d[1]]
    pools[a.cta] += freed


def _registers_owed(w: World, cta: int, entry: int) -> None:
    """At the CTA's exit: an increase whose registers no warp gave back."""
    debts = w.register_debts.get(cta)
    if not debts:
        return
    owing, owed, _, verb, where, dependent = debts[0]
    at = f" at {where}" if where else ""
    if dependent is not None:
        who, dec, dec_at = dependent
        raise SimError(
            "deadlock",
            f"{owing.label()} waits in {verb}{at} for {owed} registers that only {who}'s "
            f"{dec}{f' at {dec_at}' if dec_at else ''} gives back, and that {dec} runs after "
            f"what {owing.label()} did past its increase (it waits on it): the two wait for "
            f"each other. Give the registers back before the work the other warps' increase "
            f"holds up (setmaxnreg.dec at the start of the role)",
            [x for x in (f"{owing.label()} at {where}" if where else None,
                         f"{who} at {dec_at}" if dec_at else None) if x])
    raise SimError(
        "deadlock",
        f"{owing.label()} waits in {verb}{at} for {owed} registers no warp gives back: every "
        f"warp starts at {entry} per thread ({REGISTER_FILE} over {w.block_threads} threads), "
        f"and only a setmaxnreg.dec of another warp returns some (a role that never decreases "
        f"keeps its launch count), so the increase never returns",
        [f"{owing.label()} at {where}"] if where else [])
