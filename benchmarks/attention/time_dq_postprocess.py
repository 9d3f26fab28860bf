#!/usr/bin/env python3
"""Time the backward's dQ postprocess alone on the benchmark rows: the
plain conversion of the fp32 accumulator to bf16 (the default) next to the
un-permute of the accumulator's order (``dq_acc_order``) by our kernel
(kernels/attention_bwd_dq_convert.py, from the bundle's kernel cache) and
by torch's copy of ``attention_bwd_host.acc_order_view``, alternating
rounds, median of each. The kernel's output is checked bit for bit against
torch's un-permute first.

    python3 time_dq_postprocess.py
"""

import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = [(4, 16, 4096, 128), (2, 16, 8192, 128), (4, 32, 4096, 64)]
ROUNDS, ITERS = 7, 20


def main():
    import torch

    from pipeline_mlir.ops.attention_bwd_host import acc_order_view

    if not torch.cuda.is_available():
        print("time_dq_postprocess: no CUDA GPU")
        return 0
    os.environ.setdefault("PIPELINE_MLIR_CACHE_DIR", os.path.join(HERE, "gemm-cache"))
    from pipeline_mlir.ops import attention_configs
    from pipeline_mlir.ops.attention import variant_attention_bwd

    def converter(d):
        # d 128: the 64-query set's postprocess (the full default's 80-query
        # step has its own, of the transposed order).
        opts = (attention_configs.BWD_D128_FULL_M64 if d == 128 else
                attention_configs.bwd_default_options(d, False) + ("dq_acc_order",))
        return variant_attention_bwd(d, False, options=opts)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for b, h, s, d in ROWS:
        acc = torch.randn(b * s * h * d, dtype=torch.float32, device="cuda")
        plain_src = acc.view(b, s, h, d)
        out = torch.empty((b, s, h, d), dtype=torch.bfloat16, device="cuda")
        view = acc_order_view(acc, b, s, h, d)
        # the un-permute is a permutation: its output holds the same values
        out.view(view.shape).copy_(view)
        assert torch.equal(torch.sort(out.flatten().float())[0],
                           torch.sort(acc.to(torch.bfloat16).float())[0])
        bwd = converter(d)
        assert torch.equal(bwd.convert_acc_order(acc, b, s, s, h), out)
        fns = {"plain": lambda: plain_src.to(torch.bfloat16),
               "kernel": lambda: bwd.convert_acc_order(acc, b, s, s, h),
               "acc_order": lambda: out.view(view.shape).copy_(view)}
        times = {n: [] for n in fns}
        for _ in range(ROUNDS):
            for n, fn in fns.items():
                fn()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                    enable_timing=True)
                start.record()
                for _ in range(ITERS):
                    fn()
                end.record()
                end.synchronize()
                times[n].append(start.elapsed_time(end) / ITERS)
        med = {n: statistics.median(t) for n, t in times.items()}
        gb = acc.numel() * 6 / 1e9
        print(f"{b},{h},{s},{d}: " + ", ".join(
            f"{n} {med[n] * 1e3:.1f} us ({gb / med[n] * 1e3:.0f} GB/s, "
            f"{med[n] / med['plain']:.2f}x plain)" for n in fns))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
