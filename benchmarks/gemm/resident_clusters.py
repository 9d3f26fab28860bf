#!/usr/bin/env python3
"""How many clusters of each cluster variant the GPU runs at once
(``cuOccupancyMaxActiveClusters`` for the variant's kernel, its threads,
cluster size and shared memory: what the host launches a persistent
cluster kernel with), beside the SMs' share (SMs / cluster size):

    python3 resident_clusters.py 128x96c2n 128x128c2n 192x128c2n 128x128c2x2 192x192c2

One line per variant and dtype: ``RESIDENT <variant> <dtype>: <clusters>
of <SMs / size> (<cluster size> CTAs, <threads> threads, <smem> bytes)``.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    dtypes = ["bf16", "f16"]
    if os.path.isdir(os.path.join(HERE, "gemm-cache")):
        os.environ.setdefault("PIPELINE_MLIR_CACHE_DIR", os.path.join(HERE, "gemm-cache"))
    import torch

    from pipeline_mlir.ops import gemm as ops_gemm
    from pipeline_mlir.ops.hopper_gemm_host import cluster_size

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"device: {torch.cuda.get_device_name()} ({sms} SMs)", flush=True)
    for v in argv:
        for dtype in dtypes:
            g = ops_gemm.variant_gemm(v, dtype)
            g = getattr(g, "gemm", g)           # a stream-K or split-K wrapper's kernel
            meta = g.meta
            cl = cluster_size(meta)
            got = g.kernel.max_active_clusters((meta["threads"], 1, 1), (cl, 1, 1),
                                               meta["smem"])
            print(f"RESIDENT {v} {dtype}: {got} of {sms // cl} ({cl} CTAs, "
                  f"{meta['threads']} threads, {meta['smem']} bytes)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
