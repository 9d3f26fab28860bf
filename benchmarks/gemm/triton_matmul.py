"""The Triton peer: a plain Triton matmul (``tl.dot`` over K blocks, grouped
program order), autotuned over a few Hopper-friendly tiles. Written for this
benchmark in the style of Triton's matmul tutorial; it computes
``C = A @ B^T`` with B given N x K, like ours."""

import torch
import triton
import triton.language as tl


def _configs():
    cfgs = []
    for bm, bn, bk, stages, warps in ((128, 256, 64, 3, 8), (128, 128, 64, 4, 8),
                                      (128, 256, 64, 4, 8), (256, 128, 64, 3, 8),
                                      (128, 128, 64, 5, 4)):
        cfgs.append(triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP": 8},
                                  num_stages=stages, num_warps=warps))
    return cfgs


@triton.autotune(configs=_configs(), key=["M", "N", "K"])
@triton.jit
def _matmul_nt(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
               BK: tl.constexpr, GROUP: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    per_group = GROUP * tiles_n
    first_m = (pid // per_group) * GROUP
    rows = min(tiles_m - first_m, GROUP)
    pm = first_m + (pid % per_group) % rows
    pn = (pid % per_group) // rows
    offs_m = (pm * BM + tl.arange(0, BM)) % M
    offs_n = (pn * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_n[None, :] * K + offs_k[:, None]      # B^T tile, K x BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BK)):
        kmask = offs_k < K - kb * BK
        a = tl.load(a_ptrs, mask=kmask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=kmask[:, None], other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK
    cm = pm * BM + tl.arange(0, BM)
    cn = pn * BN + tl.arange(0, BN)
    c_ptrs = c_ptr + cm[:, None] * N + cn[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))


def matmul_nt(a, b, c=None):
    m, k = a.shape
    n = b.shape[0]
    if c is None:
        c = torch.empty(m, n, dtype=a.dtype, device=a.device)
    grid = lambda meta: (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)  # noqa: E731
    _matmul_nt[grid](a, b, c, m, n, k)
    return c
