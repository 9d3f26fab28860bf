#!/usr/bin/env python3
"""Time the op's default backward (with the old preprocess) and its parts on the d 128 full rows (and
d 64 full's), alternating rounds, median of each: the whole backward
(``AttentionBwd.__call__``: the preprocess, the dQ accumulator zeroed, the
main kernel, the dQ postprocess), the preprocess alone
(``AttentionBwd.prepare``), the accumulator's zeroing alone (``torch.zeros``
of its size) and the postprocess alone (``convert_acc_order``). The rest of
the whole is the main kernel and the gaps between launches. Then the wide preprocess
(kernels/attention_bwd/prep_wide.py, option ``prep_wide``) in its two
walks and with 8 rows a lane, alone and in the whole backward, its outputs checked equal to the
old one's bit for bit first. 4, 16, 4096 and
2, 16, 8192 hold as many tokens: the per-token parts cost the same on both
rows, the main kernel twice as much at 8192. The whole backward's dQ, dK and
dV are checked against the op's (torch.autograd) first: dK and dV bit
for bit, dQ (reduce-added in no fixed order) within 1e-2.

    python3 time_bwd_parts.py
"""

import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = [(4, 16, 4096, 128, False), (2, 16, 8192, 128, False), (4, 32, 4096, 64, False)]
ROUNDS, ITERS = 7, 10


def main():
    import torch

    if not torch.cuda.is_available():
        print("time_bwd_parts: no CUDA GPU")
        return 0
    os.environ.setdefault("PIPELINE_MLIR_CACHE_DIR", os.path.join(HERE, "gemm-cache"))
    import pipeline_mlir
    from pipeline_mlir.ops import attention_configs
    from pipeline_mlir.ops import kernel_cache
    from pipeline_mlir.ops.attention import variant_attention_bwd
    from pipeline_mlir.ops.attention_bwd_host import AttentionBwd

    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for b, h, s, d, causal in ROWS:
        torch.manual_seed(0)
        q, k, v, do = (torch.randn(b, s, h, d, dtype=torch.bfloat16, device="cuda")
                       for _ in range(4))
        o, lse = pipeline_mlir.attention(q, k, v, causal=causal, return_lse=True)
        bwd = variant_attention_bwd(d, causal,
                                    options=attention_configs.bwd_default_options(d, causal))
        got = bwd(q, k, v, o, lse, do)
        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
        want = torch.autograd.grad(pipeline_mlir.attention(qg, kg, vg, causal=causal),
                                   (qg, kg, vg), do)
        assert torch.equal(got[1], want[1]) and torch.equal(got[2], want[2])
        got_kv = got[1], got[2]
        err = (got[0].float() - want[0].float()).abs().max() / want[0].float().abs().max()
        assert err <= 1e-2, err
        assert bwd.meta.get("dq_acc_order"), "the rows' defaults take dq_acc_order"
        stream = bwd._runtime.fastlaunch.current_stream_handle(bwd.device.ordinal)
        padded = math.ceil(s / bwd.meta["block_m"]) * bwd.meta["block_m"]
        acc = torch.zeros(b * padded * h * d, dtype=torch.float32, device="cuda")
        # The wide preprocess (option prep_wide) in both walks: the same
        # main kernel with it, its outputs the old one's bit for bit.
        name, overrides = attention_configs.bwd_variant(
            d, causal, options=attention_configs.bwd_default_options(d, causal))
        image, meta = kernel_cache.get(name, overrides, "bf16", "sm_90a", kernel="attention_bwd")
        convert = kernel_cache.get(*attention_configs.bwd_dq_convert_variant(
            d, meta.get("block_m", 64)), "bf16", "sm_90a", kernel="attention_bwd")
        # the old preprocess (a warp per row), whatever the op's default
        bwd = AttentionBwd(image, meta, prep=kernel_cache.get(
            *attention_configs.bwd_prep_variant(d), "bf16", "sm_90a", kernel="attention_bwd"),
            dq_convert=convert)
        wide = {}
        for order, slots in (("bhs", 4), ("bsh", 4), ("bhs", 8)):
            prep = kernel_cache.get(*attention_configs.bwd_prep_wide_variant(
                d, order=order, slots=slots), "bf16", "sm_90a", kernel="attention_bwd")
            order = order if slots == 4 else f"{order}{slots}"
            wide[order] = AttentionBwd(image, meta, prep=prep, dq_convert=convert)
            want, got = bwd.prepare(o, lse, do), wide[order].prepare(o, lse, do)
            assert torch.equal(want[0], got[0]) and torch.equal(want[1], got[1]), order
            g2 = wide[order](q, k, v, o, lse, do)
            assert torch.equal(g2[1], got_kv[0]) and torch.equal(g2[2], got_kv[1]), order
        pw = wide["bhs"]
        fns = {"whole": lambda: bwd(q, k, v, o, lse, do),
               "whole_pw": lambda: pw(q, k, v, o, lse, do),
               "prep": lambda: bwd.prepare(o, lse, do, stream),
               "prepw": lambda: pw.prepare(o, lse, do, stream),
               "prepw_bsh": lambda: wide["bsh"].prepare(o, lse, do, stream),
               "prepw_s8": lambda: wide["bhs8"].prepare(o, lse, do, stream),
               "zeros": lambda: torch.zeros(b * padded * h * d, dtype=torch.float32,
                                            device="cuda"),
               "convert": lambda: bwd.convert_acc_order(acc, b, padded, s, h)}
        times = {n: [] for n in fns}
        for _ in range(ROUNDS):
            for n, fn in fns.items():
                fn()
                start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                start.record()
                for _ in range(ITERS):
                    fn()
                end.record()
                end.synchronize()
                times[n].append(start.elapsed_time(end) / ITERS)
        med = {n: statistics.median(t) * 1e3 for n, t in times.items()}
        parts = med["prep"] + med["zeros"] + med["convert"]
        print(f"{b},{h},{s},{d} {'causal' if causal else 'full'}: whole {med['whole']:.1f} us, "
              f"prep {med['prep']:.1f}, zeros {med['zeros']:.1f}, convert {med['convert']:.1f}"
              f" (parts {parts:.1f} us, {parts / med['whole']:.1%} of the whole); the rest "
              f"(main kernel, gaps) {med['whole'] - parts:.1f} us")
        gbytes = 2 * b * s * h * d * 2 / 1e9
        print(f"  wide preprocess: {med['prepw']:.1f} us ({gbytes / med['prepw'] * 1e3:.2f} TB/s"
              f", {med['prepw'] / med['prep']:.3f}x the old {med['prep']:.1f} us, "
              f"{gbytes / med['prep'] * 1e3:.2f} TB/s), in O's order {med['prepw_bsh']:.1f} us, 8 rows a lane "
              f"{med['prepw_s8']:.1f} us; "
              f"whole with it {med['whole_pw']:.1f} us "
              f"({med['whole_pw'] / med['whole']:.4f}x)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
