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

A fused epilogue (``ops/epilogues.Epilogue``: alpha, a bias per column, a
residual, an activation) runs here, on the fp32 sum, in the order and with
the formulas of the GEMM's own (kernel/epilogue.apply): the epilogue is not
linear, so it cannot run on the partial sums. The 8 values of a group lie
in one row (N is a multiple of 8), columns ``(8 g) mod N`` on; the bias and
the residual are loaded in pairs, the alignment the GEMM's epilogue
parameters declare.

Parameters ``(ws, out, groups, n)`` and the epilogue's (``alpha``, ``bias``,
``residual``): the workspace, C, M x N / 8, and N.
"""

from dataclasses import dataclass

import mlir.ir as ir
from mlir.dialects import arith, llvm, vector

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, to_value
from pipeline_mlir.kernel import epilogue as epilogue_kernel
from pipeline_mlir.kernel.fragment import IrOps
from pipeline_mlir.layout import DTYPES
from pipeline_mlir.ops.epilogues import ALPHA_PARAM, Epilogue

BLOCK = 256          # threads per CTA
VEC = 8              # elements per thread and step: one 16-byte store of 16-bit values
OUT_DTYPES = ("bf16", "f16")
MAX_SPLITS = 16      # registers: 2 x 4 f32 per split in flight


@dataclass(frozen=True)
class ReduceConfig:
    splits: int = 2
    out_dtype: str = "bf16"
    epilogue: Epilogue = None      # None or an identity one: the sum, rounded

    @property
    def fused(self):
        return isinstance(self.epilogue, Epilogue) and not self.epilogue.is_identity

    @property
    def name(self):
        return (f"splitk_reduce_{self.out_dtype}_s{self.splits}"
                f"{'_' + self.epilogue.tag if self.fused else ''}")

    def check(self):
        if isinstance(self.splits, bool) or not isinstance(self.splits, int) \
                or not 1 <= self.splits <= MAX_SPLITS:
            raise ValueError(f"splitk_reduce: splits must be an int in 1..{MAX_SPLITS} (the "
                             f"loads of every split are in flight at once), got "
                             f"{self.splits!r}")
        if self.out_dtype not in OUT_DTYPES:
            raise ValueError(f"splitk_reduce: out_dtype must be one of {OUT_DTYPES}, got "
                             f"{self.out_dtype!r}")
        if self.epilogue is not None and not isinstance(self.epilogue, Epilogue):
            raise TypeError(f"splitk_reduce: epilogue must be an Epilogue "
                            f"(pipeline_mlir.ops.epilogues) or None, got "
                            f"{type(self.epilogue).__name__}")
        if self.fused and self.epilogue.fn is not None:
            raise ValueError("splitk_reduce: a user fn epilogue works on the GEMM's register "
                             "fragments; run it on a plain (not split-K) GEMM variant")


def _gep(base, offset):
    """``base + offset`` bytes (an i64 Scalar or a constant int)."""
    i8 = ir.IntegerType.get_signless(8)
    if isinstance(offset, int):
        return llvm.getelementptr(base.type, base, [], [offset], i8, 0)
    return llvm.getelementptr(base.type, base, [offset.ir_value], [-2147483648], i8, 0)


def build(cfg=ReduceConfig(), chip="sm_90a"):
    """The reduction kernel for ``cfg`` (a ``Kernel``; ``.config`` is cfg)."""
    cfg.check()
    params = {"ws": GlobalPtr(), "out": GlobalPtr(), "groups": Int32(), "n": Int32()}
    epi_params = (epilogue_kernel.kernel_params(cfg.epilogue, cfg.out_dtype)
                  if cfg.fused else {})
    params.update(epi_params)
    k = Kernel(cfg.name, chip=chip, block_dim=BLOCK, params=params)
    with k:
        f32 = ir.F32Type.get()
        out_t = ir.BF16Type.get() if cfg.out_dtype == "bf16" else ir.F16Type.get()
        v4 = ir.VectorType.get([4], f32)
        ws, out, groups, n = k.args[:4]
        epi_args = dict(zip(epi_params, k.args[4:]))
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
            if cfg.fused:
                whole = _apply(cfg, whole, g, n, epi_args)
            rounded = arith.truncf(ir.VectorType.get([VEC], out_t), whole)
            llvm.store(rounded, _gep(out, g.to(64) * (VEC * 2)), alignment=16)
    k.config = cfg
    return k


def _pairs(ptr, first, et, eb):
    """4 pairs of ``et`` at ``ptr + first`` elements (``first`` an i64
    Scalar), as 8 f32 values: the loads of a pair-aligned vector."""
    f32 = ir.F32Type.get()
    base = _gep(to_value(ptr), first * eb)
    out = []
    for j in range(4):
        pair = llvm.load(ir.VectorType.get([2], et), _gep(base, 2 * j * eb) if j else base,
                         alignment=2 * eb)
        if et != f32:
            pair = arith.extf(ir.VectorType.get([2], f32), pair)
        out += [vector.extract(pair, [], [e]) for e in range(2)]
    return out


def _dtype_type(name):
    return {"bf16": ir.BF16Type.get, "f16": ir.F16Type.get, "f32": ir.F32Type.get}[name]()


def _apply(cfg, whole, group, n, args):
    """The epilogue on the 8 summed values of ``group`` (kernel/epilogue.apply's
    order: ``alpha x + bias`` as one fma, the residual, the activation)."""
    epi, f32 = cfg.epilogue, ir.F32Type.get()
    x = [vector.extract(whole, [], [e]) for e in range(VEC)]
    first = group.to(64) * VEC                  # the group's first element, row-major
    scaled = epi.alpha == ALPHA_PARAM or epi.alpha != 1
    alpha = (to_value(args["alpha"]) if epi.alpha == ALPHA_PARAM
             else arith.constant(f32, float(epi.alpha)))
    if epi.bias is not None:
        bias_dtype = epi.bias_dtype or cfg.out_dtype
        col0 = first % n.to(64)
        bias = _pairs(args["bias"], col0, _dtype_type(bias_dtype), DTYPES[bias_dtype][0])
        x = ([IrOps.fma(v, alpha, b) for v, b in zip(x, bias)] if scaled
             else [arith.addf(v, b) for v, b in zip(x, bias)])
    elif scaled:
        x = [arith.mulf(v, alpha) for v in x]
    if epi.residual:
        res = _pairs(args["residual"], first, _dtype_type(cfg.out_dtype),
                     DTYPES[cfg.out_dtype][0])
        x = [arith.addf(v, r) for v, r in zip(x, res)]
    if epi.activation is not None:
        act = epilogue_kernel.ACTIVATION_FNS[epi.activation]
        x = [act(v) for v in x]
    return vector.from_elements(ir.VectorType.get([VEC], f32), x)


def meta_of(cfg, kernel):
    """The launch facts the host (ops/splitk_host.py) needs."""
    meta = {"name": cfg.name, "splits": cfg.splits, "out_dtype": cfg.out_dtype,
            "threads": BLOCK, "vec": VEC, "smem": kernel.smem_bytes,
            "params": [[name, p.kind] for name, p in kernel.params]}
    if cfg.fused:
        meta["epilogue"] = cfg.epilogue.to_json()
    return meta


def build_variant(overrides, dtype, chip):
    """(cubin, launch facts) of the reduction with ``overrides``
    (``ReduceConfig`` fields other than the dtype: ``{"splits": S}``, and an
    ``"epilogue"`` in its JSON form) writing ``dtype`` ('bf16' / 'f16'): the
    kernel cache's builder of this family."""
    overrides = dict(overrides)
    if overrides.get("epilogue") is not None:
        overrides["epilogue"] = Epilogue.from_json(overrides["epilogue"])
    cfg = ReduceConfig(out_dtype=dtype, **overrides)
    k = build(cfg, chip=chip)
    return bytes(k.compile()), meta_of(cfg, k)
