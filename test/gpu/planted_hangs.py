"""Three planted hangs for the watchdog's forensic dump:
copies of the GPU suite's builder kernels (examples/tile_copies.py) with one bug
each, compiled with the device watchdog on.

- hang_start_phase: PipelineAsync, the producer's state starts at phase 0
  instead of 1, so its first acquire waits on empty[0] phase 0, which only
  the consumer's release can complete, while the consumer waits on full[0]
  phase 0 for the producer's commit: a two-warp cycle at once.
- hang_missing_release: PipelineAsync, the consumer never releases: the
  producer fills the 4 stages, then waits on empty[0] phase 0 forever; the
  consumer drains them and waits on full[0] phase 1.
- hang_tx_bytes: PipelineTmaAsync whose stages expect TILE + 16 bytes while
  each TMA load brings TILE: full[0] keeps 16 tx bytes pending with every
  arrival in; the consumer waits on full[0] phase 0, the producer (after
  filling the ring) on empty[0] phase 0.

``HANGS`` lists, per kernel, the waits the wait table must show (warp ->
(role, side, stage, phase)) and the ledger the waited barriers must carry
(docs/watchdog.md, "The ledger": what the kernel's own verbs did to them);
run_forensics.py checks the GPU's report against both, and that the
wrong-tx-bytes report names the barrier and its announced and issued bytes.
The CPU tests (test/python/test_forensics_hangs.py) check that the
simulator finds the same deadlock.
"""

from builder_kernels import manifest_entry, pipeline_tma_async  # puts examples/ on the path
from tile_copies import TILE, TILE_VECS, _params, _warp_copy
from pipeline_mlir.kernel import Kernel
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync, PipelineState,
                                    PipelineUserType, make_pipeline_state)

STAGES = 4
GRID = 8
MIB = 1                  # 256 tiles: 32 per CTA, more than the ring holds
TX_EXTRA = 16            # bytes the wrong tx count expects beyond the copy
THREADS = 32             # the PipelineAsync ring's producer and consumer groups
TIMEOUT_NS = 500_000_000  # device watchdog per wait


def _async_copy(name, chip, producer_phase=1, release=True):
    """The PipelineAsync copy ring (examples/copy_ring.py's shape) with explicit
    states, so that a bug can be planted in the producer's start phase or
    the consumer's release."""
    k = Kernel(name, chip=chip, block_dim=64, params=_params("src", "dst", "ntiles"))
    with k:
        src, dst, ntiles = k.args
        barriers = k.alloc_barriers(2 * STAGES)
        ring = k.smem_alloc(STAGES * TILE, align=128, name="ring")
        pipe = PipelineAsync.create(num_stages=STAGES,
                                    producer_group=CooperativeGroup(Agent.Thread, THREADS),
                                    consumer_group=CooperativeGroup(Agent.Thread, THREADS),
                                    barrier_storage=barriers, name="ab")
        warp, lane = k.warp_idx(), k.lane_idx()
        first = k.block_idx() * ntiles
        with k.if_(warp == 0):
            state = (make_pipeline_state(PipelineUserType.Producer, STAGES)
                     if producer_phase == 1 else PipelineState(STAGES, 0, 0, producer_phase))
            for t, _ in k.range(ntiles, carry=[state]):
                pipe.producer_acquire(state)
                _warp_copy(src, (first + t) * TILE_VECS, ring.stage(state.index, TILE), 0, lane)
                pipe.producer_commit(state)
                state.advance()
            pipe.producer_tail(state)
        with k.if_(warp == 1):
            state = make_pipeline_state(PipelineUserType.Consumer, STAGES)
            for t, _ in k.range(ntiles, carry=[state]):
                pipe.consumer_wait(state)
                _warp_copy(ring.stage(state.index, TILE), 0, dst, (first + t) * TILE_VECS, lane)
                if release:
                    pipe.consumer_release(state)
                state.advance()
    return k


def hang_start_phase(chip="sm_90a"):
    return _async_copy("hang_start_phase", chip, producer_phase=0)


def hang_missing_release(chip="sm_90a"):
    return _async_copy("hang_missing_release", chip, release=False)


def hang_tx_bytes(chip="sm_90a"):
    return pipeline_tma_async(chip, "hang_tx_bytes", STAGES, tx_count=TILE + TX_EXTRA)


#: name -> (builder, the SPECS kind whose launch it shares, expected waits:
#: warp -> (role, barrier side, stage, phase))
HANGS = {
    "hang_start_phase": (hang_start_phase, "pipeline_async",
                         {0: ("producer_acquire", "empty", 0, 0),
                          1: ("consumer_wait", "full", 0, 0)}),
    "hang_missing_release": (hang_missing_release, "pipeline_async",
                             {0: ("producer_acquire", "empty", 0, 0),
                              1: ("consumer_wait", "full", 0, 1)}),
    "hang_tx_bytes": (hang_tx_bytes, "pipeline_tma_async",
                      {0: ("producer_acquire", "empty", 0, 0),
                       1: ("consumer_wait", "full", 0, 0)}),
}

#: name -> {"side[stage]": (init count, arrivals, bytes announced, bytes
#: issued)}: the ledger of the waited barriers when the watchdog fires.
#: - start phase: nobody committed or released anything;
#: - missing release: each full barrier got one phase of commits (THREADS
#:   arrivals: the consumer passed phase 0 and waits on phase 1), no empty
#:   barrier a release;
#: - tx bytes: the producer armed every stage once (1 arrival, TILE +
#:   TX_EXTRA announced) and issued one TILE copy into it; no release.
LEDGERS = {
    "hang_start_phase": {"empty[0]": (THREADS, 0, 0, 0), "full[0]": (THREADS, 0, 0, 0)},
    "hang_missing_release": {"empty[0]": (THREADS, 0, 0, 0),
                             "full[0]": (THREADS, THREADS, 0, 0)},
    "hang_tx_bytes": {"empty[0]": (1, 0, 0, 0), "full[0]": (1, 1, TILE + TX_EXTRA, TILE)},
}

#: name -> lines the report must contain.
REPORT_LINES = {
    "hang_tx_bytes": [
        f"full[0]: phase parity 0 in progress, hardware state not read (a tx barrier: the dump "
        f"does not arrive on it); ledger: phase 0, 1 of 1 arrival(s) in (pending 0), in this "
        f"phase (the first): expects {TILE + TX_EXTRA} B (announced), copies issued {TILE} B: "
        f"{TX_EXTRA} B never issued",
        f"this phase announced {TILE + TX_EXTRA} B but copies were issued for {TILE} B: "
        f"{TX_EXTRA} B never issued",
    ],
}


def simulate(name, trip_count=8, schedules=5):
    """The simulator's Report for a planted hang (one CTA, ``trip_count``
    tiles)."""
    import builder_kernels

    build, kind, _ = HANGS[name]
    return builder_kernels.simulate(build(), kind, trip_count=trip_count, schedules=schedules)


def compile_hang(name, chip="sm_90a"):
    """(Kernel, CompiledKernel, watchdog names) of a planted hang: lowered
    with pipeline-to-cubin, the device watchdog on (TIMEOUT_NS per wait;
    compiler.to_cubin has no timeout option) and verify-protocol off (the
    protocol checker would reject the planted bug at compile time)."""
    import mlir.ir as ir
    import mlir.passmanager as pm

    import pipeline_mlir
    from builders import _gpu_binary, _watchdog_names
    from pipeline_mlir.runtime.compiled import CompiledKernel

    k = HANGS[name][0](chip)
    k.verify()
    opts = (f"chip={chip} format=bin verify-protocol=false watchdog=true "
            f"watchdog-timeout-ns={TIMEOUT_NS}")
    with pipeline_mlir.make_context(), ir.Location.unknown():
        module = ir.Module.parse(str(k.module))
        pm.PassManager.parse(f"builtin.module(pipeline-to-cubin{{{opts}}})").run(module.operation)
        image, names = _gpu_binary(module), _watchdog_names(module)
    fn = CompiledKernel.cached(image, name=k.name, params=[(n, p.kind) for n, p in k.params],
                               block=k.block_dim, cluster=k.cluster_dim, smem=k.smem_bytes,
                               chip=chip, watchdog_names=names)
    return k, fn, names


def manifest(name, kernel, fn, names):
    """The bundle's manifest entry: the launch of the SPECS kind it copies,
    checked as "forensics" (run_forensics.py)."""
    _, kind, expect = HANGS[name]
    e = manifest_entry(kind, kernel, MIB, grid=GRID)
    e.update(name=name, kernel=kernel.name, check="forensics", timeout=30.0,
             watchdog_names=names, watchdog_timeout_ns=TIMEOUT_NS,
             expect_waits={str(w): list(v) for w, v in expect.items()},
             expect_ledger={k: list(v) for k, v in LEDGERS[name].items()},
             expect_report=REPORT_LINES.get(name, []))
    e["expect"]["stuck"] = True
    e["launch"] = fn.metadata()
    return e
