"""A multi-stage TMA-pipelined reduction with PipelineTmaAsync (sm_90a).

Warp 0 streams tiles of a 2-D i32 tensor into a 4-stage ring with TMA; the
four warps of the consumer warpgroup each add one row of the tile (32 lanes x
one element) into a running sum, and store it at the end.

``build(cluster=2)`` runs the same loop in a 2-CTA cluster with multicast:
each CTA loads half of every tile and multicasts it to both CTAs
(``mcast_mask = 0b11``), so each CTA's full barrier still expects the whole
tile, and each consumer warp releases the stage in *both* CTAs (the empty
barriers count ``cluster_size * consumer_warps`` arrivals) -- CuTe DSL's
``PipelineTmaAsync`` with ``cta_layout_vmnk = (1, 2, 1, 1)``.

Usage: python examples/tma_reduction.py [--cluster] [--print-ir] [--out DIR]

``--out DIR``: where the cubin and its launch metadata go (by default a
folder in the system's temporary directory, not the source tree:
examples/_common.py).
"""

import sys

import mlir.ir as ir
from mlir.dialects import arith

from pipeline_mlir.kernel import (GlobalPtr, Int32, Kernel, Scalar,
                                  TmaDescriptor, load, store)
from pipeline_mlir.kernel.values import i32
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineTmaAsync,
                                    PipelineUserType, make_pipeline_state,
                                    pipeline_init_arrive, pipeline_init_wait)

TILE_ROWS, TILE_COLS = 4, 32            # one row per consumer warp
TILE_BYTES = TILE_ROWS * TILE_COLS * 4  # i32
CONSUMER_WARPS = 4


def build(num_stages=4, cluster=1, chip="sm_90a"):
    """The kernel (``.module`` is the built module)."""
    layout = (1, cluster, 1, 1) if cluster > 1 else None
    k = Kernel("tma_reduction" + ("_cluster" if cluster > 1 else ""),
               chip=chip, block_dim=32 * (1 + CONSUMER_WARPS),
               cluster_dim=(cluster, 1, 1),
               params={"src": TmaDescriptor(), "out": GlobalPtr(),
                       "num_tiles": Int32()})
    with k:
        src, out, num_tiles = k.args
        barriers = k.alloc_barriers(2 * num_stages)
        ring = k.smem_alloc(num_stages * TILE_BYTES, align=128, name="ring")

        pipeline = PipelineTmaAsync.create(
            num_stages=num_stages,
            producer_group=CooperativeGroup(Agent.Thread, 1),
            # One signalling lane per consumer warp and per CTA it releases.
            consumer_group=CooperativeGroup(Agent.Thread,
                                            cluster * CONSUMER_WARPS),
            tx_count=TILE_BYTES,
            barrier_storage=barriers,
            cta_layout_vmnk=layout,
            defer_sync=True)
        pipeline_init_arrive(cta_layout_vmnk=layout)
        pipeline_init_wait(cta_layout_vmnk=layout)

        warp_idx, lane = k.warp_idx(), k.lane_idx()
        with k.if_(warp_idx == 0):
            state = make_pipeline_state(PipelineUserType.Producer, num_stages)
            rank = k.cluster_cta_rank() if cluster > 1 else None
            for t, _ in k.range(num_tiles, carry=[state]):
                pipeline.producer_acquire(state)
                with k.elect_one():
                    dst = ring.stage(state.index, TILE_BYTES)
                    if cluster == 1:
                        pipeline.tma_load(state, src, [0, t * TILE_ROWS], dst,
                                          TILE_BYTES)
                    else:
                        # This CTA's share of the tile, multicast to all.
                        rows = TILE_ROWS // cluster
                        share = TILE_BYTES // cluster
                        mask = arith.constant(ir.IntegerType.get_signless(16),
                                              (1 << cluster) - 1)
                        pipeline.tma_load(state, src,
                                          [0, t * TILE_ROWS + rank * rows],
                                          dst + rank * share, share,
                                          mcast_mask=mask)
                pipeline.producer_commit(state)
                state.advance()
            pipeline.producer_tail(state)

        with k.if_(warp_idx >= 1):
            row = warp_idx - 1
            state = make_pipeline_state(PipelineUserType.Consumer, num_stages)
            total = Scalar(0)
            for t, _ in k.range(num_tiles, carry=[state, total]):
                pipeline.consumer_wait(state)
                tile = ring.stage(state.index, TILE_BYTES)
                total.set(total + load(tile, i32(), row * TILE_COLS + lane))
                pipeline.consumer_release(state)
                state.advance()
            cta = k.block_idx()
            store(total, out, (cta * CONSUMER_WARPS + row) * 32 + lane)
    return k


if __name__ == "__main__":
    from _common import main
    cluster = 2 if "--cluster" in sys.argv else 1
    sys.exit(main(build(cluster=cluster),
                  "tma_reduction" + ("_cluster" if cluster > 1 else "")))
