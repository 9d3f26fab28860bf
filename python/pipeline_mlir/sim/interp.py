"""The simulator's interpreter: every warp of every CTA of a launch (a
grid of clusters) runs a kernel's :class:`~.frontend.Node` tree (built by
``frontend.py``) as one agent, yielding a step at each pipeline verb
(:func:`make_world_factory`).

Values and divergence are as ``frontend.py`` describes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import asyncread as AR
from . import gmem as G
from . import memory as M
from . import rawbar as RB
from . import smemrace as SR
from . import tmem as TM
from . import verbs as V
from .evaluate import (  # noqa: F401  (_binop, _shuffle: tests import them here)
    _binop, _cmp, _gep, _lanes_of, _map, _shuffle, _signed)
from .engine import Agent, World
from .frontend import LOAD_OPS, STORE_OPS, UNKNOWN, Kernel, Lanes, Node
from .launch import (  # noqa: F401  (the API's names)
    MAX_BLOCK_THREADS, MAX_CLUSTER_CTAS, MAX_GRID_CTAS, Launch)
from .model import SimError, source_location
from .verbs import PipeRef, State


@dataclass(frozen=True)
class _ClcStage:
    """The full barrier of a clc_fetch_async stage, as a try_cancel names
    it (``phase``: the barrier phase the response completes)."""
    pid: int
    index: int
    phase: int


@dataclass(frozen=True)
class _StageBarrier:
    """The full barrier of a stage of any other pipeline, as
    ``producer_get_barrier`` hands it out: a raw arrive on it is an arrival."""
    pid: int
    index: int


# Raw NVVM arrives a kernel may make on a stage barrier handle (the checker
# rejects them statically: BarrierHandleChecks.cpp); each executing thread
# arrives once.
_RAW_ARRIVES = frozenset({
    "nvvm.mbarrier.arrive", "nvvm.mbarrier.arrive.shared", "nvvm.mbarrier.arrive.expect_tx",
    "nvvm.mbarrier.arrive.expect_tx.shared", "nvvm.mbarrier.arrive.nocomplete",
    "nvvm.mbarrier.arrive.nocomplete.shared", "nvvm.mbarrier.arrive_drop",
    "nvvm.mbarrier.arrive_drop.expect_tx", "nvvm.mbarrier.arrive_drop.nocomplete"})


class _Interp:
    """Runs a kernel's node tree for one warp agent."""

    def __init__(self, k: Kernel, launch: Launch, w: World, agent: Agent, pipes: dict):
        self.k, self.launch, self.w, self.a, self.pipes = k, launch, w, agent, pipes
        self.clc_seen = None     # (pipeline, stage) of the last CLC consumer.wait
        # Loops around the op running now: a named-barrier arrive outside
        # every loop is a start signal (the ping-pong's first turn), whose
        # arrivals may still be pending when the CTA exits.
        self.loop_depth = 0
        self.env: list = [UNKNOWN] * k.nslots
        bx, by, _ = launch.block_dim
        tids = [32 * agent.warp + lane for lane in range(32)]
        self.tid = {"x": Lanes(t % bx for t in tids), "y": Lanes((t // bx) % by for t in tids),
                    "z": Lanes(t // (bx * by) for t in tids)}
        # Its CTA in its cluster (%cluster_ctaid), its cluster in the grid
        # (%clusterid, clusters x fastest) and its CTA in the grid (%ctaid).
        cx, cy, cz = w.cluster.cta_id(agent.rank)
        self.cluster_ctaid = {"x": cx, "y": cy, "z": cz}
        gx, gy, _ = launch.clusters
        c = agent.cluster
        self.clusterid = {"x": c % gx, "y": (c // gx) % gy, "z": c // (gx * gy)}
        self.ctaid = {d: self.clusterid[d] * launch.cluster[i] + self.cluster_ctaid[d]
                      for i, d in enumerate("xyz")}
        # The input buffers of a kernel that branches on loaded values
        # (memory.py): pointer arguments get their bases, loads read them.
        self.mem, self.gm = w.memory, w.gmem
        self.loops: list[Node] = []   # the scf.while loops around the op running now
        # This warp's tcgen05.ld in flight ([lanes, loc], tmem.py) and the
        # slots holding their registers (or values passed on from them).
        self.lds: list[list] = []
        self.ld_slots: dict[int, list] = {}
        # Its tcgen05.st not yet waited (wait::st): [lanes, address, its
        # slot, columns, loc] (tmem.py).
        self.sts: list[list] = []
        if self.mem is not None:
            for pos in k.ptr_args:
                self.env[k.args[pos]] = M.base(pos)
        for pos, value in launch.args.items():
            if not 0 <= pos < len(k.args):
                raise SimError("unsupported", f"--arg {pos}: @{k.name} has {len(k.args)} "
                                              "arguments")
            if pos in k.ptr_args:
                continue  # a buffer's contents (memory.py)
            if not isinstance(value, int):
                raise SimError("unsupported", f"argument {pos} of @{k.name} is no global "
                                              f"pointer: its value must be an int, got {value!r}")
            self.env[k.args[pos]] = value

    def fail(self, node: Node, msg: str):
        raise SimError("unsupported", f"{node.name} at {node.loc}: {msg}")

    def uniform(self, node: Node, v, mask: int, what: str):
        if isinstance(v, Lanes):
            vals = {v[i] for i in _lanes_of(mask)}
            if len(vals) != 1:
                self.fail(node, f"{what} differs between the lanes of a warp")
            v = vals.pop()
        if v is UNKNOWN:
            self.fail(node, f"cannot evaluate {what} (depends on a kernel argument or memory)")
        return v

    def run(self, nodes: list[Node], mask: int):
        env = self.env
        for n in nodes:
            name = n.name
            if name in ("scf.yield", "scf.condition", "func.return", "gpu.return"):
                return [env[i] for i in n.ins]
            # The op this warp runs: a finding raised in it (or a deadlock
            # in its wait), whatever op it is, names its user's line.
            self.a.where = n.loc
            if self.ld_slots and not n.regions:
                TM.registers(self, n, mask)
            if name.startswith("pipeline."):
                res = yield from self.pipeline_op(n, mask)
                if n.outs:
                    env[n.outs[0]] = res
            elif name == "scf.if":
                yield from self.scf_if(n, mask)
            elif name == "scf.for":
                yield from self.scf_for(n, mask)
            elif name == "scf.while":
                yield from self.scf_while(n, mask)
            elif name == "nvvm.clusterlaunchcontrol.try.cancel":
                stage = env[n.ins[1]]
                if not isinstance(stage, _ClcStage):
                    self.fail(n, "the mbarrier is not a pipeline.producer.barrier of a "
                                 "clc_fetch_async pipeline")
                yield from V.clc_try_cancel(self.w, self.a, self.pipes[stage.pid], stage.index,
                                            stage.phase, _lanes_of(mask), n.a["multicast"])
            elif name == "nvvm.clusterlaunchcontrol.query.cancel":
                if self.clc_seen is None:
                    self.fail(n, "no consumer.wait on a clc_fetch_async pipeline before it")
                pid, idx = self.clc_seen
                env[n.outs[0]] = V.clc_response(self.w, self.a, self.pipes[pid], idx,
                                                n.a["query"])
            elif self.gm is not None and "gmem" in n.a:
                res = yield from G.access(self, n, mask)
                if n.outs:
                    env[n.outs[0]] = res
            elif self.gm is not None and "gfence" in n.a:
                self.gm.fence(self.a, *n.a["gfence"])
            elif self.w.rawbars is not None and "rawbar" in n.a and not isinstance(
                    env[n.ins[0]], _StageBarrier):   # a hand-driven mbarrier
                res = yield from RB.run_op(self, n, mask)
                for o in n.outs:
                    env[o] = res
            elif self.w.rawbars is not None and "st_async" in n.a:
                yield from RB.st_async(self, n, mask)
            elif "dsmem" in n.a:   # another CTA's shared memory (mapa)
                SR.cluster_access(self, n, mask, name in STORE_OPS)
                if name in LOAD_OPS:
                    self.scalar(n, mask)
            elif name in STORE_OPS and "smem" in n.a:
                staged = False
                for slot in n.a["stage_states"]:
                    st = env[slot]
                    if isinstance(st, State):
                        V.plain_store(self.a, st, name, n.loc,
                                      SR.granules(env[n.ins[1]], mask, n.a["smem"]))
                        staged = True
                if not staged:  # a stage's accesses are the pipelines' checks
                    self.smem_access(n, mask, n.ins[1], True)
            elif name in LOAD_OPS and "smem" in n.a:
                staged = False
                for slot in n.a["stage_states"]:
                    st = env[slot]
                    if isinstance(st, State):
                        V.plain_load(self.a, st, name, n.loc,
                                     SR.granules(env[n.ins[0]], mask, n.a["smem"]))
                        staged = True
                if not staged:
                    self.smem_access(n, mask, n.ins[0], False)
                self.scalar(n, mask)
            elif name in STORE_OPS and n.a["stage_states"]:
                for slot in n.a["stage_states"]:
                    st = env[slot]
                    if isinstance(st, State):
                        V.plain_store(self.a, st, name, n.loc)
            elif name in LOAD_OPS and n.a["stage_states"]:
                for slot in n.a["stage_states"]:
                    st = env[slot]
                    if isinstance(st, State):
                        V.plain_load(self.a, st, name, n.loc)
                self.scalar(n, mask)
            elif name in _RAW_ARRIVES and n.ins and isinstance(env[n.ins[0]], _StageBarrier):
                h = env[n.ins[0]]
                yield from V.raw_arrive(self.w, self.a, self.pipes[h.pid], h.index,
                                        _lanes_of(mask), name, n.loc)
            elif name in ("gpu.barrier", "nvvm.barrier0"):
                yield from V.named_sync(self.w, self.a, 0, self.launch.block_threads, False,
                                        _lanes_of(mask), site=n)
            elif name in ("nvvm.cluster.arrive", "nvvm.cluster.arrive.relaxed"):
                yield from V.cluster_arrive(self.w, self.a, _lanes_of(mask),
                                            name.endswith("relaxed"))
            elif name == "nvvm.cluster.wait":
                yield from V.cluster_wait(self.w, self.a, _lanes_of(mask))
            elif name == "nvvm.setmaxregister":
                from .sync_verbs import set_max_registers
                set_max_registers(self.w, self.a, n.a["regs"][0], source_location(n.loc))
            elif name == "nvvm.fence.proxy":
                if n.a.get("to_async"):
                    self.w.clocks.fence(self.a)
            elif "tmem" in n.a and name != AR.TCGEN05_MMA:
                TM.run_op(self, n, mask)
                if n.outs:
                    self.scalar(n, mask)
                for o in n.outs if n.a["tmem"][0] == "ld" else ():
                    self.ld_slots[o] = self.lds[-1]
            elif name in AR.NVVM_OPS:
                self.async_op(n, mask)
                if n.outs:
                    self.scalar(n, mask)
            elif n.regions and any(n.regions):
                self.fail(n, "unsupported op with regions")
            else:
                self.scalar(n, mask)
        return []

    def scalar(self, n: Node, mask: int):
        env, name, a = self.env, n.name, n.a
        args = [env[i] for i in n.ins]
        w = a.get("width", 64)
        r = UNKNOWN
        f = _binop(name, w, a.get("in_width", w))
        if f is not None:
            r = _map(f, *args)
        elif name == "arith.constant":
            r = a["value"]
        elif name == "arith.cmpi":
            cmp = _cmp(a["pred"], a["in_width"])
            r = _map(lambda x, y: int(cmp(x, y)), *args)
        elif name == "arith.select":
            r = _map(lambda c, x, y: x if c else y, *args) if all(
                isinstance(x, (int, Lanes)) for x in args) else (
                args[1] if args[0] == 1 else args[2] if args[0] == 0 else UNKNOWN)
        elif name in ("arith.index_cast", "arith.index_castui", "arith.extui", "arith.trunci"):
            m = (1 << w) - 1
            iw = a.get("in_width", w)
            r = _map((lambda x: _signed(x, iw) & m) if name == "arith.index_cast" else
                     (lambda x: x & m), args[0])
        elif name == "arith.extsi":
            r = _map(lambda x: _signed(x, a["in_width"]) & ((1 << w) - 1), args[0])
        elif name in ("nvvm.read.ptx.sreg.tid.x", "nvvm.read.ptx.sreg.tid.y", "nvvm.read.ptx.sreg.tid.z"):
            r = self.tid[name[-1]]
        elif name == "gpu.thread_id":
            r = self.tid[a["dim"]]
        elif name in ("nvvm.read.ptx.sreg.laneid", "gpu.lane_id"):
            r = Lanes(range(32))
        elif name == "nvvm.read.ptx.sreg.warpid":
            r = self.a.warp
        elif name in ("nvvm.read.ptx.sreg.cluster.ctarank", "gpu.cluster_block_id_linear"):
            r = self.a.rank
        elif name.startswith("nvvm.read.ptx.sreg.ctaid."):
            r = self.ctaid[name[-1]]
        elif name.startswith("nvvm.read.ptx.sreg.cluster.ctaid."):
            r = self.cluster_ctaid[name[-1]]
        elif name == "gpu.block_id":
            r = self.ctaid[a["dim"]]
        elif name == "gpu.cluster_block_id":
            r = self.cluster_ctaid[a["dim"]]
        elif name == "gpu.cluster_id":
            r = self.clusterid[a["dim"]]
        elif name.startswith("nvvm.read.ptx.sreg.nctaid.") or name == "gpu.grid_dim":
            r = self.launch.grid["xyz".index(a["dim"] if "dim" in a else name[-1])]
        elif name.startswith("nvvm.read.ptx.sreg.cluster.nctaid.") or name == "gpu.cluster_dim":
            r = self.launch.cluster["xyz".index(a["dim"] if "dim" in a else name[-1])]
        elif name.startswith("nvvm.read.ptx.sreg.clusterid."):
            r = self.clusterid[name[-1]]
        elif name.startswith("nvvm.read.ptx.sreg.nclusterid."):
            r = self.launch.clusters["xyz".index(name[-1])]
        elif name.startswith("nvvm.read.ptx.sreg.ntid.") or name == "gpu.block_dim":
            r = self.launch.block_dim["xyz".index(a["dim"] if "dim" in a else name[-1])]
        elif name == "nvvm.read.ptx.sreg.cluster.nctarank":
            r = self.w.cluster.size
        elif name == "nvvm.mapa":   # shared memory in a CTA's window (smemrace.py)
            r = _map(SR.remote, args[0], args[1])
        elif "gload" in a and self.mem is not None:
            r = self.load(args[0], mask, *a["gload"])
        elif "vote" in a:
            r = _vote(a["vote"], args[1], _lanes_of(mask))
        elif "position" in a:
            pos = a["position"][0] if len(a["position"]) == 1 else None
            pick = (lambda v: v[pos] if type(v) is tuple and pos is not None
                    and pos < len(v) else UNKNOWN)
            x = args[0]
            r = Lanes(pick(v) for v in x) if isinstance(x, Lanes) else pick(x)
        elif name == "nvvm.elect.sync":
            first = _lanes_of(mask)[0]
            r = Lanes(int(i == first) for i in range(32))
        elif name == "nvvm.shfl.sync" and not a["pair"]:
            r = _shuffle(a["shfl"], *args[1:4])
        elif "ptr" in a:  # shared-memory addresses (smemrace.py)
            p = a["ptr"]
            if p[0] == "gep":
                _, size, const, iw = p
                off = const if const is not None else args[1] if len(args) > 1 else UNKNOWN
                r = _gep(args[0], off, size, iw)
            elif p[0] == "cast":
                r = args[0] if p[1] is None else _map(lambda x: x & p[1], args[0])
            else:  # the dynamic shared memory's base
                r = 0
        for o in n.outs:
            env[o] = r

    def load(self, addr, mask: int, size: int, width: int):
        """A global load's value: the input buffer's contents (memory.py),
        read by the active lanes."""
        if isinstance(addr, Lanes):
            addr = Lanes(x if mask >> i & 1 else UNKNOWN for i, x in enumerate(addr))
        return self.mem.load(addr, size, width)

    def new_poll(self):
        """A poll waits on the words it read in its own loop only: a second
        wait on a counter already read starts afresh (gmem.py)."""
        if self.gm is not None:
            self.gm.warp(self.a).polls.clear()
        polls = getattr(self.a, "rawbar_polls", None)   # one-try mbarrier waits (rawbar.py)
        if polls:
            polls.clear()

    def mem_branch(self, n: Node, outcome: str):
        """Record what this warp took at a branch on loaded values."""
        if self.mem is not None and "mem" in n.a:
            self.mem.branch(n, self.a.label(), outcome)

    def scf_if(self, n: Node, mask: int):
        env = self.env
        c = env[n.ins[0]]
        then_r, else_r = n.regions[0], n.regions[1] if len(n.regions) > 1 else []
        if isinstance(c, Lanes):
            active = _lanes_of(mask)
            if any(c[i] is UNKNOWN for i in active):
                self.fail(n, "cannot evaluate the condition")
            tmask = sum(1 << i for i in active if c[i])
            emask = mask & ~tmask
            if tmask and emask:  # divergence: then-lanes first, then else-lanes
                self.mem_branch(n, f"then (lanes {tmask:#x}) + else")
                tv = (yield from self.run(then_r[0][1], tmask)) if then_r else []
                ev = (yield from self.run(else_r[0][1], emask)) if else_r else []
                for o, x, y in zip(n.outs, tv, ev):
                    env[o] = x if x is y else Lanes(
                        x[i] if isinstance(x, Lanes) else x if tmask >> i & 1 else
                        (y[i] if isinstance(y, Lanes) else y) for i in range(32))
                return
            c = 1 if tmask else 0
        elif c is UNKNOWN:
            self.fail(n, "cannot evaluate the condition (depends on a kernel argument or memory)")
        self.mem_branch(n, "then" if c else "else")
        region = then_r if c else else_r
        vals = (yield from self.run(region[0][1], mask)) if region else []
        for o, v in zip(n.outs, vals):
            env[o] = v

    def scf_for(self, n: Node, mask: int):
        env = self.env
        lb, ub, step = (env[i] for i in n.ins[:3])
        inits = [env[i] for i in n.ins[3:]]
        if any(isinstance(x, Lanes) for x in (lb, ub, step)):
            per_lane = self.lane_trips(n, mask, lb, ub, step)
            if per_lane is not None:
                yield from self.scf_for_lanes(n, mask, lb, step, per_lane, inits)
                return
            lb, ub, step = (self.uniform(n, x, mask, "a loop bound") for x in (lb, ub, step))
        if UNKNOWN in (lb, ub, step) or not all(isinstance(x, int) for x in (lb, ub, step)):
            if self.launch.trip_count is None:
                self.fail(n, "loop bounds are not constants; pass --arg POS=VALUE or "
                             "--trip-count")
            trips = self.launch.trip_count
        else:
            trips = max(0, -(-(ub - lb) // step)) if step else 0
        if "mem" in n.a and trips > self.launch.max_while_trips:
            # Bounds from loaded values (a negative length read as unsigned):
            # refused, not run for billions of trips.
            self.fail(n, f"the loop's bounds, computed from memory, give {trips} trips "
                         f"(more than {self.launch.max_while_trips}); give the buffers' values")
        self.mem_branch(n, f"{trips} trips")
        (args, body), = n.regions[0]
        vals = inits
        self.loop_depth += 1
        for i in range(trips):
            env[args[0]] = lb + i * step if isinstance(lb, int) and isinstance(step, int) else UNKNOWN
            for s, v in zip(args[1:], vals):
                env[s] = v
            vals = yield from self.run(body, mask)
        self.loop_depth -= 1
        for o, v in zip(n.outs, vals):
            env[o] = v

    def lane_trips(self, n: Node, mask: int, lb, ub, step) -> dict | None:
        """Trip counts per active lane of a loop whose bounds differ between
        the lanes (a strided loop from ``lane``); None when they agree."""
        if _protocol_ops(n):
            return None   # a pipeline's verbs run by some lanes: unsupported
        active = _lanes_of(mask)
        cols = [[x[i] if isinstance(x, Lanes) else x for i in active] for x in (lb, ub, step)]
        if all(len(set(c)) == 1 for c in cols):
            return None
        trips = {}
        for i, lo, hi, st in zip(active, *cols):
            if not all(isinstance(v, int) for v in (lo, hi, st)) or st == 0:
                self.fail(n, "cannot evaluate a loop bound of some lane")
            trips[i] = max(0, -(-(hi - lo) // st))
        return trips

    def scf_for_lanes(self, n: Node, mask: int, lb, step, trips: dict, inits: list):
        """A loop whose lanes run different trip counts: trip ``i`` runs with
        the lanes that still have one; the others keep their carried values
        (as divergent lanes do in scf_if)."""
        env = self.env
        (args, body), = n.regions[0]
        vals = inits
        self.loop_depth += 1
        for i in range(max(trips.values(), default=0)):
            m = sum(1 << lane for lane, t in trips.items() if t > i)
            env[args[0]] = Lanes((lb[j] if isinstance(lb, Lanes) else lb)
                                 + i * (step[j] if isinstance(step, Lanes) else step)
                                 for j in range(32))
            for s, v in zip(args[1:], vals):
                env[s] = v
            new = yield from self.run(body, m)
            vals = [y if y is x else Lanes(
                (y[j] if isinstance(y, Lanes) else y) if m >> j & 1 else
                (x[j] if isinstance(x, Lanes) else x) for j in range(32))
                for x, y in zip(vals, new)]
        self.loop_depth -= 1
        for o, v in zip(n.outs, vals):
            env[o] = v

    def scf_while(self, n: Node, mask: int):
        env = self.env
        (bargs, before), = n.regions[0]
        (aargs, after), = n.regions[1]
        vals = [env[i] for i in n.ins]
        self.loop_depth += 1
        self.loops.append(n)
        self.new_poll()
        for trips in range(self.launch.max_while_trips):
            for s, v in zip(bargs, vals):
                env[s] = v
            res = yield from self.run(before, mask)
            if not self.uniform(n, res[0], mask, "the loop condition"):
                self.mem_branch(n, f"{trips} trips")
                break
            for s, v in zip(aargs, res[1:]):
                env[s] = v
            vals = yield from self.run(after, mask)
        else:
            self.fail(n, f"the loop ran {self.launch.max_while_trips} times without ending")
        self.loops.pop()
        self.new_poll()
        self.loop_depth -= 1
        for o, v in zip(n.outs, res[1:]):
            env[o] = v

    # -- plain shared memory (smemrace.py) ------------------------------------
    def smem_access(self, n: Node, mask: int, addr_slot: int, store: bool):
        gs = SR.granules(self.env[addr_slot], mask, n.a["smem"])
        if store:
            SR.write(self.w, self.a, gs, n.name, n.loc)
        else:
            SR.read(self.w, self.a, gs, n.name, n.loc)

    def smem_async_read(self, n: Node, kind: str, mask: int):
        """An asynchronous read of plain shared memory (its source's start),
        ended by the retiring wait of its group (asyncread.py)."""
        a = n.a
        if "smem_src" in a:
            addrs = [SR.uniform(self.env[n.ins[a["smem_src"]]], mask)]
        else:
            addrs = [SR.wgmma_operand(SR.uniform(self.env[s], mask))
                     for s in a.get("descs", ())]
        for x in addrs:
            t = SR.async_read(self.w, self.a, x, n.name, n.loc, kind == "bulk")
            if t is not None:
                AR.issue_token(self.a, kind, t)

    # -- asynchronous readers of stage buffers (asyncread.py) -----------------
    def issue_read(self, n: Node, kind: str):
        states = [self.env[s] for s in n.a.get("reads", ())]
        AR.issue(self.a, kind, n.name, n.loc,
                 AR.held_stages(self.a, self.pipes, states))

    def async_op(self, n: Node, mask: int):
        name, a = n.name, self.a
        if name == AR.WGMMA:
            self.issue_read(n, "wgmma")
            self.smem_async_read(n, "wgmma", mask)
        elif name == AR.TCGEN05_MMA:
            self.issue_read(n, "tcgen05")
            self.w.tmem.use(a, "tcgen05.mma", n.loc, n.a["tmem"][1])
        elif name in AR.NVVM_BULK_STORES:
            self.issue_read(n, "bulk")
            self.smem_async_read(n, "bulk", mask)
            if self.gm is not None and "gbulk" in n.a:
                G.bulk_to_global(self, n, mask)
            if self.gm is not None and "gtma" in n.a:
                G.tma_to_global(self, n, mask)
        elif name == AR.NVVM_BULK_REDUCE:
            self.smem_async_read(n, "bulk", mask)
            if self.gm is not None:
                G.tma_to_global(self, n, mask)
        elif name == AR.WGMMA_COMMIT:
            AR.wgmma_commit(a)
        elif name == AR.WGMMA_WAIT:
            AR.wgmma_wait(a, n.a["group"])
        elif name == AR.TCGEN05_COMMIT:
            AR.tcgen05_commit(a)
        elif name == AR.NVVM_BULK_COMMIT:
            AR.bulk_commit(a)
            if self.gm is not None:
                self.gm.bulk_commit(a)
        elif name == AR.NVVM_BULK_WAIT:
            AR.bulk_wait(a, n.a["group"])
            if self.gm is not None:
                self.gm.bulk_wait(a, n.a["group"], n.a["read"])

    # -- the pipeline ops ------------------------------------------------------
    def pipeline_op(self, n: Node, mask: int):
        """Creation, init sync, states, named barriers and bulk groups here;
        the ops on a pipeline's stages in stage_op."""
        env, a, w = self.env, self.a, self.w
        a.where = n.loc  # a deadlock report names the op each warp waits in
        name, attrs = n.name[len("pipeline."):], n.a
        args = [env[i] for i in n.ins]
        lanes = _lanes_of(mask)

        def u(v, what):
            return self.uniform(n, v, mask, what)

        if name in _STAGE_OPS:
            return (yield from self.stage_op(n, name, mask))
        if name == "create":
            pid = attrs["pipe"]
            p = self.pipes[pid]
            at = attrs["storage"]
            storage = None if at is None else args[at]
            yield from V.create(w, a, p, attrs["defer"], lanes,
                                storage if type(storage) is int else None)
            return p
        if name == "init_arrive":
            yield from V.init_arrive(w, a, attrs["cluster_size"], lanes)
            return None
        if name == "init_wait":
            yield from V.init_wait(w, a, attrs["cluster_size"], lanes)
            return None
        if name == "state.make":
            stages, role = attrs["stages"], attrs["role"]
            origin = n.outs[0]  # this state.make: the lineage of its advances
            segs = attrs["segs"] or [0, 0, 0]
            if not any(segs):
                # A side's start state: its waits' phase numbers are exact
                # (State.pos); a producer_consumer one takes its side later.
                return State(stages, 0, 1 if role == "producer" else 0, 0, role, origin,
                             pos=None if role == "producer_consumer" else 0)
            vals = [u(x, "a state operand") for x in args]
            if attrs["simple"]:
                pi = vals[0]
                start = stages if role == "producer" else 0
                return State(stages, pi % stages, (pi // stages) & 1, pi - start, role, origin)
            return State(stages, vals[0], vals[1] & 1, vals[2] if len(vals) > 2 else 0, role,
                         origin)
        if name in ("state.advance", "state.index", "state.phase", "state.count"):
            st = u(args[0], "the pipeline state")
            if name == "state.advance":
                return st.advance(u(args[1], "the advance amount") if len(args) > 1 else 1)
            return getattr(st, name.split(".")[1])
        if name in ("named_barrier.arrive", "named_barrier.sync"):
            bar = attrs["barrier_id"] + (u(args[0], "the barrier index") if args else 0)
            if name.endswith("arrive"):
                yield from V.named_arrive(w, a, bar, attrs["num_threads"], attrs["unaligned"],
                                          lanes, start_signal=self.loop_depth == 0)
            else:
                yield from V.named_sync(w, a, bar, attrs["num_threads"], attrs["unaligned"],
                                        lanes, site=n)
            return None
        if name == "copy.tma_store":
            self.issue_read(n, "bulk")
            self.smem_async_read(n, "bulk", mask)
            if self.gm is not None:
                G.tma_to_global(self, n, mask)
            yield from V.tma_store(w, a, lanes)
            return None
        if name == "bulk_group.commit":
            AR.bulk_commit(a)
            if self.gm is not None:
                self.gm.bulk_commit(a)
            yield from V.bulk_commit(w, a)
            return None
        if name == "bulk_group.wait":
            AR.bulk_wait(a, attrs.get("pending", 0))
            if self.gm is not None:
                self.gm.bulk_wait(a, attrs.get("pending", 0), attrs["read"])
            yield from V.bulk_wait(w, a, attrs.get("pending", 0))
            return None
        self.fail(n, "not modelled by pipeline-sim")

    def stage_op(self, n: Node, name: str, mask: int):
        """The ops on a pipeline (and a state naming one of its stages): the
        producer / consumer / order verbs and the copies bound to a stage."""
        env, a, w, attrs = self.env, self.a, self.w, n.a
        args = [env[i] for i in n.ins]
        lanes = _lanes_of(mask)

        def u(v, what):
            return self.uniform(n, v, mask, what)

        def opt(seg_index):
            """Value of an optional operand by its segment (AttrSizedOperandSegments)."""
            segs = attrs["segs"]
            if not segs[seg_index]:
                return None
            return env[n.ins[sum(segs[:seg_index])]]

        p = u(args[0], "the pipeline")
        if not isinstance(p, PipeRef):
            self.fail(n, "the pipeline value does not come from a pipeline.create")
        if name == "order.state":
            return V.order_state(p, u(args[1], "the group id"))
        clc = p.spec.traits["producer_op_name"] == "clc_load"
        st = u(args[1], "the pipeline state")
        if not isinstance(st, State):
            self.fail(n, "the state value is not a pipeline state")
        if p.spec.kind == "tma_store":
            # PipelineTmaStore: commit = commit_group, acquire =
            # wait_group.read (stages - 1), tail = wait_group 0.
            if name == "producer.commit":
                AR.bulk_commit(a)
                if self.gm is not None:
                    self.gm.bulk_commit(a)
            elif name == "producer.acquire":
                AR.bulk_wait(a, p.spec.stages - 1)
            elif name == "producer.tail":
                AR.bulk_wait(a, 0)
        elif name in ("producer.acquire", "producer.try_acquire", "consumer.release"):
            if name == "consumer.release" and self.lds and p.spec.producer_op == V.UMMA:
                raise TM.unwaited(a, f"this consumer_release hands the tensor memory of "
                                     f"pipeline '{p.spec.name}' back", self.lds)
            umma = (name == "consumer.release"
                    and (attrs.get("op_type") or p.spec.consumer_op) == V.UMMA)
            AR.check_hand_back(a, p, st.index, f"pipeline.{name}", n.loc, umma)
        elif name in ("copy.tma_load", "copy.bulk"):
            # A copy into a stage this warp's own bulk store (or wgmma) may
            # still read: the store out must have read the stage first
            # (cp.async.bulk.wait_group.read).
            AR.check_hand_back(a, p, st.index, f"pipeline.{name}", n.loc, False)
        elif name == "producer.commit" and p.spec.producer_op == V.UMMA:
            AR.tcgen05_commit(a, landed=False)  # retired at its landing (verbs._umma_commit)
        if name == "producer.acquire":
            tok, extra = opt(2), opt(3)
            tok = None if tok is None else u(tok, "the token")
            extra = 0 if extra is None else u(extra, "extra_tx")
            yield from V.producer_acquire(w, a, p, st, lanes, tok, extra)
        elif name == "producer.try_acquire":
            return (yield from V.producer_try_acquire(w, a, p, st, lanes))
        elif name == "producer.commit":
            yield from V.producer_commit(w, a, p, st, lanes, attrs["elect_one"])
        elif name == "producer.tail":
            yield from V.producer_tail(w, a, p, st, lanes)
        elif name == "producer.barrier":
            # CLC requests name their barrier; a raw arrive on any other
            # pipeline's handle counts as an arrival (other uses are not
            # modelled: the handle is no number).
            if clc:
                return _ClcStage(p.pid, st.index, st.phase ^ 1)
            return _StageBarrier(p.pid, st.index)
        elif name == "consumer.wait":
            tok = u(args[2], "the token") if len(args) > 2 else None
            yield from V.consumer_wait(w, a, p, st, lanes, tok)
            if clc:
                self.clc_seen = (p.pid, st.index)
        elif name == "consumer.try_wait":
            return (yield from V.consumer_try_wait(w, a, p, st, lanes))
        elif name == "consumer.release":
            yield from V.consumer_release(w, a, p, st, lanes, attrs["elect_one"],
                                          attrs.get("op_type"))
        elif name == "copy.tma_load":
            m = opt(5)
            m = None if m is None else u(m, "the multicast mask")
            d = opt(4)
            d = None if d is None else SR.uniform(d, mask)
            yield from V.copy_load(w, a, p, st, lanes, attrs["bytes"], m, "copy.tma_load",
                                   d, n.loc)
        elif name == "copy.bulk":
            size = u(args[4], "the bulk copy size")
            yield from V.copy_load(w, a, p, st, lanes, size, None, "copy.bulk",
                                   SR.uniform(args[3], mask), n.loc)
        elif name == "order.wait":
            yield from V.order_wait(w, a, p, st, u(args[2], "the group id"), lanes)
        elif name == "order.arrive":
            return (yield from V.order_arrive(w, a, p, st, u(args[2], "the group id"), lanes))
        else:
            self.fail(n, "not modelled by pipeline-sim")
        return None


def _protocol_ops(n: Node) -> bool:
    """Whether the regions of ``n`` hold a pipeline op or a barrier (cached)."""
    got = n.a.get("protocol")
    if got is None:
        def walk(nodes):
            return any(x.name.startswith(("pipeline.", "nvvm.barrier", "gpu.barrier",
                                          "nvvm.mbarrier", "nvvm.cluster"))
                       or any(walk(blk) for r in x.regions for _, blk in r) for x in nodes)
        got = n.a["protocol"] = walk([x for r in n.regions for _, blk in r for x in blk])
    return got


def _vote(kind: str, pred, lanes: list[int]):
    """``vote.sync`` over the active lanes (any / all / uni / ballot)."""
    vals = [pred[i] if isinstance(pred, Lanes) else pred for i in lanes]
    if any(v is UNKNOWN or not isinstance(v, int) for v in vals):
        return UNKNOWN
    if kind == "ballot":
        return sum(1 << i for i, v in zip(lanes, vals) if v)
    return int({"any": any(vals), "all": all(vals), "uni": len(set(vals)) <= 1}[kind])


# The ops stage_op runs: they take a !pipeline.pipeline (and a state).
_STAGE_OPS = frozenset({
    "order.state", "producer.acquire", "producer.try_acquire", "producer.commit",
    "producer.tail", "producer.barrier", "consumer.wait", "consumer.try_wait",
    "consumer.release", "copy.tma_load", "copy.bulk", "order.wait", "order.arrive"})


def make_world_factory(k: Kernel, launch: Launch, max_steps: int = 200000, seed: int = 0):
    """A function that builds a fresh world running kernel ``k``:
    ``make(schedule)``, where the schedule's index (with ``seed``) draws
    the random fill of the input buffers a memory-dependent branch reads
    (memory.py)."""
    if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps <= 0:
        raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")

    given = {pos: v for pos, v in launch.args.items() if pos in k.ptr_args}

    def make(schedule: int = 0) -> World:
        w = World(launch.cluster, launch.block_threads, max_steps, launch.clusters)
        follow = k.global_sync or bool(launch.tensor_maps)   # gmem.py
        w.memory = (M.Memory(given, k.ptr_args, seed, schedule)
                    if k.memory_branches or follow else None)
        w.gmem = G.GlobalMemory(w, w.memory) if follow else None
        w.clc_left = launch.clc_clusters
        w.tmem = TM.TensorMemory(w)
        w.rawbars = {} if k.st_async else None   # rawbar.py
        w.created_at = k.created_at
        pipes = {pid: PipeRef(spec, pid) for pid, spec in k.pipes.items()}

        def body(agent: Agent):
            agent.exit_checks.append(lambda: V.finish_checks(w, agent, pipes))
            interp = _Interp(k, launch, w, agent, pipes)
            yield from interp.run(k.body, (1 << agent.threads) - 1)
        try:
            w.spawn(body)
        except SimError as err:  # raised before the first step
            M.annotate(err, w)
            raise
        return w
    make.takes_schedule = True
    return make
