"""The tile copy of the GPU suite, synchronized by the pipeline classes that
examples/copy_ring.py does not cover: TMA tensor loads into a ring (one CTA,
or a 2-CTA cluster with multicast), a TMA-store epilogue, PipelineOrder and
named barriers. test/gpu/builder_kernels.py says how the GPU suite launches
and checks each of them.

Common shape: block ``b`` copies the 4 KiB tiles ``[b*T, (b+1)*T)`` of
``src`` to ``dst``; a warp moves a tile as 32 lanes x 8 16-byte vectors
(lane, lane + 32, ...). Per kernel:

- pipeline_tma_async: PipelineTmaAsync, cluster 1, 4 stages; warp 0's
  elected lane loads 16 rows x 256 B with TMA, warp 1 copies the stage out.
- pipeline_tma_async_mcast: PipelineTmaAsync in a 2-CTA cluster,
  ``cta_layout_vmnk=(1, 2, 1, 1)``: each CTA loads half of every tile (8 rows)
  and multicasts it to both (mask 0b11), so both CTAs see the whole tile; the
  consumer group counts ``mcast_size * consumer_warps`` = 2 arrivals. CTA rank
  r writes its copy to ``dst[r]`` (``dst`` holds ``src`` twice).
- pipeline_tma_store: PipelineTmaStore epilogue, 3 stages: 4 warps fill a
  stage from global memory, one thread TMA-stores it.
- pipeline_order: PipelineOrder, depth 3, length 3: per tile, warp 0 loads
  it, warp 1 xors every word with 0x5A5A5A5A, warp 2 stores it.
- named_barrier: NamedBarrier, 3 stages: full = ids 1..3, empty = ids 4..6
  (64 threads each), the id picked at run time from the stage index.

Usage: python examples/tile_copies.py [--print-ir] [--out DIR]

``--out DIR``: where the cubin and its launch metadata go (by default a
folder in the system's temporary directory, not the source tree:
examples/_common.py).
"""

import sys

import mlir.ir as ir
from mlir.dialects import arith, nvvm

from pipeline_mlir.kernel import (GlobalPtr, Int32, Kernel, Scalar, TmaDescriptor,
                                  fence_view_async_shared, load, store)
from pipeline_mlir.kernel.values import i32
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier, PipelineOrder,
                                    PipelineTmaAsync, PipelineTmaStore, PipelineUserType,
                                    make_pipeline_state, pipeline_init_arrive,
                                    pipeline_init_wait)

TILE = 4096             # bytes per tile
VEC = 16                # bytes per vector (vector<4xi32>)
TILE_VECS = TILE // VEC  # 256 vectors: 32 lanes x 8
ROW_BYTES = 256         # a TMA row: 64 x u32
TILE_ROWS = TILE // ROW_BYTES
XOR32 = 0x5A5A5A5A


def _vec():
    return ir.VectorType.get([4], i32())


def _warp_copy(src, src_vec, dst, dst_vec, lane):
    """One warp moves a 4 KiB tile: lane l copies vectors l, l+32, ... of the
    tile starting at vector ``src_vec`` of ``src`` to ``dst_vec`` of ``dst``
    (global pointers or SmemPtrs). All loads first, then all stores."""
    vals = [load(src, _vec(), src_vec + lane + 32 * j) for j in range(TILE_VECS // 32)]
    for j, v in enumerate(vals):
        store(v, dst, dst_vec + lane + 32 * j)


def _params(*names):
    kinds = {"src": GlobalPtr(), "dst": GlobalPtr(), "desc": TmaDescriptor(),
             "ntiles": Int32()}
    return [(n, kinds[n]) for n in names]


def pipeline_tma_async(chip="sm_90a", name=None, num_stages=4, cluster=1,
                       consumer_arrivals=None, tx_count=TILE):
    """TMA loads into the ring; ``cluster=2`` multicasts half-tiles across a
    2-CTA cluster (see the module docstring). ``ntiles`` counts the tiles of
    a CTA (cluster 1) or of a cluster (cluster 2). ``consumer_arrivals``
    overrides the consumer group's count (tests use it to build the classic
    wrong-count bug), ``tx_count`` the bytes each stage expects (the planted
    wrong-tx hang of test/gpu/planted_hangs.py)."""
    name = name or ("builders_pipeline_tma_async" + ("_mcast" if cluster > 1 else ""))
    layout = (1, cluster, 1, 1) if cluster > 1 else None
    consumer_warps = 1
    k = Kernel(name, chip=chip, block_dim=32 * (1 + consumer_warps),
               cluster_dim=(cluster, 1, 1), params=_params("desc", "dst", "ntiles"))
    with k:
        desc, dst, ntiles = k.args
        barriers = k.alloc_barriers(2 * num_stages)
        ring = k.smem_alloc(num_stages * TILE, align=1024, name="ring")
        pipe = PipelineTmaAsync.create(
            num_stages=num_stages,
            producer_group=CooperativeGroup(Agent.Thread, 1),
            # one signalling lane per consumer warp and per CTA it releases
            consumer_group=CooperativeGroup(
                Agent.Thread, consumer_arrivals or cluster * consumer_warps),
            tx_count=tx_count, barrier_storage=barriers, cta_layout_vmnk=layout,
            defer_sync=True, name="ab")
        pipeline_init_arrive(cta_layout_vmnk=layout)
        pipeline_init_wait(cta_layout_vmnk=layout)
        warp, lane = k.warp_idx(), k.lane_idx()
        if cluster == 1:
            first, out_base = k.block_idx() * ntiles, 0
        else:
            rank = k.cluster_cta_rank()
            first = k.block_idx() // cluster * ntiles
            # dst = [copy seen by rank 0 | copy seen by rank 1], each as big as src
            total_tiles = Scalar(nvvm.read_ptx_sreg_nctaid_x(i32())) // cluster * ntiles
            out_base = rank * total_tiles * TILE_VECS
        with k.if_(warp == 0):
            producer = pipe.make_producer()
            for t, _ in k.range(ntiles, carry=[producer]):
                handle = producer.acquire()
                with k.elect_one():
                    stage = ring.stage(handle.index, TILE)
                    row = (first + t) * TILE_ROWS
                    if cluster == 1:
                        handle.tma_load(desc, [0, row], stage, TILE)
                    else:
                        rows, share = TILE_ROWS // cluster, TILE // cluster
                        mask = arith.constant(ir.IntegerType.get_signless(16),
                                              (1 << cluster) - 1)
                        handle.tma_load(desc, [0, row + rank * rows], stage + rank * share,
                                        share, mcast_mask=mask)
                producer.commit(handle)
                producer.advance()
            producer.tail()
        with k.if_(warp == 1):
            state = make_pipeline_state(PipelineUserType.Consumer, num_stages)
            for t, _ in k.range(ntiles, carry=[state]):
                pipe.consumer_wait(state)
                _warp_copy(ring.stage(state.index, TILE), 0, dst,
                           out_base + (first + t) * TILE_VECS, lane)
                pipe.consumer_release(state)
                state.advance()
    return k


def pipeline_tma_async_mcast(chip="sm_90a", name="builders_pipeline_tma_async_mcast",
                             num_stages=4):
    return pipeline_tma_async(chip, name, num_stages, cluster=2)


def pipeline_tma_store(chip="sm_90a", name="builders_pipeline_tma_store", num_stages=3,
                       threads=128):
    """A TMA-store epilogue: ``threads`` threads write each tile into stage
    ``t % S`` (after ``producer_acquire`` made sure its previous store has
    read it), fence the async proxy, and thread 0 stores it with TMA."""
    k = Kernel(name, chip=chip, block_dim=threads, params=_params("src", "desc", "ntiles"))
    with k:
        src, desc, ntiles = k.args
        staging = k.smem_alloc(num_stages * TILE, align=1024, name="staging")
        pipe = PipelineTmaStore.create(num_stages=num_stages,
                                       producer_group=CooperativeGroup(Agent.Thread, threads))
        epilogue_sync = NamedBarrier(barrier_id=1, num_threads=threads)
        tid = k.thread_idx()
        is_storer = tid == 0
        first = k.block_idx() * ntiles
        for t in k.range(ntiles):
            buf = staging.stage(t % num_stages, TILE)
            with k.if_(is_storer):
                pipe.producer_acquire()
            epilogue_sync.arrive_and_wait()
            base = (first + t) * TILE_VECS
            vals = [load(src, _vec(), base + tid + threads * j)
                    for j in range(TILE_VECS // threads)]
            for j, v in enumerate(vals):
                store(v, buf, tid + threads * j)
            fence_view_async_shared()
            epilogue_sync.arrive_and_wait()
            with k.if_(is_storer):
                pipe.tma_store(desc, [0, (first + t) * TILE_ROWS], buf)
                pipe.producer_commit()
        with k.if_(is_storer):
            pipe.producer_tail()
    return k


def pipeline_order(chip="sm_90a", name="builders_pipeline_order", depth=3):
    """Three warps take turns on each of ``depth`` tile buffers: load,
    xor, store (PipelineOrder, length 3)."""
    length = 3
    k = Kernel(name, chip=chip, block_dim=32 * length, params=_params("src", "dst", "ntiles"))
    with k:
        src, dst, ntiles = k.args
        barriers = k.alloc_barriers(depth * length)
        ring = k.smem_alloc(depth * TILE, align=128, name="ring")
        warp, lane = k.warp_idx(), k.lane_idx()
        order = PipelineOrder.create(barriers, depth=depth, length=length, group_id=warp,
                                     producer_group=CooperativeGroup(Agent.Thread, 32),
                                     name="order")
        first = k.block_idx() * ntiles
        key = arith.constant(_vec(), ir.DenseElementsAttr.get_splat(
            _vec(), ir.IntegerAttr.get(i32(), XOR32)))
        for t, _ in k.range(ntiles, carry=[order]):
            order.wait()
            buf = ring.stage(order.state.index, TILE)
            with k.if_(warp == 0):
                _warp_copy(src, (first + t) * TILE_VECS, buf, 0, lane)
            with k.if_(warp == 1):
                for j in range(TILE_VECS // 32):
                    v = load(buf, _vec(), lane + 32 * j)
                    store(arith.xori(v, key), buf, lane + 32 * j)
            with k.if_(warp == 2):
                _warp_copy(buf, 0, dst, (first + t) * TILE_VECS, lane)
            order.arrive()
    return k


def named_barrier(chip="sm_90a", name="builders_named_barrier", num_stages=3):
    """A ring of ``num_stages`` buffers handed over with named barriers:
    full[s] = id 1 + s, empty[s] = id 1 + S + s, 64 threads (both warps),
    the id picked at run time from the stage index. The consumer frees every
    tile it read; the producer waits for that before refilling a stage and,
    like ``producer_tail``, once more for each stage at the end, so no
    barrier is left half-arrived when the CTA exits (needs ntiles >= S)."""
    k = Kernel(name, chip=chip, block_dim=64, params=_params("src", "dst", "ntiles"))
    with k:
        src, dst, ntiles = k.args
        ring = k.smem_alloc(num_stages * TILE, align=128, name="ring")
        full = NamedBarrier(barrier_id=1, num_threads=64)
        empty = NamedBarrier(barrier_id=1 + num_stages, num_threads=64)
        warp, lane = k.warp_idx(), k.lane_idx()
        first = k.block_idx() * ntiles
        with k.if_(warp == 0):
            for t in k.range(ntiles):
                s = t % num_stages
                with k.if_(t >= num_stages):       # wait until tile t - S was read
                    empty.arrive_and_wait_w_index(s)
                _warp_copy(src, (first + t) * TILE_VECS, ring.stage(s, TILE), 0, lane)
                full.arrive_w_index(s)
            for s in range(num_stages):             # the last S tiles were read
                empty.arrive_and_wait_w_index(s)
        with k.if_(warp == 1):
            for t in k.range(ntiles):
                s = t % num_stages
                full.arrive_and_wait_w_index(s)
                _warp_copy(ring.stage(s, TILE), 0, dst, (first + t) * TILE_VECS, lane)
                empty.arrive_w_index(s)
    return k


if __name__ == "__main__":
    from _common import main
    sys.exit(main(pipeline_tma_async_mcast(), "tile_copies"))
