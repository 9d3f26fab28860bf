"""Can a kernel read an mbarrier's 64-bit state word? (docs/gpu-results.md run 9)

Measured on the H100: every load form below reads 0, while the token that
mbarrier.arrive returns and mbarrier.pending_count of it do carry the state.
Run on a GPU host: python3 test/gpu/mbarrier_word_probe.py (cuda-bindings,
numpy)."""
import numpy as np
from cuda.bindings import driver as cu

PTX = r"""
.version 8.0
.target sm_90a
.address_size 64
.visible .entry probe(.param .u64 out)
{
  .shared .align 8 .b64 bar[2];
  .reg .b64 %rd<40>;
  .reg .b32 %r<10>;
  .reg .pred %p<4>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, 5;
  mbarrier.init.shared.b64 [bar], %r1;
  fence.mbarrier_init.release.cluster;
  // 1: volatile shared load
  ld.volatile.shared.b64 %rd2, [bar];
  st.global.b64 [%rd1+0], %rd2;
  // 2: plain shared load
  ld.shared.b64 %rd3, [bar];
  st.global.b64 [%rd1+8], %rd3;
  // 3: generic load
  mov.u64 %rd4, bar;
  cvta.shared.u64 %rd5, %rd4;
  ld.volatile.b64 %rd6, [%rd5];
  st.global.b64 [%rd1+16], %rd6;
  // 4: atomic or 0
  atom.shared.or.b64 %rd7, [bar], 0;
  st.global.b64 [%rd1+24], %rd7;
  // after one arrive
  mbarrier.arrive.shared.b64 %rd8, [bar];
  st.global.b64 [%rd1+32], %rd8;
  ld.volatile.shared.b64 %rd9, [bar];
  st.global.b64 [%rd1+40], %rd9;
  atom.shared.or.b64 %rd10, [bar], 0;
  st.global.b64 [%rd1+48], %rd10;
  // after expect_tx 100
  mov.u32 %r2, 100;
  mbarrier.expect_tx.relaxed.cta.shared.b64 [bar], %r2;
  ld.volatile.shared.b64 %rd11, [bar];
  st.global.b64 [%rd1+56], %rd11;
  atom.shared.or.b64 %rd12, [bar], 0;
  st.global.b64 [%rd1+64], %rd12;
  // ld.acquire
  ld.acquire.cta.shared.b64 %rd13, [bar];
  st.global.b64 [%rd1+72], %rd13;
  // arrive state token returned by a second arrive
  mbarrier.arrive.shared.b64 %rd14, [bar];
  st.global.b64 [%rd1+80], %rd14;
  ld.volatile.shared.b64 %rd15, [bar];
  st.global.b64 [%rd1+88], %rd15;
  // pending count via mbarrier.pending_count on the state
  mbarrier.pending_count.b64 %r3, %rd14;
  cvt.u64.u32 %rd16, %r3;
  st.global.b64 [%rd1+96], %rd16;
  ret;
}
"""

def check(r):
    err = r[0] if isinstance(r, tuple) else r
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(str(err))
    return r[1:] if isinstance(r, tuple) and len(r) > 1 else None

check(cu.cuInit(0))
(dev,) = check(cu.cuDeviceGet(0))
(ctx,) = check(cu.cuCtxCreate(None, 0, dev)) if hasattr(cu, "CUctxCreateParams") else check(cu.cuCtxCreate(0, dev))
(mod,) = check(cu.cuModuleLoadData(PTX.encode() + b"\0"))
(fn,) = check(cu.cuModuleGetFunction(mod, b"probe"))
n = 13
(buf,) = check(cu.cuMemAlloc(8 * n))
check(cu.cuMemsetD8(buf, 0xAB, 8 * n))
arg = np.array([int(buf)], dtype=np.uint64)
params = np.array([arg.ctypes.data], dtype=np.uint64)
check(cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, 0, params.ctypes.data, 0))
check(cu.cuCtxSynchronize())
host = np.zeros(n, dtype=np.uint64)
check(cu.cuMemcpyDtoH(host.ctypes.data, buf, 8 * n))
names = ["init: ld.volatile.shared", "init: ld.shared", "init: generic ld", "init: atom.or 0",
         "arrive state token", "after arrive: ld.volatile", "after arrive: atom.or",
         "after expect_tx 100: ld.volatile", "after expect_tx: atom.or", "ld.acquire",
         "2nd arrive token", "after 2nd arrive: ld.volatile", "pending_count(token)"]
for name, v in zip(names, host):
    print(f"{name:36s} 0x{int(v):016x}")
