"""Opt-in pipeline tracing: stamp the global timer at every acquire, commit,
wait and release into a device buffer, to see what a kernel's stages do over
time (``pipeline_mlir.runtime.trace`` reads the buffer and writes a Chrome /
Perfetto trace and a PNG of stage occupancy).

``instrument(module)`` returns a copy of a pipeline-level module in which
each ``pipeline.producer.acquire`` / ``producer.commit`` /
``consumer.wait`` / ``consumer.release`` is followed by a record, written by
lane 0 of the warp that executed the verb (a verb that lane 0 does not
execute, e.g. one inside an ``elect_one`` that picked another lane, is not
recorded). A record's slot follows from the verb's state: warp, pipeline,
verb and the state's ``count`` (its number of advances), so recording is
stores only -- no counter to read, no atomic (a single atomic counter made a
traced GEMM 6.9x slower on an H100, per-warp counters 2.8x):

    header (16 bytes): records per (warp, pipeline, verb) (u32) |
                       warps per CTA (u32) | CTAs (u32) | 0
    then per warp (CTA-major), per pipeline, per verb, ``count`` slots:
    record (16 bytes): globaltimer (u64, ns; 0 = empty) | info (u32) | cta (u32)
    info = verb (bits 0-1) | pipeline id (2-7) | stage (8-15) | warp (16-31)

Warps and CTAs are numbered from ``tid.x`` and ``ctaid.x`` (1-D blocks and
grids, as the kernels built here use); out-of-bounds warps, CTAs and counts
record nothing. A state that is never advanced (PipelineTmaStore's internal
one) keeps rewriting its slot 0. The buffer is found through the external
global ``__pipeline_trace_buffer`` (an ``i64`` device address, 0 = off),
which the runtime sets. A module compiled without ``instrument`` has no
trace instruction at all.

The instrumentation is applied to pipeline IR before lowering, so it needs
no change to the lowering and works for every kind: compile the returned
module as usual (``compiler.to_cubin(instrument(k.module)[0])``).
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm, nvvm, scf

from .dialects import pipeline as pl

BUFFER_SYMBOL = "__pipeline_trace_buffer"
RECORD_BYTES = 16
HEADER_BYTES = 16
VERBS = ("producer.acquire", "producer.commit", "consumer.wait", "consumer.release")
MAX_PIPELINES = 64


def _i32(v):
    return arith.constant(ir.IntegerType.get_signless(32), v)


def _i64(v):
    return arith.constant(ir.IntegerType.get_signless(64), v)


def _if(cond):
    op = scf.IfOp(cond, [], has_else=False)
    with ir.InsertionPoint(op.then_block):
        yield_op = scf.YieldOp([])
    return ir.InsertionPoint(yield_op)


def _record(verb, pid, npipes, state):
    """The record-writing ops, at the current insertion point."""
    i8, i32, i64 = (ir.IntegerType.get_signless(w) for w in (8, 32, 64))
    gptr = llvm.PointerType.get(1)

    def at(base, offset):
        return llvm.getelementptr(gptr, base, [offset], [-2147483648], i8, 0)

    def invariant_load(t, p):
        # The pointer and the header never change during a launch: invariant
        # loads let LLVM hoist them out of the kernel's loops.
        return llvm.load(t, p, invariant=True)

    lane = nvvm.read_ptx_sreg_laneid(i32)
    with _if(arith.cmpi(arith.CmpIPredicate.eq, lane, _i32(0))):
        buf = invariant_load(i64, llvm.mlir_addressof(gptr, BUFFER_SYMBOL))
        with _if(arith.cmpi(arith.CmpIPredicate.ne, buf, _i64(0))):
            base = llvm.inttoptr(gptr, buf)
            cap = invariant_load(i32, base)
            per_cta = invariant_load(i32, at(base, _i64(4)))
            ctas = invariant_load(i32, at(base, _i64(8)))
            warp = arith.divui(nvvm.read_ptx_sreg_tid_x(i32), _i32(32))
            cta = nvvm.read_ptx_sreg_ctaid_x(i32)
            count = pl.state_count(state)
            inside = arith.andi(
                arith.andi(arith.cmpi(arith.CmpIPredicate.ult, warp, per_cta),
                           arith.cmpi(arith.CmpIPredicate.ult, cta, ctas)),
                arith.cmpi(arith.CmpIPredicate.ult, count, cap))
            with _if(inside):
                gw = arith.extui(i64, arith.addi(arith.muli(cta, per_cta), warp))
                row = arith.addi(arith.muli(gw, _i64(npipes * len(VERBS))),
                                 _i64(pid * len(VERBS) + verb))
                index = arith.addi(arith.muli(row, arith.extui(i64, cap)),
                                   arith.extui(i64, count))
                rec = at(base, arith.addi(_i64(HEADER_BYTES),
                                          arith.muli(index, _i64(RECORD_BYTES))))
                llvm.store(nvvm.read_ptx_sreg_globaltimer(i64), rec)
                stage = arith.andi(pl.state_index(state), _i32(0xFF))
                info = arith.ori(arith.ori(_i32(verb | (pid << 2)),
                                           arith.shli(stage, _i32(8))),
                                 arith.shli(warp, _i32(16)))
                llvm.store(info, at(rec, _i64(8)))
                llvm.store(cta, at(rec, _i64(12)))


def instrument(module):
    """``(traced_module, pipeline_names)``: a copy of ``module`` with a trace
    record after every stage verb; ``pipeline_names[id]`` names the
    pipelines in records (their ``name`` attribute, else ``p<id>``)."""
    with module.context, ir.Location.unknown():
        traced = ir.Module.parse(str(module))
        names, ids, verbs = [], {}, []

        def visit(op):
            op = op.operation
            if op.name == "pipeline.create":
                ids[op.results[0]] = len(names)
                attr = op.attributes["name"] if "name" in op.attributes else None
                names.append(ir.StringAttr(attr).value if attr is not None
                             else f"p{len(names)}")
            elif op.name.startswith("pipeline.") and op.name[len("pipeline."):] in VERBS:
                verbs.append(op)
            for region in op.regions:
                for block in region.blocks:
                    for o in block.operations:
                        visit(o)
        visit(traced.operation)
        if len(names) > MAX_PIPELINES:
            raise ValueError(f"trace: at most {MAX_PIPELINES} pipelines per module, "
                             f"found {len(names)}")
        gpu_modules = [o for o in traced.body.operations if o.operation.name == "gpu.module"]
        for gm in gpu_modules:
            body = gm.operation.regions[0].blocks[0]
            with ir.InsertionPoint.at_block_begin(body):
                llvm.GlobalOp(ir.IntegerType.get_signless(64), BUFFER_SYMBOL,
                              ir.Attribute.parse("#llvm.linkage<external>"),
                              value=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0),
                              addr_space=1, alignment=8)
        for op in verbs:
            pipe, state = op.operands[0], op.operands[1]
            if pipe not in ids:
                raise ValueError(f"trace: {op.name} at {op.location} uses a pipeline that "
                                 "does not come from a pipeline.create in the module")
            verb = VERBS.index(op.name[len("pipeline."):])
            with ir.InsertionPoint.after(op):
                _record(verb, ids[pipe], len(names), state)
        return traced, names
