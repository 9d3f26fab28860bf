"""Held-out synchronization bugs, sixth round: ported from public bug
reports of other kernel stacks, none shown to the checker before.

Each bug is what the report's kernel did, ported to this API, next to its
correct twin; for every bug the tests pin which tool finds it
(_held_out_bugs.py says how).

VERDICTS BEFORE ANY CHANGE (the checker and the simulator as they were
when these ports were written) and now:

| case                       | source              | before | now  | simulator   | sim now    |
|----------------------------|---------------------|--------|------|-------------|------------|
| pair_alloc_before_peer_up  | NVIDIA/cutlass#3316 | no     | yes* | no (passes) | pair-alloc |

(*) passed by the checker before these tests, now refused: tcgen05, a CTA
pair's alloc (tmem-pair-alloc.mlir): a cta_group::2 tcgen05.alloc with no
cluster barrier before it on every path. The simulator did not model
tensor memory, so it passed the bug; it now finds it ("sim now",
sim/tmem.py): a cta_group::2 alloc by a warp that has passed no cluster
barrier wait is a pair-alloc finding. The twin passes.
"""

import pytest

from pipeline_mlir.kernel import Int32, Kernel, tcgen05, tmem

# _fresh_cache: an autouse fixture (a cached build would skip the checker).
from _held_out_bugs import (  # noqa: F401
    _async, _consume, _next_line, _produce, _fresh_cache, check_simulator, check_static,
    check_twin)


# -- 57. a CTA pair allocates tensor memory before the peer is known up ----
def pair_alloc_before_peer_up(bug):
    """NVIDIA/cutlass#3316: CuTe's 2-SM Blackwell tutorials (04, 05) run
    `tcgen05.alloc.cta_group::2` right after the CTA's barrier init with
    only `__syncthreads()` before it; the PTX ISA asks that the issuing warp
    make sure the peer CTA has launched and takes part in the pair's
    collective ops (compute-sanitizer's racecheck reports the peer's
    barrier init racing the allocator's read). The fix: a cluster barrier
    before the alloc. Ported to a pair whose MMA warp allocates after a CTA
    barrier (the dealloc at the end after a cluster barrier, as it should);
    the twin syncs the cluster first."""
    k = Kernel("pair_alloc", chip="sm_100a", block_dim=128, cluster_dim=(2, 1, 1),
               params={"n": Int32()})
    lines = {}
    with k:
        (n,) = k.args
        holder = k.smem_alloc(tmem.HOLDER_BYTES, align=16, name="TMEM address")
        pipe = _async(k)
        if bug:
            k.sync_threads()
        else:
            k.cluster_sync()
        with k.if_(k.warp_idx() == 0):
            lines["bug"] = _next_line()
            tmem.alloc(holder, 64, cta_group=2)
            tmem.relinquish_alloc_permit(cta_group=2)
        tcgen05.fence_before_thread_sync()
        k.sync_threads()
        tcgen05.fence_after_thread_sync()
        # The CTA's work (here a plain ring between warps 1 and 2).
        with k.if_(k.warp_idx() == 1):
            _produce(k, pipe, n)
        with k.if_(k.warp_idx() == 2):
            _consume(k, pipe, n)
        tcgen05.fence_before_thread_sync()
        k.cluster_sync()
        with k.if_(k.warp_idx() == 0):
            tcgen05.fence_after_thread_sync()
            tmem.dealloc(tmem.load_address(holder), 64, cta_group=2)
    return k, lines["bug"], {"n": 3}


CASES = [
    ("pair_alloc_before_peer_up", pair_alloc_before_peer_up, {},
     "TMEM alloc: this tcgen05.alloc.cta_group::2 allocates for a CTA pair with no cluster "
     "barrier before it on every path", {"pair-alloc"}),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_static(case):
    check_static(case, __file__, True)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_simulator(case):
    check_simulator(case, __file__)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_twin_is_clean(case):
    check_twin(case)
