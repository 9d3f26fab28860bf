#!/usr/bin/env python3
"""CuTe DSL 4.8.1 streaming copy: the CuTe contender of the streaming benchmark.

    python cute_streaming.py --mib 2048 --stages 1,2,4,6 --tile 16x256,32x256,64x256 \
        --json out.json                      # GPU host: torch + CuTe DSL
    python cute_streaming.py --compile-only  # anywhere: cute.compile for sm_90a, no GPU

Written with the public CuTe DSL API in the shape of our streaming kernel
(benchmarks/streaming.py, kind ``tma``) and of reference/tma_pipe.cu: a ring
of ``stages`` shared-memory tiles under one ``cutlass.pipeline.PipelineTmaAsync``;
warp 4 is the producer (the TMA copy issues from one lane: CuTe's TMA atom
does the election), warps 0-3 consume (wait, 16-byte ``ld.shared`` of the
whole tile into registers, all loads first, then 16-byte ``st.global``, one
release arrive per warp, as our ``tma`` kind); persistent CTAs (grid = SMs x
CTAs/SM) stride over the tiles. The load is a 2-D TMA (``cp.async.bulk.tensor``)
of a ``rows x cols`` int32 tile of the buffer viewed as a row-major
``(n_tiles * rows, cols)`` matrix, so every tile is one contiguous chunk of
``rows * cols * 4`` bytes, like our 1-D bulk copies.

On the GPU every configuration is checked bit-exact (output poisoned first)
and timed like run_bench.py: per-launch CUDA events, median of ``--reps``;
GB/s counts read + write. run_bench.py imports ``sweep`` to run it in its own
process, next to our kernels.
"""

import argparse
import json
import os
import statistics
import sys
import time

CONSUMER_WARPS = 4
BLOCK = 32 * (CONSUMER_WARPS + 1)  # 4 consumer warps + 1 producer warp, as tma_pipe.cu
ELEM_BYTES = 4  # int32
VEC_ELEMS = 4  # 16-byte vectors
SMEM_PER_SM = 228 * 1024  # H100 / H200; 1 KiB of it is reserved per CTA
TMA_BOX_MAX = 256  # elements per TMA box dimension

DEFAULT_STAGES = (1, 2, 3, 4, 5, 6)  # as our sweep (streaming.stream_configs)
DEFAULT_TILES = ("16x256", "32x256", "64x256")  # 16, 32, 64 KiB, as our sweep
RING_MAX = 200 * 1024  # our sweep's bound on stages x tile


def parse_tile(text):
    """``"ROWSxCOLS"`` (int32 elements) -> (rows, cols), checked against the TMA box
    limit and the consumers' 16-byte x 128-thread stride."""
    try:
        rows, cols = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--tile {text!r}: expected ROWSxCOLS, e.g. 32x256") from None
    if not (1 <= rows <= TMA_BOX_MAX and 1 <= cols <= TMA_BOX_MAX):
        raise ValueError(f"--tile {text!r}: each TMA box dimension must be 1..{TMA_BOX_MAX}")
    if (rows * cols) % (VEC_ELEMS * 32 * CONSUMER_WARPS):
        raise ValueError(f"--tile {text!r}: rows*cols must be a multiple of "
                         f"{VEC_ELEMS * 32 * CONSUMER_WARPS} (16-byte vectors x "
                         f"{32 * CONSUMER_WARPS} consumer threads)")
    return rows, cols


def tile_name(rows, cols):
    return f"{rows}x{cols}"


def smem_bytes(stages, rows, cols):
    """Dynamic shared memory: the ring (128-byte aligned) and 2 x stages mbarriers."""
    return stages * rows * cols * ELEM_BYTES + 16 * stages + 256


def configs(stages_list, tiles):
    out = []
    for s in stages_list:
        for rows, cols in tiles:
            if s * rows * cols * ELEM_BYTES <= RING_MAX:
                out.append((s, rows, cols))
    return out


def build(stages, rows, cols):
    """The @cute.jit host function ``(src, dst, ntiles, grid, stream)`` of one
    (stages, tile): builds the TMA descriptor of ``src`` and launches the kernel."""
    import cutlass
    import cutlass.cute as cute
    from cutlass import pipeline
    from cutlass.cute.nvgpu import cpasync
    from cutlass.pipeline import Agent, CooperativeGroup, PipelineUserType
    import cuda.bindings.driver as cuda

    tile_elems = rows * cols
    tile_bytes = tile_elems * ELEM_BYTES
    threads = 32 * CONSUMER_WARPS
    per_thread = tile_elems // (VEC_ELEMS * threads)  # 16-byte vectors per consumer thread
    smem = smem_bytes(stages, rows, cols)

    @cute.kernel
    def kernel(tma_atom: cute.CopyAtom, m_src: cute.Tensor, m_dst: cute.Tensor,
               ntiles: cutlass.Int32):
        alloc = cutlass.memory.SmemAllocator()
        barriers = alloc.allocate_array(cutlass.Int64, 2 * stages)
        ring = alloc.allocate_tensor(
            cutlass.Int32,
            cute.make_layout((rows, cols, stages), stride=(cols, 1, tile_elems)),
            byte_alignment=128)
        pipe = pipeline.PipelineTmaAsync.create(
            num_stages=stages, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, CONSUMER_WARPS),
            tx_count=tile_bytes, barrier_storage=barriers)

        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        tid, _, _ = cute.arch.thread_idx()
        first, _, _ = cute.arch.block_idx()
        stride, _, _ = cute.arch.grid_dim()

        if warp == CONSUMER_WARPS:  # producer
            cpasync.prefetch_descriptor(tma_atom)
            g_tiles = cute.local_tile(m_src, (rows, cols), (None, 0))  # (rows, cols, ntiles)
            t_smem, t_gmem = cpasync.tma_partition(
                tma_atom, 0, cute.make_layout(1),
                cute.group_modes(ring, 0, 2), cute.group_modes(g_tiles, 0, 2))
            state = pipeline.make_pipeline_state(PipelineUserType.Producer, stages)
            for t in cutlass.range(first, ntiles, stride, unroll=1):
                pipe.producer_acquire(state)
                cute.copy(tma_atom, t_gmem[None, t], t_smem[None, state.index],
                          tma_bar_ptr=pipe.producer_get_barrier(state))
                pipe.producer_commit(state)
                state.advance()
            pipe.producer_tail(state)

        if warp < CONSUMER_WARPS:  # consumers
            # Thread tid's share of a tile: the 16-byte vectors tid + 128 * i, i < per_thread
            # (element offsets only through static strides, so 16-byte alignment is known).
            def by_thread(ptr, n):
                return cute.make_tensor(ptr, cute.make_layout(
                    (VEC_ELEMS, threads, per_thread, n),
                    stride=(1, VEC_ELEMS, VEC_ELEMS * threads, tile_elems)))
            s_vecs = by_thread(ring.iterator, stages)
            g_vecs = by_thread(m_dst.iterator, ntiles)
            regs = cute.make_rmem_tensor(cute.make_layout((VEC_ELEMS, per_thread)),
                                         cutlass.Int32)
            state = pipeline.make_pipeline_state(PipelineUserType.Consumer, stages)
            for t in cutlass.range(first, ntiles, stride, unroll=1):
                pipe.consumer_wait(state)
                s_tile = s_vecs[None, tid, None, state.index]
                g_tile = g_vecs[None, tid, None, t]
                cute.autovec_copy(s_tile, regs)
                cute.autovec_copy(regs, g_tile)
                pipe.consumer_release(state)
                state.advance()

    @cute.jit
    def host(src: cute.Pointer, dst: cute.Pointer, ntiles: cutlass.Int32,
             grid: cutlass.Int32, stream: cuda.CUstream):
        matrix = cute.make_layout((ntiles * rows, cols), stride=(cols, 1))
        m_src = cute.make_tensor(src, matrix)
        m_dst = cute.make_tensor(dst, matrix)
        tma_atom, tma_src = cpasync.make_tiled_tma_atom(
            cpasync.CopyBulkTensorTileG2SOp(), m_src,
            cute.make_layout((rows, cols), stride=(cols, 1)), (rows, cols))
        kernel(tma_atom, tma_src, m_dst, ntiles).launch(
            grid=[grid, 1, 1], block=[BLOCK, 1, 1], smem=smem, stream=stream)

    return host


def compile_one(stages, rows, cols, src=16, dst=16, ntiles=1, grid=1, stream=None):
    """cute.compile of one configuration (pointers and sizes are runtime arguments:
    one compile serves every buffer size and grid)."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr
    import cuda.bindings.driver as cuda

    def ptr(addr):
        return make_ptr(cutlass.Int32, addr, cute.AddressSpace.gmem, assumed_align=16)

    if stream is None:
        stream = cuda.CUstream(0)
    return cute.compile(build(stages, rows, cols), ptr(src), ptr(dst), cutlass.Int32(ntiles),
                        cutlass.Int32(grid), stream)


def sweep(src, dst, cfgs, reps=20, log=print, ctas_list=None):
    """Check and time every (stages, rows, cols) x CTAs/SM on torch int32 buffers
    ``src``/``dst`` of equal size. Returns a list of rows (dicts) as run_bench's."""
    import torch
    import cutlass
    from cutlass.cute.runtime import make_ptr
    import cutlass.cute as cute
    import cuda.bindings.driver as cuda
    from run_bench import time_events  # the timer of run_bench's copy baselines

    nbytes = src.numel() * src.element_size()
    if src.dtype != torch.int32 or dst.shape != src.shape or dst.dtype != src.dtype:
        raise ValueError("sweep: src and dst must be int32 tensors of one shape")
    if src.numel() >= 2**31:
        raise ValueError(f"sweep: {nbytes} bytes: the kernel indexes int32 elements with "
                         "32-bit offsets, at most 8 GiB - 4 bytes")
    sms = torch.cuda.get_device_properties(src.device).multi_processor_count
    gb = 2.0 * nbytes / 1e9
    stream = cuda.CUstream(int(torch.cuda.current_stream().cuda_stream))
    p_src = make_ptr(cutlass.Int32, src.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)
    p_dst = make_ptr(cutlass.Int32, dst.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)
    rows_out = []
    for stages, rows, cols in cfgs:
        tile = rows * cols * ELEM_BYTES
        name = f"cute_tma_s{stages}_t{tile_name(rows, cols)}"
        smem = smem_bytes(stages, rows, cols)
        if nbytes % tile:
            log(f"{name}: skipped, {nbytes} bytes is not a multiple of the tile ({tile})")
            continue
        ntiles = nbytes // tile
        base = {"name": name, "kind": "cute_tma", "stages": stages, "tile": tile,
                "tile_shape": [rows, cols], "block": BLOCK, "smem": smem}
        try:
            t0 = time.monotonic()
            compiled = compile_one(stages, rows, cols, src.data_ptr(), dst.data_ptr(), ntiles,
                                   sms, stream)
            base["compile_s"] = time.monotonic() - t0
        except Exception as err:  # report and go on with the others
            rows_out.append({**base, "correct": False,
                             "error": f"compile: {type(err).__name__}: {err}"[:400]})
            log(f"{name}: compile failed: {rows_out[-1]['error']}")
            continue
        fit = min(4, SMEM_PER_SM // (smem + 1024), 2048 // BLOCK)
        for ctas in sorted({1, 2, fit} if ctas_list is None else set(ctas_list)):
            if ctas > fit or ctas < 1:
                continue
            grid = sms * ctas
            row = {**base, "ctas_per_sm": ctas, "grid": grid}

            def launch():
                compiled(p_src, p_dst, cutlass.Int32(ntiles), cutlass.Int32(grid), stream)
            try:
                dst.fill_(-1)  # poison: every byte must be written
                torch.cuda.synchronize()
                launch()
                torch.cuda.synchronize()
                row["correct"] = bool(torch.equal(src, dst))
                times = time_events(torch, launch, reps)
                ms = statistics.median(times)
                row["ms"] = ms
                row["gbps"] = gb / ms * 1e3
                row["spread"] = (max(times) - min(times)) / ms
            except Exception as err:
                row["error"] = f"{type(err).__name__}: {err}"[:400]
                row["correct"] = False
            rows_out.append(row)
            log(f"{name:26s} ctas/SM {ctas} grid {grid:4d}: "
                + (f"{row['gbps']:7.1f} GB/s  check {'OK' if row['correct'] else 'FAIL'}"
                   if "gbps" in row else row.get("error", "?")))
    return rows_out


def best(rows):
    ok = [r for r in rows if r.get("correct") and "gbps" in r]
    return max(ok, key=lambda r: r["gbps"]) if ok else None


def _csv(text, conv):
    return [conv(x) for x in text.split(",") if x]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=2048)
    ap.add_argument("--stages", default=",".join(map(str, DEFAULT_STAGES)),
                    help="comma-separated stage counts")
    ap.add_argument("--tile", default=",".join(DEFAULT_TILES),
                    help="comma-separated ROWSxCOLS int32 tiles (each dimension <= 256)")
    ap.add_argument("--ctas", default="", help="comma-separated CTAs/SM (default 1, 2, max)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", default="", help="write the rows and the best here")
    ap.add_argument("--compile-only", action="store_true",
                    help="cute.compile every configuration for sm_90a, no GPU needed")
    args = ap.parse_args(argv)
    try:
        tiles = [parse_tile(t) for t in args.tile.split(",") if t]
        stages = _csv(args.stages, int)
    except ValueError as err:
        ap.error(str(err))
    if any(s < 1 for s in stages):
        ap.error(f"--stages {args.stages}: stage counts must be >= 1")
    cfgs = configs(stages, tiles)
    if not cfgs:
        ap.error(f"no configuration with stages x tile <= {RING_MAX} bytes")

    if args.compile_only:
        # CuTe DSL reads the target at import; without a GPU it must be named.
        os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
        for s, r, c in cfgs:
            t0 = time.monotonic()
            compile_one(s, r, c)
            print(f"compiled cute_tma_s{s}_t{tile_name(r, c)} ({time.monotonic() - t0:.2f} s)",
                  flush=True)
        return 0

    import torch
    import cutlass

    nbytes = args.mib << 20
    src = torch.randint(-2**31, 2**31 - 1, (nbytes // 4,), dtype=torch.int32, device="cuda")
    dst = torch.empty_like(src)
    dev = torch.cuda.get_device_properties(0)
    print(f"# {dev.name}, {dev.multi_processor_count} SMs, CuTe DSL {cutlass.__version__}, "
          f"{args.mib} MiB", flush=True)
    rows = sweep(src, dst, cfgs, args.reps, ctas_list=_csv(args.ctas, int) or None)
    top = best(rows)
    bad = [r["name"] for r in rows if not r.get("correct")]
    if top:
        print(f"BEST cute {top['name']} ctas/SM {top['ctas_per_sm']}: {top['gbps']:.0f} GB/s")
    if bad:
        print(f"FAILED checks: {bad}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": dev.name, "sms": dev.multi_processor_count,
                       "cutlass_dsl": getattr(cutlass, "__version__", "?"), "bytes": nbytes,
                       "reps": args.reps, "rows": rows, "best": top}, f, indent=1)
    return 0 if top and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
