#!/usr/bin/env python3
"""Time the op's default backward and its parts on the d 128 full rows (and
d 64 full's), alternating rounds, median of each: the whole backward
(``AttentionBwd.__call__``: the preprocess, the dQ accumulator zeroed, the
main kernel, the dQ postprocess), the preprocess alone
(``AttentionBwd.prepare``), the accumulator's zeroing alone (``torch.zeros``
of its size) and the postprocess alone (``convert_acc_order``). The rest of
the whole is the main kernel and the gaps between launches. 4, 16, 4096 and
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
    from pipeline_mlir.ops.attention import variant_attention_bwd

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
        err = (got[0].float() - want[0].float()).abs().max() / want[0].float().abs().max()
        assert err <= 1e-2, err
        assert bwd.meta.get("dq_acc_order"), "the rows' defaults take dq_acc_order"
        stream = bwd._runtime.fastlaunch.current_stream_handle(bwd.device.ordinal)
        padded = math.ceil(s / bwd.meta["block_m"]) * bwd.meta["block_m"]
        acc = torch.zeros(b * padded * h * d, dtype=torch.float32, device="cuda")
        fns = {"whole": lambda: bwd(q, k, v, o, lse, do),
               "prep": lambda: bwd.prepare(o, lse, do, stream),
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
    return 0


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
