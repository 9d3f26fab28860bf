"""GPU-suite kernels written with the pipeline dialect (MLIR text through
the upstream Python bindings), one per pipeline class. They need
convert-pipeline-to-nvvm; until it lowers an op, scripts/build-gpu-bundle.py
records the kernel as skipped with the pass's message.

Common shape: block b copies 4 KiB tiles [b*T, (b+1)*T) of `src` to `dst`
through S shared-memory stages; warp 0 produces, warp 1 consumes; each lane
moves 16-byte vectors lane, lane+32, ... (8 per tile).
"""

TILE = 4096

_PRELUDE = """
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c16 = arith.constant 16 : i32
    %c32 = arith.constant 32 : i32
    %c512 = arith.constant 512 : i32
    %c4096 = arith.constant 4096 : i32
    %i0 = arith.constant 0 : index
    %i1 = arith.constant 1 : index
    %i8 = arith.constant 8 : index
    %tidx = gpu.thread_id x
    %tid = arith.index_cast %tidx : index to i32
    %bidx = gpu.block_id x
    %bid = arith.index_cast %bidx : index to i32
    %warp = arith.divui %tid, %c32 : i32
    %lane = arith.remui %tid, %c32 : i32
    %lane16 = arith.muli %lane, %c16 : i32
    %n = arith.index_cast %ntiles : i32 to index
    %first = arith.muli %bid, %ntiles : i32
    %tiles = llvm.mlir.addressof @tilebuf : !llvm.ptr<3>
"""


def _globals(stages, extra=""):
    return (f"  llvm.mlir.global internal @tilebuf() {{addr_space = 3 : i32, alignment = 128 : i64}} "
            f": !llvm.array<{stages * TILE} x i8>\n{extra}")


def _offsets(tag, idx, k):
    """%gb{tag} (tile byte offset in global) and %sb{tag} (stage offset)."""
    return f"""
        %ki{tag} = arith.index_cast {k} : index to i32
        %tile{tag} = arith.addi %first, %ki{tag} : i32
        %gb{tag} = arith.muli %tile{tag}, %c4096 : i32
        %sb{tag} = arith.muli {idx}, %c4096 : i32"""


def _vec_copy(tag, to_shared, gname, xor=None, cp_async=False):
    """The warp's 8 x 16-byte vectors of one tile."""
    if cp_async:
        move = f"""
          nvvm.cp.async.shared.global %sp{tag}, %gp{tag}, 16, cache = cg : !llvm.ptr<3>, !llvm.ptr<1>"""
    elif to_shared:
        move = f"""
          %v{tag} = llvm.load %gp{tag} {{alignment = 16 : i64}} : !llvm.ptr<1> -> vector<4xi32>
          llvm.store %v{tag}, %sp{tag} {{alignment = 16 : i64}} : vector<4xi32>, !llvm.ptr<3>"""
    else:
        move = f"""
          %v{tag} = llvm.load %sp{tag} {{alignment = 16 : i64}} : !llvm.ptr<3> -> vector<4xi32>
          llvm.store %v{tag}, %gp{tag} {{alignment = 16 : i64}} : vector<4xi32>, !llvm.ptr<1>"""
    return f"""
        scf.for %j{tag} = %i0 to %i8 step %i1 {{
          %ji{tag} = arith.index_cast %j{tag} : index to i32
          %jo{tag} = arith.muli %ji{tag}, %c512 : i32
          %o{tag} = arith.addi %jo{tag}, %lane16 : i32
          %go{tag} = arith.addi %gb{tag}, %o{tag} : i32
          %so{tag} = arith.addi %sb{tag}, %o{tag} : i32
          %g64{tag} = arith.extui %go{tag} : i32 to i64
          %gp{tag} = llvm.getelementptr {gname}[%g64{tag}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8
          %sp{tag} = llvm.getelementptr %tiles[%so{tag}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8{move}
        }}"""


def _kernel(name, globals_, body, params="%src: !llvm.ptr<1>, %dst: !llvm.ptr<1>, %ntiles: i32"):
    return f"""module attributes {{gpu.container_module}} {{
gpu.module @kernels {{
{globals_}
  gpu.func @{name}({params}) kernel {{{_PRELUDE}{body}
    gpu.return
  }}
}}
}}
"""


def _producer_consumer(name, pipe_type, stages, producer_phase=1, cp_async=False):
    ps, cs = f"!pipeline.state<{stages}, producer>", f"!pipeline.state<{stages}, consumer>"
    start = (f"pipeline.state.make : {ps}" if producer_phase == 1 else
             f"pipeline.state.make index %c0 phase %c0 : {ps}")
    body = f"""
    %p = pipeline.create {{name = "ab"}} : {pipe_type}
    %isp = arith.cmpi eq, %warp, %c0 : i32
    scf.if %isp {{
      %s0 = {start}
      %sf = scf.for %k = %i0 to %n step %i1 iter_args(%s = %s0) -> ({ps}) {{
        pipeline.producer.acquire %p, %s : {pipe_type}, {ps}
        %idx = pipeline.state.index %s : {ps}{_offsets("p", "%idx", "%k")}{_vec_copy("p", True, "%src", cp_async=cp_async)}
        pipeline.producer.commit %p, %s : {pipe_type}, {ps}
        %s2 = pipeline.state.advance %s : {ps}
        scf.yield %s2 : {ps}
      }}
      pipeline.producer.tail %p, %sf : {pipe_type}, {ps}
    }}
    %isc = arith.cmpi eq, %warp, %c1 : i32
    scf.if %isc {{
      %s0 = pipeline.state.make : {cs}
      %sf = scf.for %k = %i0 to %n step %i1 iter_args(%s = %s0) -> ({cs}) {{
        pipeline.consumer.wait %p, %s : {pipe_type}, {cs}
        %idx = pipeline.state.index %s : {cs}{_offsets("c", "%idx", "%k")}{_vec_copy("c", False, "%dst")}
        pipeline.consumer.release %p, %s : {pipe_type}, {cs}
        %s2 = pipeline.state.advance %s : {cs}
        scf.yield %s2 : {cs}
      }}
    }}"""
    return _kernel(name, _globals(stages), body)


def pipeline_async(name, stages=4, producer_phase=1):
    """PipelineAsync: producer warp copies global -> stage, consumer warp
    stage -> global. producer_phase=0 is the classic deadlock bug."""
    t = (f"!pipeline.pipeline<async, stages = {stages}, producer = #pipeline.group<thread, 32>, "
         f"consumer = #pipeline.group<thread, 32>>")
    return _producer_consumer(name, t, stages, producer_phase)


def pipeline_cp_async(name, stages=4):
    """PipelineCpAsync: the producer's copies are cp.async (16 B, .cg); the
    commit is cp.async.mbarrier.arrive.noinc on the stage's full barrier."""
    t = (f"!pipeline.pipeline<cp_async, stages = {stages}, producer = #pipeline.group<thread, 32>, "
         f"consumer = #pipeline.group<thread, 32>>")
    return _producer_consumer(name, t, stages, cp_async=True)


def named_barrier_copy(name):
    """NamedBarrier: one stage handed over with bar.arrive / bar.sync
    (id 1 = full, id 2 = empty, 64 threads each)."""
    body = f"""
    %last = arith.subi %n, %i1 : index
    %isp = arith.cmpi eq, %warp, %c0 : i32
    scf.if %isp {{
      scf.for %k = %i0 to %n step %i1 {{
        %notfirst = arith.cmpi ugt, %k, %i0 : index
        scf.if %notfirst {{
          pipeline.named_barrier.sync id = 2, threads = 64
        }}{_offsets("p", "%c0", "%k")}{_vec_copy("p", True, "%src")}
        pipeline.named_barrier.arrive id = 1, threads = 64
      }}
    }}
    %isc = arith.cmpi eq, %warp, %c1 : i32
    scf.if %isc {{
      scf.for %k = %i0 to %n step %i1 {{
        pipeline.named_barrier.sync id = 1, threads = 64{_offsets("c", "%c0", "%k")}{_vec_copy("c", False, "%dst")}
        %notlast = arith.cmpi ult, %k, %last : index
        scf.if %notlast {{
          pipeline.named_barrier.arrive id = 2, threads = 64
        }}
      }}
    }}"""
    return _kernel(name, _globals(1), body)


def pipeline_order(name):
    """PipelineOrder (depth 1, length 3): per tile, warp 0 loads it into
    shared memory, warp 1 xors every word with 0x5A5A5A5A, warp 2 stores it;
    each waits for its predecessor's turn."""
    t = "!pipeline.pipeline<order, stages = 1, producer = #pipeline.group<thread, 32>, length = 3>"
    st = "!pipeline.state<1, producer_consumer>"
    xor = """
        scf.for %jx = %i0 to %i8 step %i1 {
          %jix = arith.index_cast %jx : index to i32
          %jox = arith.muli %jix, %c512 : i32
          %ox = arith.addi %jox, %lane16 : i32
          %spx = llvm.getelementptr %tiles[%ox] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
          %vx = llvm.load %spx {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
          %kx = arith.constant dense<1515870810> : vector<4xi32>
          %wx = arith.xori %vx, %kx : vector<4xi32>
          llvm.store %wx, %spx {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<3>
        }"""
    work = {0: _offsets("a", "%c0", "%k") + _vec_copy("a", True, "%src"),
            1: xor,
            2: _offsets("b", "%c0", "%k") + _vec_copy("b", False, "%dst")}
    body = f"""
    %p = pipeline.create {{name = "order"}} : {t}
    %inrange = arith.cmpi ult, %warp, %c2 : i32
    %is2 = arith.cmpi eq, %warp, %c2 : i32
    %active = arith.ori %inrange, %is2 : i1
    scf.if %active {{
      %s0 = pipeline.order.state %p, %warp : {t} -> {st}
      %sf = scf.for %k = %i0 to %n step %i1 iter_args(%s = %s0) -> ({st}) {{
        pipeline.order.wait %p, %s, %warp : {t}, {st}
        %w0 = arith.cmpi eq, %warp, %c0 : i32
        %w1 = arith.cmpi eq, %warp, %c1 : i32
        scf.if %w0 {{{work[0]}
        }}
        scf.if %w1 {{{work[1]}
        }}
        scf.if %is2 {{{work[2]}
        }}
        %s2 = pipeline.order.arrive %p, %s, %warp : {t}, {st}
        scf.yield %s2 : {st}
      }}
    }}"""
    return _kernel(name, _globals(1), body)


def tma_async(name, stages=4):
    """PipelineTmaAsync, cluster 1: the producer warp acquires (one elected
    arrive.expect_tx of 4096 B), lane 0 issues the TMA load of 16 rows x 64
    u32 into the stage; the consumer warp stores the stage to global."""
    t = (f"!pipeline.pipeline<tma_async, stages = {stages}, producer = #pipeline.group<thread, 1>, "
         f"consumer = #pipeline.group<thread, 1>, tx_count = 4096>")
    ps, cs = f"!pipeline.state<{stages}, producer>", f"!pipeline.state<{stages}, consumer>"
    body = f"""
    %p = pipeline.create {{name = "ab"}} : {t}
    %isp = arith.cmpi eq, %warp, %c0 : i32
    %lane0 = arith.cmpi eq, %lane, %c0 : i32
    scf.if %isp {{
      %s0 = pipeline.state.make : {ps}
      %sf = scf.for %k = %i0 to %n step %i1 iter_args(%s = %s0) -> ({ps}) {{
        pipeline.producer.acquire %p, %s : {t}, {ps}
        %idx = pipeline.state.index %s : {ps}{_offsets("p", "%idx", "%k")}
        %row = arith.muli %tilep, %c16 : i32
        %dstp = llvm.getelementptr %tiles[%sbp] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        scf.if %lane0 {{
          pipeline.copy.tma_load %p, %s, %desc[%c0, %row] to %dstp {{bytes = 4096 : i64}} : {t}, {ps}, !llvm.ptr, !llvm.ptr<3>
        }}
        pipeline.producer.commit %p, %s : {t}, {ps}
        %s2 = pipeline.state.advance %s : {ps}
        scf.yield %s2 : {ps}
      }}
      pipeline.producer.tail %p, %sf : {t}, {ps}
    }}
    %isc = arith.cmpi eq, %warp, %c1 : i32
    scf.if %isc {{
      %s0 = pipeline.state.make : {cs}
      %sf = scf.for %k = %i0 to %n step %i1 iter_args(%s = %s0) -> ({cs}) {{
        pipeline.consumer.wait %p, %s : {t}, {cs}
        %idx = pipeline.state.index %s : {cs}{_offsets("c", "%idx", "%k")}{_vec_copy("c", False, "%dst")}
        pipeline.consumer.release %p, %s : {t}, {cs}
        %s2 = pipeline.state.advance %s : {cs}
        scf.yield %s2 : {cs}
      }}
    }}"""
    return _kernel(name, _globals(stages), body,
                   params="%desc: !llvm.ptr, %dst: !llvm.ptr<1>, %ntiles: i32")


def tma_store(name, stages=3):
    """PipelineTmaStore: one warp fills a stage from global with vector
    loads, fences the async proxy, and lane 0 TMA-stores it; acquire is
    wait_group.read S-1, so up to S stores are in flight."""
    t = f"!pipeline.pipeline<tma_store, stages = {stages}>"
    ps = f"!pipeline.state<{stages}, producer>"
    body = f"""
    %p = pipeline.create : {t}
    %isp = arith.cmpi eq, %warp, %c0 : i32
    %lane0 = arith.cmpi eq, %lane, %c0 : i32
    %full = arith.constant -1 : i32
    scf.if %isp {{
      %s0 = pipeline.state.make : {ps}
      %sf = scf.for %k = %i0 to %n step %i1 iter_args(%s = %s0) -> ({ps}) {{
        scf.if %lane0 {{
          pipeline.producer.acquire %p, %s : {t}, {ps}
        }}
        nvvm.bar.warp.sync %full : i32
        %idx = pipeline.state.index %s : {ps}{_offsets("p", "%idx", "%k")}{_vec_copy("p", True, "%src")}
        nvvm.fence.proxy {{kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}}
        nvvm.bar.warp.sync %full : i32
        %row = arith.muli %tilep, %c16 : i32
        %srcp = llvm.getelementptr %tiles[%sbp] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        scf.if %lane0 {{
          pipeline.copy.tma_store %desc[%c0, %row] from %srcp : !llvm.ptr, !llvm.ptr<3>
          pipeline.producer.commit %p, %s : {t}, {ps}
        }}
        %s2 = pipeline.state.advance %s : {ps}
        scf.yield %s2 : {ps}
      }}
      scf.if %lane0 {{
        pipeline.producer.tail %p, %sf : {t}, {ps}
      }}
    }}"""
    return _kernel(name, _globals(stages), body,
                   params="%src: !llvm.ptr<1>, %desc: !llvm.ptr, %ntiles: i32")


def tma_builder(name, cluster, mib, store=False):
    """Builder for the TMA kernels (manifest entries with descriptor args)."""

    def build(chip, _mib):
        import builders as b

        if cluster != 1:
            raise b.Unavailable(
                "PipelineTmaAsync with cluster (2,1,1) and multicast is not written yet: "
                "it needs the builders of python/pipeline_mlir/pipeline (multicast masks, "
                "cluster-scope releases); add it to test/gpu/dialect_kernels.py")
        text = tma_store(name) if store else tma_async(name)
        image, _ = b.compile_text(text, chip, uses_pipeline=True)
        rows = mib * b.MIB // 256
        sig = ("ptr", "tma", "i32") if store else ("tma", "ptr", "i32")
        e = b._copy_entry(name, "PipelineTmaStore" if store else "PipelineTmaAsync",
                          "pipeline dialect (test/gpu/dialect_kernels.py)", name, mib,
                          (128, 1, 1), (32 if store else 64, 1, 1), 3 if store else 4,
                          signature=sig)
        src, dst, count = e["args"]
        desc = {"role": "tma", "of": "dst" if store else "src", "dtype": "uint32",
                "shape": [rows, 64], "box": [16, 64], "swizzle": 0, "by_value": False}
        # the kernel sees (src, desc, count) for the store, (desc, dst, count) for the load
        e["args"] = ([src, desc, dict(dst, param=False), count] if store
                     else [dict(src, param=False), desc, dst, count])
        return [b.Built(e, image)]

    return build
