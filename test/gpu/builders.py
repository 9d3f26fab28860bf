"""Kernel builders for the GPU bundle (run HERE, with the MLIR wheels).

Each builder returns a list of Built(entry, image) or raises Unavailable
with the reason (e.g. the pipeline lowering or a builder is not there yet);
scripts/build-gpu-bundle.py logs the reason and records it in the manifest,
where test_gpu.py turns it into a visible skip.

Manifest entry (the contract with test_gpu.py):
  name, pipeline (class exercised), source, kernel (symbol), image (file),
  chip, grid, block, cluster, smem, signature, args, check, expect, timeout,
  bytes (data moved), stages, watchdog_names, and "launch" (the launch metadata of a
  kernel compiled with Kernel.compile(), added by scripts/build-gpu-bundle.py).
  The suite launches every entry through its runtime.CompiledKernel
  (gpu_child.compiled_kernel): from "launch" when present, else from kernel,
  signature, block, cluster, smem and the parameter names of args.
  args: {"role": "in"|"out", "name", "bytes"} | {"role": "scalar", "name", "type", "value"}
        | {"role": "tma", "of": arg name, "dtype", "shape", "box", "swizzle", "by_value"}
  check: "copy"   -> every output named in expect["outputs"] equals its source repeated
         "watchdog" -> PipelineWatchdogError with expect["stage"/"phase"/"roles"/"pipeline"]
         "hang"   -> KernelTimeoutError within expect["host_timeout"] s (no device watchdog)
         "forensics" -> PipelineWatchdogError whose forensic dump shows expect_waits
                     (warp -> [role, barrier side, stage, phase]; run_forensics.py)
         "gemm"   -> examples/hopper_gemm_host.check on several shapes (entry["gemm"]: its
                     launch facts), against torch.matmul
         "bw_gemm" -> the same with examples/blackwell_gemm_host.py, on sm_100 only
         "attention" -> examples/attention_fwd_host.check on several shapes
                    (entry["attention"]: its launch facts)
         "row_softmax" | "rmsnorm" -> test_gpu_rows.py: examples/row_softmax.py /
                    rmsnorm.py on several row counts against rows_reference.py
                    (entry["rows"]: rows_host.meta_of's launch facts)
         "fragment_ops" | "fragment_convert" | "fragment_operand_a" | "fragment_mma_rs"
                 -> test/gpu/fragment_reference.py's torch references (entry: n,
                    ops/row_ops or dtypes, k and b_major for mma_rs)
"""

import os
import subprocess
import tempfile
from dataclasses import dataclass

import builder_kernels
import dialect_kernels
import ptx_kernels
import ref_kernels

MIB = 1 << 20


class Unavailable(Exception):
    """A kernel cannot be built yet; the message says why."""


@dataclass
class Built:
    entry: dict
    image: bytes
    ext: str = "cubin"


UPSTREAM_LOWERING = ("nvvm-attach-target{{chip={chip} O=3}}, gpu.module(convert-scf-to-cf, "
                     "convert-gpu-to-nvvm, convert-nvvm-to-llvm, reconcile-unrealized-casts), "
                     "gpu-module-to-binary{{format=bin}}")


def _gpu_binary(module):
    import mlir.ir as ir
    from mlir.dialects import gpu

    for op in module.body.operations:
        if op.operation.name == "gpu.binary":
            for obj in ir.ArrayAttr(op.attributes["objects"]):
                return bytes(gpu.ObjectAttr(obj).object)
    raise Unavailable("the pass pipeline produced no gpu.binary")


def _watchdog_names(module):
    import mlir.ir as ir

    ops = [module.operation] + [op.operation for op in module.body.operations]
    for op in ops:
        if "pipeline.watchdog_names" in op.attributes:
            return [ir.StringAttr(a).value for a in ir.ArrayAttr(op.attributes["pipeline.watchdog_names"])]
    return []


def compile_text(text, chip, watchdog=False, uses_pipeline=False, timeout_ns=None, verify=True):
    """cubin bytes (+ watchdog names) of MLIR text with one gpu.module."""
    import mlir.ir as ir
    import mlir.passmanager as pm

    import pipeline_mlir

    ctx = pipeline_mlir.make_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.parse(text)
        names = []
        if uses_pipeline:
            from pipeline_mlir import compiler

            try:
                return (compiler.to_cubin(module, chip=chip, watchdog=watchdog,
                                          verify_protocol=verify, use_cache=False),
                        _names_via_nvvm(module, chip, watchdog, verify))
            except (compiler.CompileError, ValueError) as err:
                # until the named pipeline exists, run its passes here
                if "pipeline-to-cubin" not in str(err) or "registered" not in str(err):
                    raise Unavailable(f"compiler.to_cubin failed: {str(err)[:600]}") from None
            opts = f"chip={chip} watchdog={'true' if watchdog else 'false'}"
            if timeout_ns:
                opts += f" watchdog-timeout-ns={timeout_ns}"
            try:
                checks = "pipeline-verify-protocol, " if verify else ""
                pm.PassManager.parse(f"builtin.module({checks}"
                                     f"convert-pipeline-to-nvvm{{{opts}}})").run(module.operation)
            except (ir.MLIRError, ValueError) as err:
                raise Unavailable(f"convert-pipeline-to-nvvm failed: {str(err)[:600]}") from None
            names = _watchdog_names(module)
        try:
            pm.PassManager.parse("builtin.module(" + UPSTREAM_LOWERING.format(chip=chip) + ")").run(
                module.operation)
        except (ir.MLIRError, ValueError) as err:
            raise Unavailable(f"upstream lowering to cubin failed: {str(err)[:600]}") from None
        return _gpu_binary(module), names


def _names_via_nvvm(module, chip, watchdog, verify):
    if not watchdog:
        return []
    from pipeline_mlir import compiler

    return _watchdog_names(compiler.to_nvvm(module, chip=chip, watchdog=True,
                                            verify_protocol=verify))


def ptxas(ptx, arch):
    with tempfile.TemporaryDirectory() as d:
        src, out = f"{d}/k.ptx", f"{d}/k.cubin"
        with open(src, "w") as f:
            f.write(ptx)
        subprocess.run(["ptxas", f"-arch={arch}", src, "-o", out], check=True,
                       capture_output=True, text=True)
        with open(out, "rb") as f:
            return f.read()


def _copy_entry(name, pipeline, source, kernel, mib, grid, block, stages, cluster=(1, 1, 1),
                smem=0, times=1, extra_args=(), signature=("ptr", "ptr", "i32")):
    nbytes = mib * MIB
    tiles_per_block = nbytes // ref_kernels.TILE_BYTES // grid[0] * cluster[0] // cluster[0]
    if mib * MIB != tiles_per_block * grid[0] * ref_kernels.TILE_BYTES:
        raise ValueError(f"{name}: {mib} MiB is not a whole number of tiles per block")
    return {
        "name": name, "pipeline": pipeline, "source": source, "kernel": kernel,
        "grid": list(grid), "block": list(block), "cluster": list(cluster), "smem": smem,
        "signature": list(signature),
        "args": [{"role": "in", "name": "src", "bytes": nbytes},
                 {"role": "out", "name": "dst", "bytes": nbytes * times},
                 *extra_args,
                 {"role": "scalar", "name": "ntiles", "type": "i32", "value": tiles_per_block}],
        "check": "copy", "expect": {"outputs": {"dst": {"from": "src", "times": times}}},
        "timeout": 30.0, "bytes": nbytes, "stages": stages,
    }


# --------------------------------------------------------------------------
# Reference kernels (no pipeline lowering needed)
# --------------------------------------------------------------------------

def build_async_ref(chip, mib):
    out = []
    image, _ = compile_text(ref_kernels.async_copy_kernel("async_ref", stages=4), chip)
    e = _copy_entry("async_ref", "PipelineAsync", "reference NVVM (test/gpu/ref_kernels.py)",
                    "async_ref", mib, (128, 1, 1), (64, 1, 1), 4)
    out.append(Built(e, image))
    # the deadlock bug (producer starting at phase 0) with the device watchdog
    image, _ = compile_text(ref_kernels.async_copy_kernel(
        "async_ref_bug", stages=4, producer_phase=0, watchdog=True, timeout_ns=500_000_000), chip)
    e = _copy_entry("async_ref_watchdog", "PipelineAsync", "reference NVVM, producer phase 0 bug",
                    "async_ref_bug", 1, (8, 1, 1), (64, 1, 1), 4)
    e.update(check="watchdog", timeout=20.0, watchdog_names=["ab"],
             expect={"pipeline": "ab", "stage": 0, "phase": 0,
                     "roles": {"producer_acquire": 0, "consumer_wait": 1}})
    out.append(Built(e, image))
    # the same bug without the device watchdog: the host deadline must fire
    image, _ = compile_text(ref_kernels.async_copy_kernel(
        "async_ref_hang", stages=4, producer_phase=0, watchdog=False), chip)
    e = _copy_entry("async_ref_hang", "PipelineAsync", "reference NVVM, producer phase 0 bug",
                    "async_ref_hang", 1, (8, 1, 1), (64, 1, 1), 4)
    e.update(check="hang", expect={"host_timeout": 3.0})
    out.append(Built(e, image))
    return out


def build_tma_ref(chip, mib):
    if not chip.startswith("sm_90"):
        raise Unavailable(f"the hand-written TMA PTX targets sm_90a, not {chip}")
    out = []
    rows = mib * MIB // 256
    for kernel, ptx, by_value in (("tma_copy", ptx_kernels.TMA_COPY, False),
                                  ("tma_copy_byval", ptx_kernels.TMA_COPY_BYVAL, True)):
        e = _copy_entry(kernel + "_ref", "TMA descriptors (runtime)", "hand-written PTX", kernel,
                        mib, (128, 1, 1), (32, 1, 1), 1,
                        signature=("tma_byval" if by_value else "tma",) * 2 + ("i32",))
        tile_arg = e["args"][2]
        e["args"] = [dict(e["args"][0], param=False), dict(e["args"][1], param=False),
                     {"role": "tma", "of": "src", "dtype": "uint32", "shape": [rows, 64],
                      "box": [16, 64], "swizzle": 0, "by_value": by_value},
                     {"role": "tma", "of": "dst", "dtype": "uint32", "shape": [rows, 64],
                      "box": [16, 64], "swizzle": 0, "by_value": by_value},
                     tile_arg]
        out.append(Built(e, ptxas(ptx, "sm_90a")))
    return out


def build_misc(chip, mib):
    """PTX for the driver JIT and an sm_100a cubin for the arch refusal."""
    fill = {"name": "fill_ptx", "pipeline": "runtime (PTX JIT)", "source": "hand-written PTX",
            "kernel": "fill", "check": "fill"}
    tiny = {"name": "tiny_sm100a", "pipeline": "runtime (arch check)", "source": "ptxas sm_100a",
            "kernel": "tiny", "check": "arch_refused", "chip": "sm_100a"}
    return [Built(fill, ptx_kernels.FILL.encode(), "ptx"),
            Built(tiny, ptxas(ptx_kernels.TINY_SM100, "sm_100a"))]


# --------------------------------------------------------------------------
# Kernels written with the pipeline dialect (need convert-pipeline-to-nvvm)
# --------------------------------------------------------------------------

def _dialect(name, pipeline, text_fn, mib, grid, block, stages, cluster=(1, 1, 1), times=1,
             extra_args=(), signature=("ptr", "ptr", "i32"), xor32=None):
    def build(chip, _mib):
        image, _ = compile_text(text_fn(), chip, uses_pipeline=True)
        e = _copy_entry(name, pipeline, "pipeline dialect (test/gpu/dialect_kernels.py)",
                        name, mib, grid, block, stages, cluster, times=times,
                        extra_args=extra_args, signature=signature)
        if xor32 is not None:
            e["expect"]["outputs"]["dst"]["xor32"] = xor32
        return [Built(e, image)]

    return build


def build_pipeline_async_watchdog(chip, mib):
    """The producer-phase-0 deadlock written with the dialect, lowered with
    the device watchdog (docs/watchdog.md) bounding each wait to 0.5 s.

    Both warps hang on stage 0 phase 0 (the producer's acquire on empty[0],
    the consumer's wait on full[0]); whichever times out first in any block
    writes the record, e.g. "producer_acquire on pipeline 'ab' stage 0
    phase 0 timed out in block (3,0,0) warp 0" or "consumer_wait ... warp 1".

    Lowered here with pipeline-to-cubin (compiler.to_cubin has no timeout
    option) and verify-protocol=false: the protocol checker rejects this
    very bug at compile time."""
    import mlir.ir as ir
    import mlir.passmanager as pm

    import pipeline_mlir

    timeout_ns = 500_000_000
    text = dialect_kernels.pipeline_async("pipeline_async_bug", producer_phase=0)
    opts = (f"chip={chip} format=bin verify-protocol=false watchdog=true "
            f"watchdog-timeout-ns={timeout_ns}")
    with pipeline_mlir.make_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        try:
            pm.PassManager.parse(f"builtin.module(pipeline-to-cubin{{{opts}}})").run(
                module.operation)
        except (ir.MLIRError, ValueError) as err:
            raise Unavailable(f"pipeline-to-cubin{{watchdog=true}} failed: {str(err)[:600]}") from None
        image, names = _gpu_binary(module), _watchdog_names(module)
    # What the runner needs from the cubin: the pointer it sets, the names.
    for symbol in (b"__pipeline_watchdog_buffer", b"__pipeline_watchdog_names"):
        if symbol not in image:
            raise Unavailable(f"the watchdog cubin has no {symbol.decode()} symbol, so the "
                              "runner could not read a record (docs/watchdog.md)")
    if names != ["ab"]:
        raise Unavailable(f"pipeline.watchdog_names is {names}, expected ['ab']")
    e = _copy_entry("pipeline_async_watchdog", "PipelineAsync",
                    "pipeline dialect, producer phase 0 bug", "pipeline_async_bug", 1,
                    (8, 1, 1), (64, 1, 1), 4)
    e.update(check="watchdog", timeout=20.0, watchdog_names=names, watchdog_timeout_ns=timeout_ns,
             expect={"pipeline": "ab", "stage": 0, "phase": 0,
                     "roles": {"producer_acquire": 0, "consumer_wait": 1}})
    return [Built(e, image)]


def build_forensics_hangs(chip, _mib):
    """The three planted hangs of planted_hangs.py (wrong start phase,
    missing release, wrong tx bytes), device watchdog on: run_forensics.py
    and test_gpu.py's forensics test launch them and check the report."""
    import planted_hangs

    out = []
    for name in planted_hangs.HANGS:
        try:
            k, fn, names = planted_hangs.compile_hang(name, chip)
        except Exception as err:  # lowering/ptxas diagnostics -> a visible skip
            raise Unavailable(f"{name}: pipeline-to-cubin failed: {str(err)[:600]}") from None
        out.append(Built(planted_hangs.manifest(name, k, fn, names), bytes(fn)))
    return out


def build_hopper_gemm(chip, _mib):
    """examples/hopper_gemm.py: the fastest configuration, a narrower tile and
    the 2-CTA multicast variant (each checked against torch.matmul)."""
    import sys
    from dataclasses import replace

    examples = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
    sys.path.insert(0, os.path.abspath(examples))
    import hopper_gemm
    import hopper_gemm_host

    base = hopper_gemm.GemmConfig(epilogue_passes=2)
    out = []
    for cfg in (base, replace(base, block_n=128, dtype="f16"), replace(base, cluster_m=2)):
        k = hopper_gemm.build(cfg, chip)
        e = {"name": cfg.name, "pipeline": "PipelineTmaAsync+wgmma",
             "source": "examples/hopper_gemm.py", "kernel": cfg.name, "chip": chip,
             "check": "gemm", "gemm": hopper_gemm_host.meta_of(cfg, k)}
        out.append(Built(e, k.compile()))
    return out


def build_attention(chip, _mib):
    """examples/attention_fwd.py: d = 128 causal (ping-pong, intra-warpgroup
    overlap) and d = 64 non-causal with three consumer warpgroups, each
    checked against fp32 attention."""
    import sys

    examples = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
    sys.path.insert(0, os.path.abspath(examples))
    import attention_fwd

    out = []
    for cfg in (attention_fwd.AttentionConfig(head_dim=128, causal=True),
                attention_fwd.AttentionConfig(head_dim=64, consumer_warpgroups=3,
                                              consumer_registers=160)):
        k = attention_fwd.build(cfg, chip)
        meta = cfg.meta(k)
        e = {"name": cfg.name, "pipeline": "PipelineTmaAsync x3+wgmma",
             "source": "examples/attention_fwd.py", "kernel": cfg.name, "chip": chip,
             "check": "attention", "attention": meta}
        out.append(Built(e, k.compile()))
    return out


def build_fp8_gemm(chip, _mib):
    """examples/fp8_gemm.py: e4m3 with scales, both accumulation modes (each
    checked against an fp64 reference of the dequantized inputs)."""
    import sys

    examples = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
    sys.path.insert(0, os.path.abspath(examples))
    import fp8_gemm
    import hopper_gemm_host

    out = []
    for cfg in (fp8_gemm.FAST, fp8_gemm.PROMOTED):
        k = fp8_gemm.build(cfg, chip)
        e = {"name": cfg.name, "pipeline": "PipelineTmaAsync+wgmma",
             "source": "examples/fp8_gemm.py", "kernel": cfg.name, "chip": chip,
             "check": "fp8_gemm", "accumulation": cfg.accumulation,
             "gemm": hopper_gemm_host.meta_of(cfg, k)}
        out.append(Built(e, k.compile()))
    return out


def build_fragments(chip, _mib):
    """test/gpu/fragment_kernels.py: the register-fragment layer's ops (two
    widths: n = 64, and n = 24 whose per-row value counts are odd), its
    conversions, its register-A packing and a register-A wgmma with K- and
    MN-major B; test_gpu.py checks them against fragment_reference.py."""
    import fragment_kernels as fk
    from pipeline_mlir.layout import OperandLayout

    src = {"pipeline": "register fragments", "source": "test/gpu/fragment_kernels.py",
           "chip": chip}
    out = []
    for n in (64, 24):
        k = fk.ops_kernel(n, chip)
        out.append(Built(dict(src, name=k.name, kernel=k.name, check="fragment_ops", n=n,
                              ops=list(fk.FRAGMENT_OPS), row_ops=list(fk.ROW_OPS)),
                         k.compile()))
    k = fk.convert_kernel(64, chip)
    out.append(Built(dict(src, name=k.name, kernel=k.name, check="fragment_convert", n=64,
                          dtypes=list(fk.CONVERT_DTYPES)), k.compile()))
    k = fk.operand_a_kernel(64, chip)
    out.append(Built(dict(src, name=k.name, kernel=k.name, check="fragment_operand_a", n=64,
                          dtypes=list(fk.OPERAND_A_DTYPES)), k.compile()))
    for name, layout, k_dim in fk.MMA_RS_CASES:
        k = fk.mma_rs_kernel(layout, k_dim, name, chip)
        out.append(Built(dict(src, name=name, kernel=name, check="fragment_mma_rs",
                              n=layout.mn, k=k_dim, b_major=layout.major), k.compile()))
    return out


#: (example, row length, dtype) of the row kernels the GPU suite checks: a
#: warp per row and a CTA per row, rows that are whole chunks and ragged ones,
#: 16-byte and (n = 1001) scalar accesses, the three dtypes.
ROW_CASES = [
    ("row_softmax", 128, "bf16"), ("row_softmax", 1000, "bf16"),
    ("row_softmax", 2048, "bf16"), ("row_softmax", 1001, "bf16"),
    ("row_softmax", 4096, "bf16"), ("row_softmax", 6000, "bf16"),
    ("row_softmax", 16384, "bf16"), ("row_softmax", 1000, "f16"),
    ("row_softmax", 8192, "f32"),
    ("rmsnorm", 1000, "bf16"), ("rmsnorm", 2048, "bf16"), ("rmsnorm", 1001, "bf16"),
    ("rmsnorm", 4096, "bf16"), ("rmsnorm", 6000, "bf16"), ("rmsnorm", 16384, "bf16"),
    ("rmsnorm", 1024, "f32"),
    # through a ring of rows in shared memory (row_ring.py): whole rows, rows
    # in parts (RMSNorm 40000), rows past 48 KiB split over a cluster (the
    # softmax's 32768 and 40000 over two CTAs, 65536 over four; 40000's
    # slices ragged), f16 / f32
    ("row_softmax", 32768, "bf16"), ("row_softmax", 65536, "bf16"),
    ("row_softmax", 40000, "bf16"),
    ("row_softmax", 4096, "f32"), ("rmsnorm", 40000, "bf16"), ("rmsnorm", 8192, "f16"),
]


def build_rows(chip, _mib):
    """examples/row_softmax.py and examples/rmsnorm.py (register rows,
    pipeline_mlir.kernel.rows, and rings of rows, row_ring.py) for ROW_CASES; test_gpu_rows.py checks them
    against fp32 references with their host launchers (rows_host.py)."""
    import sys

    examples = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
    sys.path.insert(0, os.path.abspath(examples))
    import rmsnorm
    import row_softmax
    import rows_host

    out = []
    for example, n, dtype in ROW_CASES:
        k = {"row_softmax": row_softmax, "rmsnorm": rmsnorm}[example].build(n, dtype, chip=chip)
        e = {"name": k.name, "pipeline": "PipelineTmaAsync row ring" if k.stages else "register rows",
             "source": f"examples/{example}.py",
             "kernel": k.name, "chip": chip, "check": example,
             "rows": rows_host.meta_of(k.rows, k)}
        out.append(Built(e, k.compile()))
    return out


def build_blackwell_gemm(_chip, _mib):
    """examples/blackwell_gemm.py for sm_100a whatever the bundle's chip:
    1-CTA and CTA-pair, CLC and static schedulers. The suite runs them only
    on compute capability 10.0 (elsewhere it skips with the reason)."""
    import sys
    from dataclasses import replace

    examples = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
    sys.path.insert(0, os.path.abspath(examples))
    import blackwell_gemm
    import blackwell_gemm_host

    base = blackwell_gemm.GemmConfig()
    out = []
    for cfg in (base, replace(base, cta_group=2), replace(base, scheduler="static"),
                replace(base, dtype="f16", block_n=128)):
        k = blackwell_gemm.build(cfg, "sm_100a")
        e = {"name": cfg.name, "pipeline": "PipelineTmaUmma+UmmaAsync+ClcFetchAsync",
             "source": "examples/blackwell_gemm.py", "kernel": cfg.name, "chip": "sm_100a",
             "check": "bw_gemm", "gemm": blackwell_gemm_host.meta_of(cfg, k)}
        out.append(Built(e, k.compile(chip="sm_100a")))
    return out


def builders(mib):
    """(name, function(chip, mib)) in build order."""
    dk = dialect_kernels
    skip = set(filter(None, os.environ.get("PIPELINE_BUNDLE_SKIP", "").split(",")))
    return [(n, b) for n, b in _all_builders(dk, mib) if n not in skip]


def _all_builders(dk, mib):
    return [
        ("async_ref", build_async_ref),
        ("tma_ref", build_tma_ref),
        ("misc", build_misc),
        ("pipeline_async", _dialect("pipeline_async", "PipelineAsync",
                                    lambda: dk.pipeline_async("pipeline_async"), mib,
                                    (128, 1, 1), (64, 1, 1), 4)),
        ("pipeline_async_watchdog", build_pipeline_async_watchdog),
        ("forensics_hangs", build_forensics_hangs),
        ("pipeline_cp_async", _dialect("pipeline_cp_async", "PipelineCpAsync",
                                       lambda: dk.pipeline_cp_async("pipeline_cp_async"), mib,
                                       (128, 1, 1), (64, 1, 1), 4)),
        ("pipeline_named_barrier", _dialect("pipeline_named_barrier", "NamedBarrier",
                                            lambda: dk.named_barrier_copy("pipeline_named_barrier"),
                                            mib, (128, 1, 1), (64, 1, 1), 1)),
        ("pipeline_order", _dialect("pipeline_order", "PipelineOrder",
                                    lambda: dk.pipeline_order("pipeline_order"), mib,
                                    (128, 1, 1), (96, 1, 1), 3, xor32=0x5A5A5A5A)),
        ("pipeline_tma_async", dk.tma_builder("pipeline_tma_async", cluster=1, mib=mib)),
        ("pipeline_tma_store", dk.tma_builder("pipeline_tma_store", cluster=1, mib=mib, store=True)),
        # the same pipelines built with the Python builders (examples/copy_ring.py and
        # examples/tile_copies.py, launched as test/gpu/builder_kernels.py says)
        ("builders_pipeline_async", builder_kernels.bundle_builder("pipeline_async", mib)),
        ("builders_pipeline_cp_async",
         builder_kernels.bundle_builder("pipeline_cp_async", mib)),
        ("builders_pipeline_tma_async",
         builder_kernels.bundle_builder("pipeline_tma_async", mib)),
        ("builders_pipeline_tma_async_mcast",
         builder_kernels.bundle_builder("pipeline_tma_async_mcast", mib)),
        ("builders_pipeline_tma_store", builder_kernels.bundle_builder("pipeline_tma_store", mib)),
        ("builders_pipeline_order", builder_kernels.bundle_builder("pipeline_order", mib)),
        ("builders_named_barrier", builder_kernels.bundle_builder("named_barrier", mib)),
        ("hopper_gemm", build_hopper_gemm),
        ("attention", build_attention),
        ("fp8_gemm", build_fp8_gemm),
        ("fragments", build_fragments),
        ("rows", build_rows),
        ("blackwell_gemm", build_blackwell_gemm),
    ]
