#!/usr/bin/env python3
"""GPU side of the JIT bundle (scripts/build-jit-bundle.py): in ONE Python
process, build examples/hopper_gemm.py's kernel with the MLIR Python
bindings, lower it to PTX, assemble it with ptxas, launch it on torch
tensors and check it against torch.matmul. Prints the time of each step."""

import os
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    t0 = time.monotonic()
    site = os.path.join(HERE, "site")
    if not os.path.isdir(site):
        with tarfile.open(os.path.join(HERE, "runtime.tar.xz")) as t:
            t.extractall(HERE, filter="data")
    sys.path[:0] = [site, HERE]
    t1 = time.monotonic()
    print(f"jit: unpacked the MLIR runtime in {t1 - t0:.1f} s", flush=True)

    import hopper_gemm
    import hopper_gemm_host
    import torch

    cfg = hopper_gemm.GemmConfig()
    k = hopper_gemm.build(cfg)
    k.verify()
    t2 = time.monotonic()
    ptx = k.to_ptx()
    t3 = time.monotonic()
    cubin = k.compile(assembler="ptxas")
    t4 = time.monotonic()
    print(f"jit: built {cfg.name} in {t2 - t1:.2f} s (incl. imports), PTX {len(ptx)} chars in "
          f"{t3 - t2:.2f} s, cubin {len(cubin)} bytes in {t4 - t3:.2f} s", flush=True)
    gemm = hopper_gemm_host.HopperGemm(cubin, hopper_gemm_host.meta_of(cfg, k))
    for shape in ((1000, 1032, 520), (4096, 4096, 4096)):
        err = hopper_gemm_host.check(gemm, *shape)
        print(f"jit: {shape} ok, max rel err {err:.3g} (bound "
              f"{hopper_gemm_host.REL_ERROR_BOUND[cfg.dtype]})", flush=True)
    print(f"jit: done on {torch.cuda.get_device_name()} in {time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    main()
