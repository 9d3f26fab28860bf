"""The call path under a long run: many calls of the library's kernels, as a
serving or training loop makes them.

    python3 soak.py [--calls 100000] [--check-every 97] [--seed 0]

Runs in the GPU bundle (``scripts/build-gpu-bundle.py``): ``pipeline_mlir.gemm``
on bf16 and fp16 shapes that pick different variants (from the bundle's
GEMM cache), with a fused bias + activation, a split-K pick, a forced
stream-K variant and the forced shared fix-up of tiny long-K outputs;
``pipeline_mlir.scaled_mm`` in both accumulation modes;
``pipeline_mlir.attention`` forward and backward through autograd; and the
examples' FP8 GEMM and attention forward launchers (from the manifest).
Calls come in bursts of one op on one of three streams (each burst's stream
waits for the last one's, as a program that hands tensors between streams
must), so per-stream workspaces and counters are taken and come back.
Each burst has random address churn: each operand is
drawn from a pool of tensors and pool entries are reallocated now and then,
so new address sets keep arriving and old ones come back after their
descriptor slots were reused by other ops. It starts with the sequence
that hung the GEMM (one shape with 600 new address triples, another with
800, then the first shape's first addresses again).

Every ``check_every``-th call is waited for with a host deadline and
compared with torch; a wait that passes its deadline is a hang and ends the
run. GPU memory (driver's used bytes) and host memory (RSS) are sampled
after the warm-up and at the end; the GPU figure leaves out torch's caching
allocator (its pool follows the reference checks), so that it measures
what the launch path itself holds. The last line is the summary:

    soak: 100000 calls, 17 shapes, 0 wrong results, 0 hangs, GPU memory drift +0.00%, host memory drift +0.12%
"""

import argparse
import json
import math
import os
import random
import sys
import time

# Memory is sampled first after this many calls: the launch path's bounded
# tables (prepared launches, descriptor slots, picks) fill while the pools'
# addresses churn, and a sample taken before they are full reads their
# filling as drift (a 30,000-call run sampled at 6,000 calls read +21.6%
# host drift; the same build over 100,000 calls, sampled at 20,000, +0.08%).
WARM_CALLS = 20_000

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

DEADLINE_S = 30.0


class Hang(Exception):
    pass


def wait(deadline=DEADLINE_S):
    """Synchronize the current stream with a host deadline (a hang raises)."""
    ev = torch.cuda.Event()
    ev.record()
    start = time.monotonic()
    while not ev.query():
        if time.monotonic() - start > deadline:
            raise Hang(f"the stream did not drain within {deadline} s")
        time.sleep(50e-6)


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def gpu_used_bytes():
    """Device memory in use outside torch's caching allocator: the CUDA
    context, loaded modules, descriptor rings, anything a launch path might
    leak (torch's own pool grows and shrinks with its reference checks and
    is reported apart)."""
    free, total = torch.cuda.mem_get_info()
    return total - free - torch.cuda.memory_reserved()


class Op:
    """One shape of one kernel: operand pools, a call, a check."""

    pool = 16

    def __init__(self, name, rng):
        self.name, self.rng, self.calls = name, rng, 0

    def churn(self):
        """Reallocate one pool entry: a new (or recycled) address."""
        pools = self.pools()
        which = self.rng.choice(list(pools))
        i = self.rng.randrange(len(pools[which]))
        old = pools[which][i]
        pools[which][i] = None
        del old
        pools[which][i] = self.make(which)


class Gemm(Op):
    def __init__(self, rng, m, n, k, dtype):
        super().__init__(f"gemm {dtype} {m}x{n}x{k}", rng)
        import pipeline_mlir

        self.gemm = pipeline_mlir.gemm
        self.shape, self.dtype = (m, n, k), getattr(torch, dtype)
        self._pools = {w: [self.make(w) for _ in range(self.pool)] for w in "abc"}

    def pools(self):
        return self._pools

    def make(self, which):
        m, n, k = self.shape
        shape = {"a": (m, k), "b": (n, k), "c": (m, n)}[which]
        if which == "c":
            return torch.empty(shape, device="cuda", dtype=self.dtype)
        return torch.randn(shape, device="cuda", dtype=self.dtype)

    def pick(self, index=None):
        p, r = self._pools, self.rng
        return tuple(p[w][r.randrange(self.pool) if index is None else index[w]]
                     for w in "abc")

    def call(self, args):
        a, b, c = args
        if self.checking:
            c.fill_(float("nan"))
        self.gemm(a, b, out=c)
        return args

    def reference(self, args):
        a, b = args[:2]
        return torch.matmul(a.float(), b.float().T)

    def check(self, args):
        from pipeline_mlir.ops.hopper_gemm_host import REL_ERROR_BOUND

        a, b, c = args[:3]
        r = self.reference(args)
        err = ((c.float() - r).abs() / (r.abs() + math.sqrt(a.shape[1]))).max().item()
        bound = REL_ERROR_BOUND["bf16" if self.dtype == torch.bfloat16 else "f16"]
        return err <= bound, err


class FusedGemm(Gemm):
    """``pipeline_mlir.gemm`` with a bias and an activation fused in the
    epilogue (the bias pool churns with the operands)."""

    def __init__(self, rng, m, n, k, dtype, activation):
        self.activation = activation
        super().__init__(rng, m, n, k, dtype)
        self.name = f"gemm {dtype} {m}x{n}x{k} + bias, {activation}"
        self._pools["bias"] = [self.make("bias") for _ in range(self.pool)]

    def make(self, which):
        if which == "bias":
            return torch.randn(self.shape[1], device="cuda", dtype=self.dtype)
        return super().make(which)

    def pick(self, index=None):
        p, r = self._pools, self.rng
        return tuple(p[w][r.randrange(self.pool) if index is None else index[w]]
                     for w in ("a", "b", "c", "bias"))

    def call(self, args):
        a, b, c, bias = args
        if self.checking:
            c.fill_(float("nan"))
        self.gemm(a, b, bias=bias, activation=self.activation, out=c)
        return args

    def reference(self, args):
        a, b, _, bias = args
        return _activate(torch.matmul(a.float(), b.float().T) + bias.float(), self.activation)


def _activate(x, activation):
    import torch.nn.functional as F

    return {"relu": F.relu, "silu": F.silu,
            "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
            "gelu_erf": F.gelu}[activation](x)


class StreamKGemm(Gemm):
    """A stream-K variant, whose arrival counters and partial-sum workspace
    are per stream and reused by every launch: forced (the pick takes it
    only on shapes too large for a soak's pools)."""

    def __init__(self, rng, m, n, k, dtype, variant):
        super().__init__(rng, m, n, k, dtype)
        from pipeline_mlir.ops import gemm as ops_gemm

        self.name = f"gemm {dtype} {m}x{n}x{k} {variant}"
        self.variant = ops_gemm.variant_gemm(
            variant, "bf16" if self.dtype == torch.bfloat16 else "f16")

    def call(self, args):
        a, b, c = args
        if self.checking:
            c.fill_(float("nan"))
        self.variant.launch(a, b, c, (), None, False)
        return args


class AttentionTrain(Op):
    """``pipeline_mlir.attention`` forward and backward through autograd,
    as a training step calls it (dQ, dK, dV written by the backward's
    kernels and its dQ reduction; GQA when ``hk < h``)."""

    def __init__(self, rng, b, s, h, hk, d, causal):
        super().__init__(f"attention train d{d}{' causal' if causal else ''} "
                         f"b{b} s{s} h{h}/{hk}", rng)
        import pipeline_mlir

        self.attention = pipeline_mlir.attention
        self.dims, self.d, self.causal = (b, s, h, hk), d, causal
        self._pools = {w: [self.make(w) for _ in range(4)] for w in ("q", "k", "v", "do")}

    def pools(self):
        return self._pools

    def make(self, which):
        b, s, h, hk = self.dims
        heads = h if which in ("q", "do") else hk
        return torch.randn(b, s, heads, self.d, device="cuda", dtype=torch.bfloat16)

    def pick(self, index=None):
        p, r = self._pools, self.rng
        return tuple(p[w][r.randrange(len(p[w])) if index is None else index[w]]
                     for w in ("q", "k", "v", "do"))

    def call(self, args):
        q, k, v, do = args
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        o = self.attention(q, k, v, causal=self.causal)
        o.backward(do)
        return q, k, v, do, o

    def check(self, args):
        from pipeline_mlir.ops.attention_bwd_host import (REL_ERROR_BOUND, reference,
                                                          relative_errors)

        q, k, v, do, _ = args
        errs = relative_errors((q.grad, k.grad, v.grad), reference(q, k, v, do, self.causal))
        ok = max(errs) <= REL_ERROR_BOUND and all(
            torch.isfinite(g).all() for g in (q.grad, k.grad, v.grad))
        return ok, max(errs)


class Fp8Operands(Op):
    """e4m3 operands with per-tensor scales, a bf16 C and the FP8 GEMM's
    error bound for one accumulation mode: what the examples' FP8 launcher
    and ``pipeline_mlir.scaled_mm`` share; subclasses say how to call."""

    def __init__(self, name, rng, m, n, k, accumulation):
        super().__init__(name, rng)
        self.shape, self.accumulation = (m, n, k), accumulation
        self._pools = {w: [self.make(w) for _ in range(self.pool)] for w in "abc"}

    def pools(self):
        return self._pools

    def make(self, which):
        from pipeline_mlir.ops.fp8_gemm_host import quantize

        m, n, k = self.shape
        if which == "c":
            return torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        return quantize(torch.randn((m, k) if which == "a" else (n, k), device="cuda"))

    def pick(self, index=None):
        p, r = self._pools, self.rng
        return tuple(p[w][r.randrange(self.pool) if index is None else index[w]]
                     for w in "abc")

    def call(self, args):
        (a8, sa), (b8, sb), c = args
        if self.checking:
            c.fill_(float("nan"))
        self.launch(a8, sa, b8, sb, c)
        return args

    def check(self, args):
        from pipeline_mlir.ops.fp8_gemm_host import error_bound, normalized_error, reference

        (a8, sa), (b8, sb), c = args
        ref, sigma = reference(a8, sa, b8, sb)
        err = normalized_error(c, ref, sigma, self.shape[2])
        return err <= error_bound(self.shape[2], self.accumulation), err


class Fp8(Fp8Operands):
    """The examples' FP8 GEMM launcher on a manifest entry's cubin."""

    def __init__(self, rng, entry, m, n, k):
        from fp8_gemm_host import Fp8Gemm

        with open(os.path.join(HERE, entry["image"]), "rb") as f:
            self.gemm = Fp8Gemm(f.read(), entry["gemm"])
        super().__init__(f"fp8 {entry['accumulation']} {m}x{n}x{k}", rng, m, n, k,
                         entry["accumulation"])

    def launch(self, a8, sa, b8, sb, c):
        self.gemm(a8, b8, sa, sb, c)


class ScaledMm(Fp8Operands):
    """``pipeline_mlir.scaled_mm`` in one accumulation mode."""

    def __init__(self, rng, m, n, k, fast):
        import pipeline_mlir

        self.scaled_mm, self.fast = pipeline_mlir.scaled_mm, fast
        mode = "fast" if fast else "promoted"
        super().__init__(f"scaled_mm {mode} {m}x{n}x{k}", rng, m, n, k, mode)

    def launch(self, a8, sa, b8, sb, c):
        self.scaled_mm(a8, b8.t(), sa, sb, out_dtype=torch.bfloat16,
                       use_fast_accum=self.fast, out=c)


class Attention(Op):
    def __init__(self, rng, entry, b, s, h, hk):
        d = entry["attention"]["head_dim"]
        causal = entry["attention"]["causal"]
        super().__init__(f"attention d{d}{' causal' if causal else ''} b{b} s{s} h{h}/{hk}",
                         rng)
        from attention_fwd_host import AttentionFwd

        with open(os.path.join(HERE, entry["image"]), "rb") as f:
            self.attn = AttentionFwd(f.read(), entry["attention"])
        self.dims, self.d, self.causal = (b, s, h, hk), d, causal
        self._pools = {w: [self.make(w) for _ in range(self.pool)] for w in ("q", "k", "v", "o")}

    def pools(self):
        return self._pools

    def make(self, which):
        b, s, h, hk = self.dims
        heads = h if which in "qo" else hk
        t = torch.randn(b, s, heads, self.d, device="cuda", dtype=torch.bfloat16)
        if which == "o":
            return (t, torch.empty(b, h, s, device="cuda", dtype=torch.float32))
        return t

    def pick(self, index=None):
        p, r = self._pools, self.rng
        return tuple(p[w][r.randrange(self.pool) if index is None else index[w]]
                     for w in ("q", "k", "v", "o"))

    def call(self, args):
        q, k, v, (o, lse) = args
        if self.checking:
            o.fill_(float("nan"))
        self.attn(q, k, v, out=o, lse=lse)
        return args

    def check(self, args):
        from attention_fwd_host import ABS_ERROR_BOUND, LSE_ERROR_BOUND, reference

        q, k, v, (o, lse) = args
        ro, rlse = reference(q, k, v, self.causal)
        err = (o.float() - ro).abs().max().item()
        finite = torch.isfinite(rlse)
        lerr = (lse[finite] - rlse[finite]).abs().max().item() if finite.any() else 0.0
        return err <= ABS_ERROR_BOUND and lerr <= LSE_ERROR_BOUND, max(err, lerr)


# The shared fix-up variant the pick takes for tiny outputs with a long K
# (gemm_configs.share_fixup, with one arrival a warp: choose_share1);
# forced here, so that the soak keeps calling it whatever the pick's
# constants become.
SHARE_FIXUP = "128x128_streamk_share1"


def make_ops(rng, manifest):
    ops = [Gemm(rng, 512, 1024, 256, "bfloat16"), Gemm(rng, 256, 2048, 512, "bfloat16"),
           Gemm(rng, 1024, 256, 1024, "float16"), Gemm(rng, 384, 768, 320, "float16")]
    kernels = {e["name"]: e for e in manifest["kernels"]}
    fp8 = [e for e in kernels.values() if e.get("check") == "fp8_gemm"]
    att = [e for e in kernels.values() if e.get("check") == "attention"]
    for e in fp8[:2]:
        ops.append(Fp8(rng, e, 512, 768, 512))
    for e, dims in zip(att, ((1, 384, 4, 2), (2, 256, 2, 1))):
        ops.append(Attention(rng, e, *dims))
    # The library's other entry points, each with state that lives across
    # calls: a fused epilogue's variant, a split-K pick's workspace, a
    # stream-K variant's per-stream workspace and arrival counters (which a
    # launch must leave at zero), scaled_mm's picks, and attention's
    # backward (its dQ accumulator and preprocess) through autograd.
    from pipeline_mlir.ops import gemm_configs

    ops += [FusedGemm(rng, 1000, 1032, 520, "bfloat16", "gelu_tanh"),
            Gemm(rng, 2000, 200, 9000, "bfloat16"),
            StreamKGemm(rng, 1000, 1032, 520, "float16", sorted(gemm_configs.STREAM_K_VARIANTS)[0]),
            # the shared fix-up of tiny outputs with a long K (every
            # contributor sums a share of the tile: per-stream partial
            # slots and share counters that each launch must leave at zero)
            StreamKGemm(rng, 224, 168, 14872, "float16", SHARE_FIXUP),
            StreamKGemm(rng, 256, 128, 8192, "bfloat16", SHARE_FIXUP),
            ScaledMm(rng, 512, 768, 528, fast=True), ScaledMm(rng, 1000, 1032, 512, fast=False),
            AttentionTrain(rng, 1, 384, 4, 2, 128, causal=True),
            AttentionTrain(rng, 2, 200, 2, 1, 64, causal=False)]
    return ops


def run(calls, check_every, seed, log=print):
    with open(os.path.join(HERE, "manifest.json")) as f:
        manifest = json.load(f)
    rng = random.Random(seed)
    torch.manual_seed(seed)
    ops = make_ops(rng, manifest)
    for op in ops:
        op.checking = False
    done = wrong = hangs = 0
    failures = []
    warm = None

    def one(op, args=None, check=False):
        nonlocal done, wrong
        op.checking = check
        args = op.call(op.pick() if args is None else args)
        done += 1
        op.calls += 1
        if check:
            wait()
            ok, err = op.check(args)
            if not ok:
                wrong += 1
                failures.append(f"{op.name}: error {err:.3g}")
        return args

    try:
        # The sequence that hung: shape X with 600 new triples, shape Y with
        # 800, then X's first triples again (each checked).
        x, y = ops[0], ops[1]
        first = [x.pick() for _ in range(600)]
        for i, args in enumerate(first):
            one(x, args, check=(i % 100 == 0))
        for i in range(800):
            one(y, check=(i % 100 == 0))
        for args in first[:20]:
            one(x, args, check=True)
        log(f"soak: the 600/800/600 sequence passed ({done} calls)")
        streams = [torch.cuda.current_stream(), torch.cuda.Stream(), torch.cuda.Stream()]
        last = streams[0]
        while done < calls:
            op = rng.choice(ops)
            stream = rng.choice(streams)
            stream.wait_stream(last)
            with torch.cuda.stream(stream):
                for _ in range(rng.choice((1, 8, 50, 200, 800))):
                    if done >= calls:
                        break
                    if rng.random() < 0.02:
                        op.churn()
                    one(op, check=(done % check_every == 0))
            last = stream
            streams[0].wait_stream(last)
            if warm is None and done >= WARM_CALLS:
                wait()
                warm = (gpu_used_bytes(), rss_bytes(), done)
                log(f"soak: warm after {done} calls: GPU used {warm[0]} B, RSS {warm[1]} B")
        wait()
    except Hang as err:
        hangs += 1
        failures.append(f"hang after {done} calls: {err}")
    if warm is None:
        warm = (gpu_used_bytes(), rss_bytes(), done)
    end = (gpu_used_bytes(), rss_bytes())
    log(f"soak: torch's caching allocator holds {torch.cuda.memory_reserved()} B at the end")
    gpu_drift = (end[0] - warm[0]) / warm[0]
    host_drift = (end[1] - warm[1]) / warm[1]
    from pipeline_mlir.runtime import device_arena, default_device

    stats = device_arena(default_device()).stats()
    from pipeline_mlir.ops import streamk_host

    torch.cuda.synchronize()
    for ws, counters in streamk_host._buffers.values():
        if int(counters.abs().sum()):
            wrong += 1
            failures.append("a stream-K launch left an arrival counter set")
    log(f"soak: stream-K workspaces held: {len(streamk_host._buffers)}")
    for op in ops:
        log(f"soak: {op.name}: {op.calls} calls")
    log(f"soak: descriptor arena {stats}")
    for f in failures[:20]:
        log(f"soak: FAILED {f}")
    summary = (f"soak: {done} calls, {len(ops)} shapes, {wrong} wrong results, {hangs} hangs, "
               f"GPU memory drift {gpu_drift:+.2%}, host memory drift {host_drift:+.2%}")
    log(summary)
    return {"calls": done, "shapes": len(ops), "wrong": wrong, "hangs": hangs,
            "gpu_drift": gpu_drift, "host_drift": host_drift, "summary": summary,
            "kinds": sorted({type(op).__name__ for op in ops})}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--check-every", type=int, default=97)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the result here")
    args = ap.parse_args(argv)
    if args.calls < 2 * WARM_CALLS:
        ap.error(f"--calls {args.calls}: memory drift is measured from call {WARM_CALLS} on "
                 f"(WARM_CALLS), so a run needs at least {2 * WARM_CALLS} calls")
    result = run(args.calls, args.check_every, args.seed)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)
    ok = not result["wrong"] and not result["hangs"] and abs(result["gpu_drift"]) <= 0.01 \
        and abs(result["host_drift"]) <= 0.01
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
