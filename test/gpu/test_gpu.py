"""The GPU suite: run the bundle's kernels and check every byte.

Driven by manifest.json (scripts/build-gpu-bundle.py). Without a GPU or
cuda-bindings every test is skipped with the reason (conftest.py). Kernels
are launched through their compiled callables (``runtime.CompiledKernel``:
``fn(src, dst, n, grid=...)``); test_launch_validation_uses_device_limits
keeps the explicit ``Module.kernel(...).launch(...)`` path covered.

    cd .gpu-bundle && python3 -m pytest -q test_gpu.py
"""

import gc
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from gpu_child import bundle_dir, compiled_kernel, load_manifest

MANIFEST = load_manifest() or {"kernels": [], "skipped": []}
KERNELS = {e["name"]: e for e in MANIFEST["kernels"]}


def by_check(check):
    return [n for n, e in KERNELS.items() if e.get("check") == check] or [
        pytest.param(None, marks=pytest.mark.skip(reason=f"no '{check}' kernel in the manifest"))]


def prepare(name, device):
    import gpu_child
    from pipeline_mlir import runtime as rt

    try:
        return gpu_child.Prepared(KERNELS[name], device, bundle_dir())
    except rt.ArchMismatchError as err:
        pytest.skip(str(err))


def test_bundle_present():
    assert bundle_dir() is not None, "no manifest.json: run scripts/build-gpu-bundle.py"
    assert MANIFEST["kernels"], "the manifest lists no kernels"


def test_device_is_hopper(device):
    print(f"{device} limits={device.limits}")
    assert device.cc >= (9, 0), f"{device.name} is {device.sm}; the suite needs sm_90+"


@pytest.mark.parametrize("name", [s["name"] for s in MANIFEST["skipped"]] or [
    pytest.param(None, marks=pytest.mark.skip(reason="nothing was skipped at build time"))])
def test_not_built(name):
    reason = next(s["reason"] for s in MANIFEST["skipped"] if s["name"] == name)
    pytest.skip(f"{name} was not built: {reason}")


@pytest.mark.parametrize("name", by_check("copy"))
def test_copy_every_byte(name, device):
    """>= 64 MiB through >= 3 stages (or one TMA tile at a time), every byte checked."""
    e = KERNELS[name]
    prep = prepare(name, device)
    try:
        run = prep.launch()
        problems = prep.check_outputs()
        ms = run.elapsed_ms
        moved = e["bytes"] * 2 * e["expect"]["outputs"]["dst"].get("times", 1)
        print(f"{name} ({e['pipeline']}, {e['stages']} stages): {e['bytes'] >> 20} MiB in "
              f"{ms:.3f} ms = {moved / ms / 1e6:.1f} GB/s read+write")
        assert not problems, f"{name}: " + "; ".join(problems)
        assert ms > 0
        # a second launch on the same buffers must also be right (state reset)
        for d in (prep.dev[n] for n in e["expect"]["outputs"]):
            d.copy_from_host(np.zeros(d.nbytes, dtype=np.uint8))
        prep.launch()
        assert not prep.check_outputs()
    finally:
        prep.free()


def _child(mode, name, limit=90):
    try:
        proc = subprocess.run([sys.executable, os.path.join(bundle_dir(), "gpu_child.py"), mode, name],
                              capture_output=True, text=True, timeout=limit, cwd=bundle_dir())
    except subprocess.TimeoutExpired:
        pytest.fail(f"the {mode} child for {name} did not exit within {limit} s")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no result from the child (rc {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(lines[-1])


@pytest.mark.parametrize("name", by_check("watchdog"))
def test_watchdog_names_the_stuck_wait(name, device):
    """A producer state starting at phase 0 deadlocks on stage 0 phase 0; the
    device watchdog traps and the host reports which wait, where."""
    e = KERNELS[name]
    out = _child("watchdog", name)
    print(json.dumps(out, indent=1))
    assert out["ok"], out
    rec, want = out["record"], e["expect"]
    assert rec["role"] in want["roles"], rec
    assert rec["warp"] == want["roles"][rec["role"]], rec
    assert (rec["stage"], rec["phase"]) == (want["stage"], want["phase"]), rec
    assert 0 <= rec["block"][0] < e["grid"][0] and rec["block"][1:] == [0, 0], rec
    expected = (f"{rec['role']} on pipeline '{want['pipeline']}' stage {want['stage']} phase "
                f"{want['phase']} timed out in block ({rec['block'][0]},0,0) warp {rec['warp']}")
    assert expected in out["message"], out["message"]
    assert "context is unusable" in out["message"]


@pytest.mark.parametrize("name", by_check("forensics"))
def test_forensic_report(name, device):
    """A planted hang (planted_hangs.py): the watchdog's forensic dump shows
    every expected warp waiting on the expected barrier and phase, and the
    probes agree that this phase is the one in progress."""
    from run_forensics import check

    out = _child("forensics", name)
    print(out.get("message", out))
    assert check(KERNELS[name], out) == []
    assert "wait-for graph:" in out["message"], out["message"]


@pytest.mark.parametrize("name", by_check("hang"))
def test_host_deadline_on_hung_kernel(name, device):
    e = KERNELS[name]
    out = _child("hang", name)
    print(json.dumps(out, indent=1))
    assert out["ok"], out
    t = e["expect"]["host_timeout"]
    assert out["message"].startswith(
        f"kernel '{e['kernel']}' did not finish within {t:.1f} s (grid {tuple(e['grid'])}, "
        f"block {tuple(e['block'])}"), out["message"]
    assert "cannot be reused" in out["message"]
    assert t <= out["seconds"] < t + 10


def test_ptx_jit_and_scalars(device):
    from pipeline_mlir import runtime as rt

    if "fill_ptx" not in KERNELS:
        pytest.skip("fill_ptx not in the manifest")
    with open(os.path.join(bundle_dir(), KERNELS["fill_ptx"]["image"]), "rb") as f:
        fn = rt.CompiledKernel(f.read(), name="fill", block=256,
                               params=[("out", "ptr:4"), ("value", "u32"), ("n", "u32")])
    assert fn.module(device).target.kind == "ptx"
    n = 1_000_003
    out = np.zeros(n, dtype=np.uint32)           # host array: copied in and back
    run = fn(out, np.uint32(5), n, grid=(n + 255) // 256, device=device)
    assert run.elapsed_ms > 0
    assert np.array_equal(out, np.arange(n, dtype=np.uint32) + 5)
    with pytest.raises(rt.ArgumentError, match=r"argument 2 \('n'\) of kernel 'fill': -1 is "
                       r"out of range for u32"):
        fn(out, 5, -1, grid=1, device=device)


def test_sm100a_cubin_refused_on_hopper(device):
    from pipeline_mlir import runtime as rt

    if "tiny_sm100a" not in KERNELS:
        pytest.skip("tiny_sm100a not in the manifest")
    path = os.path.join(bundle_dir(), KERNELS["tiny_sm100a"]["image"])
    if device.cc == (10, 0):
        pytest.skip("this device is sm_100; the cubin is valid here")
    with pytest.raises(rt.ArchMismatchError, match=r"built for sm_100a .* compute capability "
                       rf"{device.cc[0]}\.{device.cc[1]}"):
        rt.Module(path, device=device)


def test_torch_tensors(device):
    torch = pytest.importorskip("torch")
    from pipeline_mlir import runtime as rt
    from pipeline_mlir.runtime.launch import stream_address

    if "async_ref" not in KERNELS:
        pytest.skip("async_ref not in the manifest")
    e = KERNELS["async_ref"]
    fn = compiled_kernel(e, bundle_dir())
    tiles = 64
    src = torch.randint(0, 256, (e["grid"][0] * tiles * 4096,), dtype=torch.uint8, device="cuda")
    dst = torch.zeros_like(src)
    fn(src, dst, tiles, grid=e["grid"], device=device)
    assert torch.equal(src, dst)
    # Without sync, on torch's current stream: torch's next op on that stream
    # sees the result; no host synchronization in between.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        dst2 = torch.zeros_like(src)
        run = fn(src, dst2, tiles, grid=e["grid"], device=device, sync=False)
        assert stream_address(run.stream) == side.cuda_stream
        same = torch.equal(src, dst2)
    run.wait()
    assert same
    # a misaligned view is refused before the launch
    with pytest.raises(rt.ArgumentError, match=r"argument 0 \('src'\) of kernel 'async_ref': "
                       r"address .* is not 16-byte aligned"):
        fn(src[4:], dst, tiles, grid=e["grid"], device=device)


def test_launch_validation_uses_device_limits(device):
    from pipeline_mlir import runtime as rt

    e = KERNELS.get("async_ref")
    if e is None:
        pytest.skip("async_ref not in the manifest")
    mod = rt.Module(os.path.join(bundle_dir(), e["image"]), device=device)
    k = mod.kernel(e["kernel"], signature=e["signature"])
    assert k.attrs.static_smem >= 4 * 4096
    with pytest.raises(rt.LaunchConfigError, match="more than the"):
        k.launch(grid=(1,), block=(64,), smem=device.limits.max_smem_per_block_optin,
                 args=[0, 0, 0])
    with pytest.raises(rt.LaunchConfigError, match="does not divide"):
        k.launch(grid=(3,), block=(64,), cluster=(2, 1, 1), args=[0, 0, 0])


def test_no_device_memory_leak_over_1000_launches(device):
    """1,000 launches with host arrays (temporary device copies) and fresh TMA
    descriptors: cuMemGetInfo and the runtime's allocation count come back."""
    from pipeline_mlir import runtime as rt

    if "async_ref" not in KERNELS:
        pytest.skip("async_ref not in the manifest")
    e = KERNELS["async_ref"]
    fn = compiled_kernel(e, bundle_dir())
    tiles = 16
    src = np.random.default_rng(0).integers(0, 256, tiles * 4096 * 2, dtype=np.uint8)
    dst = np.zeros_like(src)
    desc_target = rt.DeviceBuffer(1 << 20, device)

    def once():
        fn(src, dst, tiles, grid=(2,), device=device)
        d = rt.make_tma_descriptor(desc_target.pointer(), shape=(4096, 64), dtype="uint32",
                                   box_shape=(16, 64))
        d.device_copy(device)  # allocate its device copy, freed with the descriptor

    for _ in range(10):
        once()
    gc.collect()
    device.synchronize()
    free0, _ = device.mem_info()
    live0 = rt.live_allocations()
    for _ in range(1000):
        once()
    gc.collect()
    device.synchronize()
    free1, _ = device.mem_info()
    assert np.array_equal(src, dst)
    assert rt.live_allocations() == live0
    leaked = free0 - free1
    print(f"free before {free0}, after {free1}: {leaked} bytes")
    # each launch allocates 2 x 128 KiB + 128 B; a leak would be >= 250 MiB
    assert leaked <= 2 << 20, f"{leaked} bytes of device memory leaked over 1000 launches"
    desc_target.free()


GEMM_SHAPES = [(256, 512, 128), (1000, 1032, 520), (2048, 2048, 2048), (64, 8, 8)]


@pytest.mark.parametrize("name", by_check("gemm"))
def test_gemm_matches_torch(name, device):
    """examples/hopper_gemm.py on gaussian inputs, including shapes the tile
    does not divide, within the stated relative-error bound of torch.matmul."""
    pytest.importorskip("torch", reason="the GEMM check compares with torch.matmul")
    from hopper_gemm_host import HopperGemm, check

    e = KERNELS[name]
    with open(os.path.join(bundle_dir(), e["image"]), "rb") as f:
        gemm = HopperGemm(f.read(), e["gemm"])
    for shape in GEMM_SHAPES:
        err = check(gemm, *shape)
        print(f"{name} {shape}: max rel err {err:.3g}")


ATTENTION_SHAPES = [(2, 512, 512, 4, 4), (1, 333, 517, 4, 2), (2, 256, 256, 8, 1),
                    (1, 300, 77, 2, 1)]


@pytest.mark.parametrize("name", by_check("attention"))
def test_attention_matches_fp32_reference(name, device):
    """examples/attention_fwd.py on gaussian inputs (ragged lengths, GQA,
    MQA, seqlen_q != seqlen_k) within the stated bounds of fp32 attention."""
    pytest.importorskip("torch", reason="the attention check compares with torch")
    from attention_fwd_host import AttentionFwd, check

    e = KERNELS[name]
    with open(os.path.join(bundle_dir(), e["image"]), "rb") as f:
        attn = AttentionFwd(f.read(), e["attention"])
    for shape in ATTENTION_SHAPES:
        err, lerr = check(attn, *shape)
        print(f"{name} {shape}: max |O err| {err:.3g}, max |LSE err| {lerr:.3g}")


FP8_GEMM_SHAPES = [(256, 512, 128), (1000, 1032, 1040), (2048, 2048, 2048), (64, 8, 16)]


@pytest.mark.parametrize("name", by_check("fp8_gemm"))
def test_fp8_gemm_matches_the_dequantized_reference(name, device):
    """examples/fp8_gemm.py (e4m3, per-tensor scales, bf16 out) on quantized
    gaussian inputs, including shapes the tile does not divide (ragged K
    too), within fp8_gemm_host.error_bound of an fp64 reference."""
    pytest.importorskip("torch", reason="the FP8 GEMM check runs on torch tensors")
    from fp8_gemm_host import Fp8Gemm, bound_detects_a_k_block, check

    e = KERNELS[name]
    with open(os.path.join(bundle_dir(), e["image"]), "rb") as f:
        gemm = Fp8Gemm(f.read(), e["gemm"])
    for shape in FP8_GEMM_SHAPES:
        err = check(gemm, *shape, e["accumulation"])
        print(f"{name} {shape}: normalized err {err:.3g}")
    assert bound_detects_a_k_block(2048, e["accumulation"])


@pytest.mark.parametrize("name", by_check("bw_gemm"))
def test_blackwell_gemm_matches_torch(name, device):
    """examples/blackwell_gemm.py (tcgen05 + TMEM + CLC, sm_100a) against
    torch.matmul. Only a compute capability 10.0 device (B200/GB200) runs
    it; no such GPU has run it yet, so everywhere else it skips and says
    so (the runner refuses the sm_100a cubin with ArchMismatchError)."""
    if device.cc != (10, 0):
        pytest.skip(f"the Blackwell GEMM needs an sm_100 GPU (B200/GB200); this device is "
                    f"{device.name} ({device.sm})")
    pytest.importorskip("torch", reason="the GEMM check compares with torch.matmul")
    from blackwell_gemm_host import BlackwellGemm, check

    e = KERNELS[name]
    with open(os.path.join(bundle_dir(), e["image"]), "rb") as f:
        gemm = BlackwellGemm(f.read(), e["gemm"], device=device)
    for shape in GEMM_SHAPES:
        err = check(gemm, *shape)
        print(f"{name} {shape}: max rel err {err:.3g}")


# -- register fragments (test/gpu/fragment_kernels.py, fragment_reference.py) --

def _fragment_kernel(name):
    pytest.importorskip("torch", reason="the fragment checks compare with torch")
    return KERNELS[name], compiled_kernel(KERNELS[name], bundle_dir())


@pytest.mark.parametrize("name", by_check("fragment_ops"))
def test_fragment_ops_match_torch(name, device):
    """Every Fragment / RowVector op, float-Scalar computation, in-place
    update and carried value (if_/range) of fragment_kernels.py against its
    torch reference, within the bound fragment_reference.py states; tiles
    are loaded and stored by the documented accumulator layout, and the
    'thread' op must show the PTX ISA's owner of every element. Run with
    several scales s, NaN among them (then only the comparisons count)."""
    import torch
    import fragment_reference as ref

    e, fn = _fragment_kernel(name)
    n = e["n"]
    assert e["ops"] == list(ref.FRAGMENT_REFS) and e["row_ops"] == list(ref.ROW_REFS), \
        "fragment_kernels.py and fragment_reference.py list different ops"
    gen = torch.Generator().manual_seed(n)
    x, y, z = (torch.randn(ref.M, n, generator=gen) for _ in range(3))
    problems = []
    for s in (0.7, 0.5, -1.25, math.nan):
        out = torch.full((len(e["ops"]), ref.M, n), 12345.0, device="cuda")
        rows = torch.full((len(e["row_ops"]), ref.M, 4), 12345.0, device="cuda")
        fn(x.cuda(), y.cuda(), z.cuda(), out, rows, s, grid=1, device=device)
        out, rows = out.cpu(), rows.cpu()
        for j, op in enumerate(e["ops"]):
            if s != s and op not in ref.NAN_SAFE_WITHOUT_S:
                continue
            want, bound = ref.FRAGMENT_REFS[op]
            problems.append(ref.check(f"{op} (s={s})", out[j], want(x, y, z, s), bound, x))
        for j, op in enumerate(e["row_ops"]):
            if s != s:
                continue
            want, bound = ref.ROW_REFS[op]
            # all four threads of each quad wrote their copy of the row's value
            problems.append(ref.check(f"{op} (s={s})", rows[j],
                                      want(x, y, z, s).view(ref.M, 1).expand(ref.M, 4),
                                      bound, x))
    problems = [p for p in problems if p]
    print(f"{name}: {len(e['ops'])} fragment ops, {len(e['row_ops'])} row ops, 4 scales")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", by_check("fragment_convert"))
def test_fragment_conversions_match_torch_bit_for_bit(name, device):
    """Fragment.to_packed to bf16, f16 (cvt.rn.*x2.f32) and e4m3, e5m2
    (cvt.rn.satfinite.*x2.f32), each packed pair stored where its elements
    belong: bit-exact with torch's round-to-nearest-even conversion (fp8
    values clamped to the largest finite first: satfinite), ties, signed
    zeros, subnormals and saturation included."""
    import torch
    import fragment_reference as ref

    e, fn = _fragment_kernel(name)
    n = e["n"]
    x = ref.conversion_input(n, torch.Generator().manual_seed(7))
    outs = [torch.zeros(ref.M, n, dtype=ref.CONVERSIONS[d][0], device="cuda")
            for d in e["dtypes"]]
    fn(x.cuda(), *outs, grid=1, device=device)
    for dtype, got in zip(e["dtypes"], outs):
        want = ref.convert(x, dtype)
        bits = torch.int16 if want.element_size() == 2 else torch.uint8
        bad = got.cpu().view(bits) != want.view(bits)
        assert not bad.any(), (f"{dtype}: {int(bad.sum())} elements differ, first at "
                               f"{bad.nonzero()[0].tolist()}")


@pytest.mark.parametrize("name", by_check("fragment_operand_a"))
def test_fragment_operand_a_registers_follow_the_ptx_layout(name, device):
    """Fragment.to_operand_a for bf16, f16 (no data movement) and e4m3, e5m2
    (quad shuffles: the k32 layout gives a thread 4 consecutive columns, the
    accumulator 2): every register of every thread holds the bytes the PTX
    ISA's register-A layout puts there."""
    import torch
    import fragment_reference as ref

    e, fn = _fragment_kernel(name)
    n = e["n"]
    x = torch.randn(ref.M, n, generator=torch.Generator().manual_seed(3)) * 8
    wants = {}
    for dtype in e["dtypes"]:
        q = ref.convert(x, dtype)
        wants[dtype] = ref.operand_a_registers(q, 8 * q.element_size())
    outs = [torch.zeros(wants[d].shape, dtype=torch.int32, device="cuda") for d in e["dtypes"]]
    fn(x.cuda(), *outs, grid=1, device=device)
    for dtype, got in zip(e["dtypes"], outs):
        want, got = wants[dtype], got.cpu()
        bad = (got != want).nonzero()
        assert not len(bad), (f"{dtype}: {len(bad)} registers differ, first (slice, "
                              f"register, thread) {bad[0].tolist()}: got "
                              f"{int(got[tuple(bad[0])]) & 0xFFFFFFFF:#010x}, want "
                              f"{int(want[tuple(bad[0])]) & 0xFFFFFFFF:#010x}")


@pytest.mark.parametrize("name", by_check("fragment_mma_rs"))
def test_fragment_mma_rs_matches_torch_matmul(name, device):
    """A register-A wgmma (WarpgroupMma.mma_rs, bf16, A from a Fragment via
    to_operand_a) with B in shared memory, K-major or MN-major: against
    torch.matmul of the same bf16 values in fp64, within K * 2^-20 of
    (|A| @ |B|) (fp32 accumulation)."""
    import torch

    e, fn = _fragment_kernel(name)
    m, n, k = 64, e["n"], e["k"]
    gen = torch.Generator().manual_seed(k + n)
    a = torch.randn(m, k, generator=gen).bfloat16()
    b = torch.randn(n, k, generator=gen).bfloat16()          # B as N x K
    given = b if e["b_major"] == "K" else b.t().contiguous()  # MN-major: K x N
    out = torch.full((m, n), math.nan, device="cuda")
    fn(a.float().cuda(), given.cuda(), out, grid=1, device=device)
    want = a.double() @ b.double().t()
    limit = k * 2.0 ** -20 * (a.double().abs() @ b.double().abs().t())
    err = (out.cpu().double() - want).abs()
    print(f"{name}: max |err| {err.max().item():.3g}")
    assert (err <= limit).all(), f"{int((err > limit).sum())} elements beyond the bound"
