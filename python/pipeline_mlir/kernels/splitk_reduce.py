"""Split-K's second kernel: the S fp32 partial products of a split-K GEMM
(kernels/hopper_gemm.py with ``split_k = S``, an (S, M, N) fp32 workspace)
summed into the 16-bit output C.

    C[i] = round(W[0][i] + W[1][i] + ... + W[S-1][i])

The sum runs in this fixed order for every element, one thread per group
of 8 elements, so the result is the same bits on every run (the GEMM's
partials are themselves deterministic: each is one CTA's K loop in
order). It is memory-bound: a thread reads two 16-byte fp32 vectors per
split, all S splits' loads issued before the first add (S is a build-time
constant, the loop over splits unrolled), and writes one 16-byte vector of
8 bf16 / f16 values (``cvt.rn``). A grid-stride loop over the M x N / 8
groups lets any grid cover any shape (the host launches about a few waves
of CTAs: ops/splitk_host.py). M x N is a multiple of 8 because N is (the
GEMM's TMA row stride rule).

Parameters ``(ws, out, groups)``: the workspace, C, and M x N / 8.
"""

from dataclasses import dataclass

import mlir.ir as ir
from mlir.dialects import arith, llvm, vector

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, to_value

BLOCK = 256          # threads per CTA
VEC = 8              # elements per thread and step: one 16-byte store of 16-bit values
OUT_DTYPES = ("bf16", "f16")
MAX_SPLITS = 16      # registers: 2 x 4 f32 per split in flight


@dataclass(frozen=True)
class ReduceConfig:
    splits: int = 2
    out_dtype: str = "bf16"

    @property
    def name(self):
        return f"splitk_reduce_{self.out_dtype}_s{self.splits}"

    def check(self):
        if isinstance(self.splits, bool) or not isinstance(self.splits, int) \
                or not 1 <= self.splits <= MAX_SPLITS:
            raise ValueError(f"splitk_reduce: splits must be an int in 1..{MAX_SPLITS} (the "
                             f"loads of every split are in flight at once), got "
                             f"{self.splits!r}")
        if self.out_dtype not in OUT_DTYPES:
            raise ValueError(f"splitk_reduce: out_dtype must be one of {OUT_DTYPES}, got "
                             f"{self.out_dtype!r}")


def _gep(base, offset):
    """``base + offset`` bytes (an i64 Scalar or a constant int)."""
    i8 = ir.IntegerType.get_signless(8)
    if isinstance(offset, int):
        return llvm.getelementptr(base.type, base, [], [offset], i8, 0)
    return llvm.getelementptr(base.type, base, [offset.ir_value], [-2147483648], i8, 0)


def build(cfg=ReduceConfig(), chip="sm_90a"):
    """The reduction kernel for ``cfg`` (a ``Kernel``; ``.config`` is cfg)."""
    cfg.check()
    k = Kernel(cfg.name, chip=chip, block_dim=BLOCK,
               params={"ws": GlobalPtr(), "out": GlobalPtr(), "groups": Int32()})
    with k:
        f32 = ir.F32Type.get()
        out_t = ir.BF16Type.get() if cfg.out_dtype == "bf16" else ir.F16Type.get()
        v4 = ir.VectorType.get([4], f32)
        ws, out, groups = k.args
        ws, out = to_value(ws), to_value(out)
        first = k.block_idx() * BLOCK + k.thread_idx()
        step = k.grid_dim() * BLOCK
        # One split's slice of the workspace, in bytes (i64: S M N 4 can
        # pass 2^31).
        slice_bytes = groups.to(64) * (VEC * 4)
        for g, _ in k.range(first, groups, step):
            src = _gep(ws, g.to(64) * (VEC * 4))
            halves = []
            for s in range(cfg.splits):
                p = src if s == 0 else _gep(src, slice_bytes * s)
                halves.append((llvm.load(v4, p, alignment=16),
                               llvm.load(v4, _gep(p, 16), alignment=16)))
            lo, hi = halves[0]
            for s_lo, s_hi in halves[1:]:     # split 0, 1, ..., S-1: one order, every run
                lo, hi = arith.addf(lo, s_lo), arith.addf(hi, s_hi)
            whole = vector.shuffle(lo, hi, list(range(2 * 4)))
            rounded = arith.truncf(ir.VectorType.get([VEC], out_t), whole)
            llvm.store(rounded, _gep(out, g.to(64) * (VEC * 2)), alignment=16)
    k.config = cfg
    return k


def meta_of(cfg, kernel):
    """The launch facts the host (ops/splitk_host.py) needs."""
    return {"name": cfg.name, "splits": cfg.splits, "out_dtype": cfg.out_dtype,
            "threads": BLOCK, "vec": VEC, "smem": kernel.smem_bytes,
            "params": [[name, p.kind] for name, p in kernel.params]}


def build_variant(overrides, dtype, chip):
    """(cubin, launch facts) of the reduction with ``overrides``
    (``ReduceConfig`` fields other than the dtype: ``{"splits": S}``) writing
    ``dtype`` ('bf16' / 'f16'): the kernel cache's builder of this family."""
    cfg = ReduceConfig(out_dtype=dtype, **dict(overrides))
    k = build(cfg, chip=chip)
    return bytes(k.compile()), meta_of(cfg, k)
