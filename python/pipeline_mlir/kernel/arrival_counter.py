"""Arrival counters between CTAs, in global memory: how the CTAs that each
computed part of one output tile (stream-K, kernels/hopper_gemm.py) learn
which of them arrived last and may read the others' partial results.

A warp that has stored its part of a partial tile calls :func:`warp_arrive`
on the tile's counter; every lane gets the count before its arrival back, so
the warp whose arrival completes the count knows it is last and reads the
other warps' stores. Or one warp known in advance (stream-K: the tile's
last contributor in K order) waits with :func:`wait_count` until the others
have all arrived, and reads their stores without storing its own. The order that makes that read safe, in the PTX memory
model's terms (the pattern of cooperative groups' grid barrier, per warp):

1. ``bar.warp.sync``: the lanes' stores happen before what lane 0 does next;
2. ``membar.gl`` (``fence.sc.gpu``) then ``atom.global.add`` by lane 0: a
   release pattern, so any warp that observes the incremented count also
   observes the stores;
3. ``membar.gl`` by every lane after the broadcast of the old count (or
   after :func:`wait_count`'s relaxed load saw the full count in every
   lane): the acquire side, so the last warp's later loads see
   every earlier arrival's stores (and no line its SM's L1 held from
   before).

The pipeline dialect has no operation for this (its barriers live in
shared memory and order the CTAs of one cluster), so the protocol checker
does not see these counters: they are NVVM's ``membar``,
``bar.warp.sync``, ``shfl.sync`` and an LLVM ``atomicrmw`` on a global
pointer, kept to these three functions and tested for their instructions
(test/python/test_gemm_streamk.py) and on the GPU (bitwise-repeatable
results, test/gpu/test_gpu_launch.py). The simulator does: it follows the
kernel's global stores, atomics and fences (``pipeline_mlir.sim.gmem``), so
a count bumped before the partial is fenced, or a wait without its acquire,
is a finding at its line (test/python/test_sim_streamk_fixup.py).

A counter must read 0 when a launch starts: the last arrival (or the
waiter) resets it (:func:`reset`) once nobody else will touch it in that launch, so a launch
leaves its counters as it found them; the host allocates them zeroed.
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm, nvvm, scf

from .values import Scalar, i32, to_value

_FULL_MASK = -1


def _counter_ptr(counters, index):
    base = to_value(counters, what="counters pointer")
    idx = to_value(index, i32(), what="counter index")
    return llvm.getelementptr(base.type, base, [idx], [-2147483648], i32(), 0)


def _fence_gpu():
    nvvm.MembarOp(nvvm.MemScopeKind.GPU)


def warp_arrive(counters, index, lane):
    """Called by all 32 lanes of a warp after their stores: one arrival at
    ``counters[index]`` (i32, global); returns the count before it (an i32
    Scalar, the same in every lane)."""
    nvvm.bar_warp_sync(to_value(_FULL_MASK, i32()))
    _fence_gpu()
    first = to_value(lane == 0, what="lane 0")
    branch = scf.IfOp(first, [i32()], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        old = llvm.atomicrmw(llvm.AtomicBinOp.add, _counter_ptr(counters, index),
                             arith.constant(i32(), 1), llvm.AtomicOrdering.monotonic,
                             syncscope="device")
        scf.YieldOp([old])
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp([arith.constant(i32(), 0)])
    old = nvvm.shfl_sync(i32(), to_value(_FULL_MASK, i32()), branch.results[0],
                         to_value(0, i32()), to_value(31, i32()), nvvm.ShflKind.idx)
    _fence_gpu()
    return Scalar(old)


def _poll(counters, index, count, lane, predicate, still=None):
    """Every lane of the warp loads ``counters[index]`` (a relaxed gpu-scope
    load; one address, so one request for the warp) until no lane sees
    ``predicate(seen, count)`` any more (``vote.sync.any``), then a
    gpu-scope fence in every lane. The loop's exit is the vote, a value
    ptxas knows is the same in every lane, so the loop does not diverge:
    with lane 0 polling alone (an ``if lane == 0`` around the loop, then
    ``bar.warp.sync``), ptxas kept the wgmma descriptors of every mainloop
    of the stream-K kernels in per-thread registers (16 R2UR a K block
    where the plain kernel computes them in uniform registers), and each
    whole tile ran 7% slower than the plain kernel's (docs/gemm.md, "Run10").
    ``lane`` is unused (every lane polls). ``still``: a function of the
    value seen that is true while the warp must wait (instead of
    ``predicate(seen, count)``)."""
    del lane
    loop = scf.WhileOp([], [])
    before = loop.before.blocks.append()
    after = loop.after.blocks.append()
    with ir.InsertionPoint(before):
        seen = llvm.load(i32(), _counter_ptr(counters, index), alignment=4,
                         ordering=llvm.AtomicOrdering.monotonic, syncscope="device")
        waiting = (still(seen) if still is not None else
                   arith.cmpi(predicate, seen, to_value(count, i32(), what="count")))
        scf.ConditionOp(nvvm.vote_sync(ir.IntegerType.get_signless(1),
                                       to_value(_FULL_MASK, i32()), waiting,
                                       nvvm.VoteSyncKind.any), [])
    with ir.InsertionPoint(after):
        scf.YieldOp([])
    _fence_gpu()


def wait_at_least(counters, index, count, lane):
    """:func:`wait_count` for a counter that may pass ``count`` while a
    waiter polls (the shared fix-up: every contributor arrives, waits for
    all ``count`` arrivals, then arrives a second time on its way out), so
    the warp polls until every lane reads at least ``count``; the same
    acquire side after it."""
    _poll(counters, index, count, lane, arith.CmpIPredicate.slt)


def wait_full_or_reset(counters, index, count, lane):
    """:func:`wait_count` for a counter whose last arrival sets it back to 0
    (:func:`release_reset`; the shared fix-up with one arrival a warp): the
    warp polls until every lane reads ``count`` or 0 (it arrived itself
    before it polls, so 0 is the reset, never the start), then the same
    acquire fence. Reading the reset acquires the last arrival's fence,
    which acquired every other arrival (a release sequence of atomic adds):
    happens-before is transitive, so the reads after it see every
    contributor's stores."""
    total = to_value(count, i32(), what="count")
    one = arith.constant(i32(), 1)

    def still(seen):     # 1 <= seen < count: unsigned seen - 1 < count - 1
        return arith.cmpi(arith.CmpIPredicate.ult, arith.subi(seen, one),
                          arith.subi(total, one))
    _poll(counters, index, count, lane, None, still=still)


def release_reset(counters, index, lane):
    """The last arrival (its :func:`warp_arrive` returned ``count - 1``,
    after that function's acquire fence) sets ``counters[index]`` back to 0
    with a relaxed gpu-scope store by lane 0: after the fence, a release
    the waiters of :func:`wait_full_or_reset` acquire. Nobody arrives at the
    counter again in this launch."""
    branch = scf.IfOp(to_value(lane == 0, what="lane 0"), [], has_else=False)
    with ir.InsertionPoint(branch.then_block):
        llvm.store(arith.constant(i32(), 0), _counter_ptr(counters, index), alignment=4,
                   ordering=llvm.AtomicOrdering.monotonic, syncscope="device")
        scf.YieldOp([])


def wait_count(counters, index, count, lane):
    """Called by all 32 lanes of a warp: the warp polls ``counters[index]``
    (a relaxed gpu-scope load in every lane, ``_poll``) until every lane
    reads ``count`` (i32 Scalar), then a gpu-scope fence in every lane: the
    acquire side of :func:`warp_arrive`'s release (each lane's own load
    saw the count), so the warp's later loads see
    the stores of the ``count`` arrivals it waited for. The waiter must
    not be needed by those arrivals (stream-K: the tile's last contributor
    in K order waits, as the last unit of its run, for contributors whose
    arrivals come before any wait of theirs: kernels/hopper_gemm.py)."""
    _poll(counters, index, count, lane, arith.CmpIPredicate.ne)


def reset(counters, index, lane):
    """Lane 0 sets ``counters[index]`` back to 0 (by the last arrival, or
    the warp that waited for every other: every arrival of this launch at
    it has happened)."""
    branch = scf.IfOp(to_value(lane == 0, what="lane 0"), [], has_else=False)
    with ir.InsertionPoint(branch.then_block):
        llvm.store(arith.constant(i32(), 0), _counter_ptr(counters, index))
        scf.YieldOp([])
