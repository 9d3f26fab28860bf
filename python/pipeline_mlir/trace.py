"""Opt-in pipeline tracing: stamp the global timer at every acquire, commit,
wait and release into a device buffer, to see what a kernel's stages do over
time (``pipeline_mlir.runtime.trace`` reads the buffer and writes a Chrome /
Perfetto trace and a PNG of stage occupancy).

``instrument(module)`` returns a copy of a pipeline-level module in which
each ``pipeline.producer.acquire`` / ``producer.commit`` /
``consumer.wait`` / ``consumer.release`` is followed by a record, written by
lane 0 of the warp that executed the verb (a verb that lane 0 does not
execute, e.g. one inside an ``elect_one`` that picked another lane, is not
recorded):

    record (16 bytes): globaltimer (u64, ns) | info (u32) | cta (u32)
    info = verb (bits 0-1) | pipeline id (2-7) | stage (8-15) | warp (16-31)

The buffer is found through the external global
``__pipeline_trace_buffer`` (an ``i64`` device address, 0 = off), which the
runtime sets; its first 4 bytes count records (``atomicrmw add``), the next
4 hold the capacity, records start at byte 16. A module compiled without
``instrument`` has no trace instruction at all.

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


def _record(verb, pid, state):
    """The record-writing ops, at the current insertion point."""
    i32, i64 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64)
    gptr = llvm.PointerType.get(1)
    lane = nvvm.read_ptx_sreg_laneid(i32)
    with _if(arith.cmpi(arith.CmpIPredicate.eq, lane, _i32(0))):
        addr = llvm.mlir_addressof(gptr, BUFFER_SYMBOL)
        buf = llvm.load(i64, addr)
        with _if(arith.cmpi(arith.CmpIPredicate.ne, buf, _i64(0))):
            base = llvm.inttoptr(gptr, buf)
            slot = llvm.atomicrmw(llvm.AtomicBinOp.add, base, _i32(1),
                                  llvm.AtomicOrdering.monotonic)
            cap_ptr = llvm.getelementptr(gptr, base, [], [4], ir.IntegerType.get_signless(8), 0)
            cap = llvm.load(i32, cap_ptr)
            with _if(arith.cmpi(arith.CmpIPredicate.ult, slot, cap)):
                off = arith.addi(arith.muli(arith.extui(i64, slot), _i64(RECORD_BYTES)),
                                 _i64(HEADER_BYTES))
                rec = llvm.getelementptr(gptr, base, [off], [-2147483648],
                                         ir.IntegerType.get_signless(8), 0)
                llvm.store(nvvm.read_ptx_sreg_globaltimer(i64), rec)
                stage = arith.andi(pl.state_index(state), _i32(0xFF))
                warp = arith.divui(nvvm.read_ptx_sreg_tid_x(i32), _i32(32))
                info = arith.ori(arith.ori(_i32(verb | (pid << 2)),
                                           arith.shli(stage, _i32(8))),
                                 arith.shli(warp, _i32(16)))
                llvm.store(info, llvm.getelementptr(gptr, rec, [], [8],
                                                    ir.IntegerType.get_signless(8), 0))
                llvm.store(nvvm.read_ptx_sreg_ctaid_x(i32),
                           llvm.getelementptr(gptr, rec, [], [12],
                                              ir.IntegerType.get_signless(8), 0))


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
                _record(verb, ids[pipe], state)
        return traced, names
