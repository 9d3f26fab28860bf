"""A profiling build of the stream-K GEMM (``GemmConfig(timeline=True)``,
variants ``<tile>_streamk_timeline``): lane 0 of each consumer
warpgroup's first warp stamps ``%globaltimer`` and ``%clock64`` at each
phase of each work unit into a buffer, the kernel's sixth stream-K
argument ``sk_timeline``. The production variants have no such argument
and no stamp (their PTX is unchanged: test/python/test_gemm_streamk.py).

Layout (``benchmarks/gemm/streamk_timeline.py`` decodes it): per CTA
(``ctaid.x``), per consumer warpgroup (``MAX_WARPGROUPS``), ``SLOTS``
slots of ``len(EVENTS)`` records of 16 bytes, ``(globaltimer ns,
clock64)``, 0 where nothing was stamped. Slot ``u < UNITS`` is the CTA's
work unit ``u`` (later units stamp the last one); slot ``UNITS`` holds
the warpgroup's entry (event 0) and exit (event 1). A unit's events:

- ``start``: before its mainloop's first wait;
- ``mainloop``: its last wgmma retired (the drained pipeline);
- ``stored``: a partial's stores issued (stream-K partial units);
- ``arrived``: the arrival done (its gpu-scope fences and atomic), or
  for the tile's last contributor its wait for the others done;
- ``summed``: the last contributor's loads of the others' partials added;
- ``done``: the tile's TMA stores of C issued (a whole tile, or the last
  contributor's sum).
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm, nvvm

from pipeline_mlir.kernel.values import Scalar, i32

EVENTS = ("start", "mainloop", "stored", "arrived", "summed", "done")
UNITS = 7
SLOTS = UNITS + 1
MAX_WARPGROUPS = 3
RECORD_BYTES = 16


def buffer_bytes(ctas):
    """Bytes of the timeline of a launch of ``ctas`` CTAs."""
    return ctas * MAX_WARPGROUPS * SLOTS * len(EVENTS) * RECORD_BYTES


class Timeline:
    """The stamps of one consumer warpgroup ``cw`` (i32 Scalar), written by
    ``leader`` (its first warp's lane 0) into ``ptr`` (a GlobalPtr
    argument); ``None`` stamps nothing (the production kernels)."""

    def __init__(self, k, ptr, cw, leader):
        self.k, self.ptr, self.cw, self.leader = k, ptr, cw, leader

    def stamp(self, slot, event):
        """Record ``EVENTS[event]`` (an index) of unit ``slot`` (an int or
        i32 Scalar; clamped to ``UNITS - 1``; ``UNITS``: entry/exit)."""
        if self.ptr is None:
            return
        i64 = ir.IntegerType.get_signless(64)
        with self.k.if_(self.leader):
            if isinstance(slot, int):
                slot = Scalar(arith.constant(i32(), slot))
            else:
                slot = Scalar(arith.minui(slot.ir_value,
                                          arith.constant(i32(), UNITS - 1)))
            cta = Scalar(nvvm.read_ptx_sreg_ctaid_x(i32()))
            index = ((cta * MAX_WARPGROUPS + self.cw) * SLOTS + slot) * len(EVENTS) + event
            offset = index.to(64) * RECORD_BYTES
            base = llvm.getelementptr(self.ptr.type, self.ptr, [offset.ir_value],
                                      [-2147483648], ir.IntegerType.get_signless(8), 0)
            llvm.store(nvvm.read_ptx_sreg_globaltimer(i64), base)
            clock = llvm.getelementptr(self.ptr.type, base, [], [8],
                                       ir.IntegerType.get_signless(8), 0)
            llvm.store(nvvm.read_ptx_sreg_clock64(i64), clock)


def event(name):
    return EVENTS.index(name)
