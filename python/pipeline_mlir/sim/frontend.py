"""From an ``mlir.ir.Module`` to the simulator's kernels.

A kernel is a ``gpu.func`` or ``func.func`` that contains pipeline ops. Its
body is compiled once into a light tree of :class:`Node` (op name, operand
and result slots, the attributes the interpreter needs, nested regions) so
that running hundreds of schedules does not go back through the bindings.
Every warp of every CTA then interprets that tree as one agent
(``interp.py``), yielding a step at each pipeline verb.

Values are Python ints (integers as unsigned bit patterns of their width,
i1 as 0/1), :data:`UNKNOWN` (kernel arguments, pointers, loads), lane
vectors (:class:`Lanes`, for values that differ between the lanes of a warp:
thread and lane ids, ``elect.sync``), :class:`~.verbs.State` and
:class:`~.verbs.PipeRef`. Pipeline facts come from the op types through the
Python type classes (``pl.PipelineType``, ``pl.StateType``).

Divergence: an ``scf.if`` whose condition differs between the active lanes
runs its then-region with those lanes, then its else-region with the others
(program order, no interleaving between the two halves of one warp).
"""

from __future__ import annotations

import re

from dataclasses import dataclass, field

import mlir.ir as ir

from . import asyncread as AR
from .model import SimError
from .verbs import Group, PipelineSpec


class _Unknown:
    def __repr__(self):
        return "?"


UNKNOWN = _Unknown()


class Lanes(tuple):
    """Per-lane values of a warp (32 entries)."""


# -- compiled IR --------------------------------------------------------------

# `"file":line:col` inside a printed location, whatever wraps it.
_FILE_LOC = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')


def user_loc(loc) -> str:
    """The printed location of an op reduced to its user's line,
    ``loc("file":line:col)``, which ``model.source_location`` reads: the
    first file location inside a ``callsite`` (the callee: the op's own
    line), ``fused`` or named (``"k_tiles"(...)``) location, so findings keep
    the user's file:line whatever the builders or passes wrapped around it.
    Locations without one (unknown, text parsed from a string, whose file
    is "-") stay as printed."""
    text = str(loc)
    if text.startswith('loc("') and _FILE_LOC.fullmatch(text[4:-1]):
        return text  # the common case: already a plain file location
    for m in _FILE_LOC.finditer(text):
        if m.group(1) not in ("", "-"):
            return f'loc("{m.group(1)}":{m.group(2)}:{m.group(3)})'
    return text


class Node:
    __slots__ = ("name", "ins", "outs", "a", "regions", "loc")

    def __init__(self, name, ins, outs, a, regions, loc):
        self.name, self.ins, self.outs, self.a, self.regions, self.loc = name, ins, outs, a, regions, loc


@dataclass
class Kernel:
    name: str
    args: list[int]
    body: list[Node]
    nslots: int
    block_dim: tuple[int, int, int] | None
    pipes: dict[int, PipelineSpec] = field(default_factory=dict)  # create index -> spec
    int_args: dict[int, int] = field(default_factory=dict)  # position -> bit width
    # pipeline name -> location of its pipeline.create: findings about what
    # create declares (barrier init, counts, tx bytes) name that line too.
    created_at: dict[str, str] = field(default_factory=dict)
    # position -> name ("" when unnamed) of the pointer arguments whose
    # buffers global loads read (memory.py).
    ptr_args: dict[int, str] = field(default_factory=dict)
    # Some branch, loop bound or loop condition depends on a global load
    # (memory.py: the interpreter then reads the pointer arguments' buffers).
    memory_branches: bool = False
    # The kernel synchronizes through global memory: an atomic, a volatile
    # or ordered access, or a fence (gmem.py: the interpreter then follows
    # what it writes and reads back).
    global_sync: bool = False
    # An st.async into another CTA's shared memory: the kernel's own
    # mbarriers are modelled (rawbar.py).
    st_async: bool = False

    @property
    def cluster_size(self) -> int:
        return max([s.cluster_size for s in self.pipes.values()] or [1])


def _width(t) -> int:
    try:
        return ir.IntegerType(t).width
    except Exception:  # index and anything else: 64 bits
        return 64


def _enum_name(x) -> str:
    return str(x).split(".")[-1].lower()


def _group(g) -> Group | None:
    if g is None:
        return None
    return Group({"thread": "thread", "warp": "warp", "threadblock": "threadblock",
                  "threadblockcluster": "cluster", "cluster": "cluster"}[
                      _enum_name(g.agent).replace("_", "")], g.size)


def pipeline_spec(t, name: str) -> PipelineSpec:
    """A PipelineSpec from a ``pl.PipelineType`` (never from its string)."""
    from ..dialects import pipeline as pl
    pt = pl.PipelineType(t)
    c = pt.cluster
    return PipelineSpec(
        name=name, kind=pl.kind_traits(pt.kind)["kind_name"], stages=pt.stages,
        producer=_group(pt.producer), consumer=_group(pt.consumer), tx_count=pt.tx_count,
        cluster=None if c is None else (c.v, c.m, c.n, c.l),
        multicast=_enum_name(pt.multicast), cta_group=pt.cta_group, length=pt.length)


# Stores whose address may name a stage buffer: the stored value is operand
# 0, the address (a pointer, or a memref and its indices) the rest.
STORE_OPS = ("llvm.store", "memref.store", "vector.store")
LOAD_OPS = ("llvm.load", "memref.load", "vector.load")
# Tensor-memory ops (tmem.py) and what each does.
_TMEM_OPS = {"nvvm.tcgen05.alloc": "alloc", "nvvm.tcgen05.dealloc": "dealloc",
             "nvvm.tcgen05.relinquish_alloc_permit": "relinquish", "nvvm.tcgen05.ld": "ld",
             "nvvm.tcgen05.st": "st", "nvvm.tcgen05.wait": "wait", "nvvm.tcgen05.cp": "cp",
             "nvvm.tcgen05.mma": "mma"}


# Ops an address computation goes through (pure pointer and integer math).
_ADDRESS_OPS = ("llvm.getelementptr", "llvm.inttoptr", "llvm.ptrtoint", "llvm.addrspacecast",
                "llvm.bitcast", "memref.subview", "memref.reinterpret_cast", "memref.view",
                "memref.cast")


SMEM_PTR = "!llvm.ptr<3>"
DSMEM_PTR = "!llvm.ptr<7>"     # shared::cluster: a CTA's window of the cluster
_TMA_TO_GLOBAL = ("nvvm.cp.async.bulk.tensor.global.shared.cta",
                  "nvvm.cp.async.bulk.tensor.reduce", "pipeline.copy.tma_store")
_ELEM_BYTES = {"i1": 1, "i8": 1, "i16": 2, "f16": 2, "bf16": 2, "i32": 4, "f32": 4, "i64": 8,
               "f64": 8, "i128": 16}
_VECTOR = re.compile(r"vector<(\d+)x(\w+)>")


def type_bytes(t) -> int | None:
    """The bytes of a scalar or 1-D vector type; None for anything else."""
    text = str(t)
    if text in _ELEM_BYTES:
        return _ELEM_BYTES[text]
    m = _VECTOR.fullmatch(text)
    if m and m.group(2) in _ELEM_BYTES:
        return int(m.group(1)) * _ELEM_BYTES[m.group(2)]
    return None


def _smem_facts(op, name: str, a: dict) -> None:
    """What the plain-shared-memory race detector (smemrace.py) needs of
    ``op``: how pointer ops compute shared-memory offsets, the bytes and
    address operand of plain accesses through ``!llvm.ptr<3>``, the source
    of asynchronous readers and the descriptors of a wgmma."""
    if name == "llvm.mlir.addressof":
        if str(op.results[0].type) == SMEM_PTR:
            a["ptr"] = ("base",)
    elif name == "llvm.getelementptr":
        attrs = op.attributes
        elem = (type_bytes(ir.TypeAttr(attrs["elem_type"]).value) if "elem_type" in attrs
                else None)
        raw = list(ir.DenseI32ArrayAttr(attrs["rawConstantIndices"]))
        if elem is not None and len(raw) == 1:
            dynamic = raw[0] == -2147483648
            a["ptr"] = ("gep", elem, None if dynamic else raw[0],
                        _width(op.operands[1].type) if dynamic else 64)
    elif name in ("llvm.ptrtoint", "llvm.inttoptr", "llvm.addrspacecast"):
        a["ptr"] = ("cast", (1 << _width(op.results[0].type)) - 1
                    if name == "llvm.ptrtoint" else None)
    elif name in ("llvm.store", "llvm.load"):
        ptr = op.operands[1 if name == "llvm.store" else 0]
        if str(ptr.type) == SMEM_PTR:
            val = op.operands[0] if name == "llvm.store" else op.results[0]
            a["smem"] = type_bytes(val.type) or 16
    elif name in AR.NVVM_BULK_STORES or name in (AR.NVVM_BULK_REDUCE, "pipeline.copy.tma_store"):
        for i, v in enumerate(op.operands):
            if str(v.type) == SMEM_PTR:
                a["smem_src"] = i
                break


# Global memory the kernel writes and reads back (gmem.py): the pointer
# operand of each access, and fences that order global memory.
_GMEM_PTR = {"llvm.load": 0, "llvm.store": 1, "llvm.atomicrmw": 0, "llvm.cmpxchg": 0}
_SCOPES = ("cta", "cluster", "gpu", "sys")
# LLVM's NVPTX sync scopes: "" is the system's.
_SYNCSCOPE = {"block": "cta", "cluster": "cluster", "device": "gpu", "": "sys"}


def _gmem_facts(op, name: str, a: dict) -> None:
    """``a["gmem"]`` for a load, store, ``atomicrmw`` or ``cmpxchg`` through a
    global (or generic) pointer: ``(kind, bytes, int width or None,
    ordering, sync scope, volatile, bin_op)``, kind one of load / store /
    rmw / cas (ordering: LLVM's AtomicOrdering value, 0 for a plain
    access); ``a["gfence"]`` = (scope, acquires, releases) for a fence
    (``membar``, ``fence.sc.cluster``, ``llvm.fence``)."""
    attrs = op.attributes
    if name == "nvvm.memory.barrier":
        scope = next((s for s in _SCOPES if f"<{s}>" in str(attrs["scope"])), "gpu")
        a["gfence"] = (scope, True, True)
        return
    if name == "nvvm.fence.sc.cluster":
        a["gfence"] = ("cluster", True, True)
        return
    if name == "llvm.fence":
        order = ir.IntegerAttr(attrs["ordering"]).value
        scope = _SYNCSCOPE.get(ir.StringAttr(attrs["syncscope"]).value
                               if "syncscope" in attrs else "", "sys")
        a["gfence"] = (scope, order in (4, 6, 7), order in (5, 6, 7))
        return
    i = _GMEM_PTR.get(name)
    if i is None or str(op.operands[i].type) not in ("!llvm.ptr<1>", "!llvm.ptr"):
        return
    val = (op.results[0] if name == "llvm.load" else
           op.operands[0] if name == "llvm.store" else op.operands[1])
    kind = {"llvm.load": "load", "llvm.store": "store", "llvm.atomicrmw": "rmw",
            "llvm.cmpxchg": "cas"}[name]
    order_attr = "success_ordering" if kind == "cas" else "ordering"
    order = ir.IntegerAttr(attrs[order_attr]).value if order_attr in attrs else 0
    scope = _SYNCSCOPE.get(ir.StringAttr(attrs["syncscope"]).value
                           if "syncscope" in attrs else "", "sys")
    width = _width(val.type) if isinstance(val.type, ir.IntegerType) else None
    a["gmem"] = (kind, type_bytes(val.type) or 4, width, order, scope,
                 "volatile_" in attrs,
                 ir.IntegerAttr(attrs["bin_op"]).value if kind == "rmw" else None)


def _tmem_columns(op, verb: str) -> int:
    """The tensor-memory columns a warp's tcgen05.ld / st covers: a column
    per register of a thread for ``32x32b``, two for the 16-lane shapes
    (twice as many with 16-bit packing)."""
    t = op.results[0].type if verb == "ld" else op.operands[1].type
    m = _VECTOR.fullmatch(str(t))
    regs = int(m.group(1)) if m else 1
    shape = str(op.attributes["shape"])
    packed = "pack" in op.attributes or "unpack" in op.attributes
    return regs * (1 if "32x32b" in shape else 2) * (2 if packed else 1)


def _address_states(store, first=1) -> list:
    """The state values whose ``pipeline.state.index`` the address of
    ``store`` is computed from (through _ADDRESS_OPS and arith ops; block
    arguments, loads and other ops end the walk). This is how a plain store
    is tied to a stage, as in the checker's StageAccessAfterHandoff.cpp; a load
    (``first=0``: its address is its first operand) the same way."""
    found, seen = [], set()
    work = list(store.operands)[first:]
    while work:
        v = work.pop()
        owner = v.owner
        if isinstance(owner, ir.Block):
            continue
        op = owner.operation if hasattr(owner, "operation") else owner
        if op in seen:
            continue
        seen.add(op)
        if op.name == "pipeline.state.index":
            found.append(op.operands[0])
        elif op.name.startswith("arith.") or op.name in _ADDRESS_OPS:
            work.extend(op.operands)
    return found


class _Compiler:
    def __init__(self):
        self.slots: dict = {}
        self.pipes: dict[int, PipelineSpec] = {}
        self.created_at: dict[str, str] = {}
        # The last op in program order with a file location: an access of
        # plain shared memory built without one (a raw NVVM op) takes it.
        self.last_loc: str | None = None

    def slot(self, v) -> int:
        s = self.slots.get(v)
        if s is None:
            s = self.slots[v] = len(self.slots)
        return s

    def block(self, block) -> tuple[list[int], list[Node]]:
        args = [self.slot(a) for a in block.arguments]
        return args, [self.op(op) for op in block.operations]

    def op(self, op) -> Node:
        op = op.operation
        name = op.name
        if AR.is_wgmma_asm(op):
            name = AR.WGMMA  # register-A wgmma, issued as inline asm
        a: dict = {}
        attrs = op.attributes
        if name == "arith.constant":
            try:
                v = ir.IntegerAttr(attrs["value"]).value
                a["value"] = v & ((1 << _width(op.results[0].type)) - 1)
            except Exception:
                a["value"] = UNKNOWN
        elif name == "arith.cmpi":
            a["pred"] = ir.IntegerAttr(attrs["predicate"]).value
        elif name in ("gpu.thread_id", "gpu.block_id", "gpu.block_dim", "gpu.cluster_block_id",
                      "gpu.cluster_id", "gpu.grid_dim", "gpu.cluster_dim"):
            a["dim"] = str(attrs["dimension"]).split()[-1].rstrip(">")
        elif name == "pipeline.create":
            from ..dialects import pipeline as pl  # noqa: F401  (registers the type classes)
            pname = attrs["name"].value if "name" in attrs else op.results[0].get_name()
            pid = len(self.pipes)
            self.pipes[pid] = pipeline_spec(op.results[0].type, pname)
            self.created_at.setdefault(pname, user_loc(op.location))
            a["pipe"] = pid
            a["defer"] = "defer_sync" in attrs
            # The barrier storage's operand: pipelines created on the same
            # bytes share their mbarriers (verbs.create).
            a["storage"] = next((i for i, v in enumerate(op.operands)
                                 if str(v.type) == SMEM_PTR), None)
        elif name in ("pipeline.state.make",):
            from ..dialects import pipeline as pl
            st = pl.StateType(op.results[0].type)
            a["stages"], a["role"], a["simple"] = st.stages, _enum_name(st.role), st.simple
            a["segs"] = list(ir.DenseI32ArrayAttr(attrs["operandSegmentSizes"])) \
                if "operandSegmentSizes" in attrs else None
        if name.startswith(("arith.", "nvvm.", "gpu.")) and op.results:
            a["width"] = _width(op.results[0].type)
        if name in ("arith.cmpi", "arith.extsi", "arith.trunci", "arith.extui", "arith.divsi",
                    "arith.remsi", "arith.shrsi", "arith.index_cast") and op.operands:
            a["in_width"] = _width(op.operands[0].type)
        for key in ("bytes", "pending", "barrier_id", "num_threads", "cluster_size"):
            if key in attrs:
                a[key] = ir.IntegerAttr(attrs[key]).value
        for key in ("elect_one", "read", "unaligned", "relaxed"):
            a[key] = key in attrs
        if (name == "llvm.load" and str(op.operands[0].type) != SMEM_PTR
                and "volatile_" not in attrs
                and not ("ordering" in attrs and ir.IntegerAttr(attrs["ordering"]).value)):
            # A plain global load of an integer: it reads the launch's
            # inputs (memory.py). Atomic and volatile loads (a counter other
            # CTAs bump, polled) read what the kernel writes: unknown.
            t = op.results[0].type
            if isinstance(t, ir.IntegerType) and type_bytes(t):
                a["gload"] = (type_bytes(t), _width(t))
        if name == "nvvm.setmaxregister":
            a["regs"] = (ir.IntegerAttr(attrs["regCount"]).value,
                         "increase" in str(attrs["action"]))
        if name == "nvvm.shfl.sync":
            a["shfl"] = str(attrs["kind"]).split()[-1].rstrip(">")
            a["pair"] = "return_value_and_is_valid" in attrs
        if name == "nvvm.clusterlaunchcontrol.query.cancel":
            a["query"] = str(attrs["query_type"]).split("<")[-1].rstrip(">")
        if name == "nvvm.clusterlaunchcontrol.try.cancel":
            a["multicast"] = "multicast" in attrs
        if name in AR.NVVM_BULK_STORES or name in (AR.WGMMA, AR.TCGEN05_MMA,
                                                     "pipeline.copy.tma_store"):
            a["reads"] = [self.slot(v) for v in AR.stage_state_operands(op)]
        if name in (AR.WGMMA_WAIT, AR.NVVM_BULK_WAIT):
            a["group"] = ir.IntegerAttr(attrs["group"]).value
        if name == "nvvm.cp.async.bulk.global.shared.cta" and str(
                op.operands[0].type) in ("!llvm.ptr<1>", "!llvm.ptr"):
            a["gbulk"] = True   # writes global memory: pointer 0, size 2 (gmem.py)
        if name in _TMA_TO_GLOBAL:
            # A TMA tensor store or reduce-add (gmem.py): the descriptor's
            # operand (0), the coordinates' and whether it adds.
            if name == "pipeline.copy.tma_store":
                coords = list(range(1, len(op.operands) - 1))
            else:
                segs = list(ir.DenseI32ArrayAttr(attrs["operandSegmentSizes"]))
                coords = list(range(segs[0] + segs[1], segs[0] + segs[1] + segs[2]))
            a["gtma"] = (coords, name == AR.NVVM_BULK_REDUCE)
        if name in ("llvm.store", "llvm.load") and str(
                op.operands[1 if name == "llvm.store" else 0].type) == DSMEM_PTR:
            # Another CTA's shared memory, through a mapa address (smemrace.py).
            val = op.operands[0] if name == "llvm.store" else op.results[0]
            a["dsmem"] = type_bytes(val.type) or 16
        if name.startswith("nvvm.mbarrier.") or name == "llvm.inline_asm":
            from . import rawbar as RB   # (it imports this module)
            if name in RB.OPS:
                a["rawbar"] = True     # a hand-driven mbarrier (rawbar.py)
            if name in RB.ONE_TRY:     # its phase parity (i32), not a state (i64)
                a["parity"] = str(op.operands[1].type) == "i32"
        if name == "llvm.inline_asm":
            facts = RB.st_async_facts(ir.StringAttr(attrs["asm_string"]).value)
            if facts is not None:
                a["st_async"] = facts
        if name in _TMEM_OPS:
            # Tensor memory (tmem.py): the op, and its cta_group (1 or 2).
            verb = _TMEM_OPS[name]
            if verb == "wait":
                verb = "wait_ld" if "load" in str(attrs["kind"]) else "wait_st"
            a["tmem"] = (verb, 2 if any("cta_2" in str(attrs[x]) for x in attrs) else 1)
            if verb in ("ld", "st"):
                a["tcols"] = _tmem_columns(op, verb)
        if "op_type" in attrs:
            a["op_type"] = str(attrs["op_type"]).split("<")[-1].rstrip(">")
        if "operandSegmentSizes" in attrs and "segs" not in a:
            a["segs"] = list(ir.DenseI32ArrayAttr(attrs["operandSegmentSizes"]))
        if name == "nvvm.fence.proxy":
            a["to_async"] = str(attrs["kind"]) in ("#nvvm.proxy_kind<async>",
                                                  "#nvvm.proxy_kind<async.shared>")
        if name.startswith(("llvm.", "nvvm.cp.async.bulk", "pipeline.copy.tma_store")):
            _smem_facts(op, name, a)
        if name in _GMEM_PTR or name in ("nvvm.memory.barrier", "nvvm.fence.sc.cluster",
                                         "llvm.fence"):
            _gmem_facts(op, name, a)
        if name == "nvvm.vote.sync":
            a["vote"] = str(attrs["kind"]).rstrip(">").split()[-1].split("<")[-1]
        if name == "llvm.extractvalue":
            a["position"] = list(ir.DenseI64ArrayAttr(attrs["position"]))
        if name == AR.WGMMA:
            i64 = ir.IntegerType.get_signless(64)
            roots = ([op.opview.descriptorA, op.opview.descriptorB] if op.name == AR.WGMMA
                     else list(op.operands))
            a["descs"] = [self.slot(v) for v in roots if v.type == i64]
        if name in STORE_OPS:
            a["stage_states"] = [self.slot(v) for v in _address_states(op)]
        if name in LOAD_OPS:
            a["stage_states"] = [self.slot(v) for v in _address_states(op, first=0)]
        ins = [self.slot(v) for v in op.operands]
        outs = [self.slot(r) for r in op.results]
        loc = user_loc(op.location)
        if _FILE_LOC.search(loc):
            self.last_loc = loc
        elif self.last_loc and ("smem" in a or "smem_src" in a or "descs" in a
                                or "gmem" in a or "gfence" in a):
            loc = self.last_loc
        regions = [[self.block(b) for b in r.blocks] for r in op.regions]
        return Node(name, ins, outs, a, regions, loc)


def _derive_tx_counts(module):
    """``module``, or a clone of it after ``pipeline-derive-tx-count`` when a
    TMA pipeline left tx_count to its copies (the bytes the lowering arms)."""
    from mlir.passmanager import PassManager

    from ..dialects import pipeline as pl
    pending = []

    def cb(o):
        if o.name == "pipeline.create":
            t = pl.PipelineType(o.results[0].type)
            if t.tx_count == 0 and pl.kind_traits(t.kind)["stage_copies"]:
                pending.append(o)
        return ir.WalkResult.ADVANCE
    module.operation.walk(cb)
    if not pending:
        return module
    clone = module.operation.clone()
    try:
        with module.context:
            PassManager.parse("builtin.module(pipeline-derive-tx-count)").run(clone)
    except ir.MLIRError as err:
        raise SimError("unsupported", f"tx_count cannot be derived: {err}") from None
    return clone


def kernels(module: ir.Module) -> list[Kernel]:
    """Every gpu.func / func.func of the module that uses pipeline ops."""
    out = []
    module = _derive_tx_counts(module)

    def uses_pipeline(op) -> bool:
        found = False

        def cb(o):
            nonlocal found
            # Pipeline ops, or tensor memory allocated (tmem.py).
            if o.name.startswith("pipeline.") or o.name == "nvvm.tcgen05.alloc":
                found = True
                return ir.WalkResult.INTERRUPT
            return ir.WalkResult.ADVANCE
        op.walk(cb)
        return found

    def visit(op):
        op = op.operation
        if op.name in ("gpu.func", "func.func"):
            if len(op.regions[0].blocks) and uses_pipeline(op):
                out.append(compile_kernel(op))
            return
        for r in op.regions:
            for b in r.blocks:
                for o in b.operations:
                    visit(o)
    visit(module.operation)
    return out


def compile_kernel(func) -> Kernel:
    c = _Compiler()
    if len(func.regions[0].blocks) != 1:
        raise SimError("unsupported", f"@{func.attributes['sym_name'].value}: "
                                      f"only single-block kernels are supported (use scf)")
    args, body = c.block(func.regions[0].blocks[0])
    bd = None
    if "known_block_size" in func.attributes:
        bd = tuple(ir.DenseI32ArrayAttr(func.attributes["known_block_size"]))
    ints, ptrs = {}, {}
    for pos, arg in enumerate(func.regions[0].blocks[0].arguments):
        if isinstance(arg.type, (ir.IntegerType, ir.IndexType)):
            ints[pos] = _width(arg.type)
        elif str(arg.type) in ("!llvm.ptr", "!llvm.ptr<1>"):
            ptrs[pos] = _arg_name(func, pos)
    from .gmem import synchronizes
    from .memory import mark_memory_branches
    return Kernel(func.attributes["sym_name"].value, args, body, len(c.slots), bd, c.pipes,
                  ints, c.created_at, ptr_args=ptrs, memory_branches=mark_memory_branches(body),
                  global_sync=synchronizes(body), st_async=_has(body, "st_async"))


def _has(body: list, fact: str) -> bool:
    """Whether a node of the tree has ``fact`` among its attributes."""
    return any(fact in n.a or any(_has(blk, fact) for r in n.regions for _, blk in r)
               for n in body)


def _arg_name(func, pos: int) -> str:
    """The ``pipeline.name`` the Python builders give an argument, or ""."""
    try:
        attrs = ir.DictAttr(ir.ArrayAttr(func.attributes["arg_attrs"])[pos])
        return ir.StringAttr(attrs["pipeline.name"]).value
    except Exception:
        return ""


# Values tried for the integer arguments that --arg does not give, in order:
# every one the same small count, then distinct ones (a loop over `m` and one
# over `n` differ), then the smallest. Small counts keep every loop that
# runs `n`, `n - 1` or `ceildiv(n, 64)` times non-negative and short, yet
# above the stage counts that make a ring wrap around (i1 arguments: both
# values). The hang of a producer and a consumer that run different counts
# shows for any of them.
_ARG_CHOICES = ((4, 1), ("distinct", 0), (1, 1))
_DISTINCT = (5, 3, 6, 2, 7, 4, 8, 9)


def choose_args(k: Kernel, given: dict) -> list[dict]:
    """Assignments ``{position: value}`` for the integer arguments of ``k``
    that ``given`` leaves out (empty when none is), in the order to try."""
    unset = [pos for pos in k.int_args if pos not in given]
    if not unset:
        return []
    out = []
    for value, flag in _ARG_CHOICES:
        choice = {}
        for i, pos in enumerate(unset):
            if k.int_args[pos] == 1:
                choice[pos] = flag
            else:
                choice[pos] = _DISTINCT[i % len(_DISTINCT)] if value == "distinct" else value
        if choice not in out:
            out.append(choice)
    return out


def needs_arg_values(err: SimError) -> bool:
    """True when ``err`` is a value the simulator could not evaluate because
    it depends on a kernel argument (a loop bound, a branch)."""
    return err.kind == "unsupported" and (
        "depends on a kernel argument" in err.message
        or "loop bounds are not constants" in err.message)
