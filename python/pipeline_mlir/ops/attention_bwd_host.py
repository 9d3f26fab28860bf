"""Host side of pipeline_mlir/kernels/attention_bwd/: run the attention
backward on torch tensors, and the fp32 reference it is checked against.

Needs only ``pipeline_mlir.runtime`` (cuda-bindings) and torch, no MLIR.

    bwd = AttentionBwd(cubin_bytes, meta, prep=(prep_cubin, prep_meta))
    dq, dk, dv = bwd(q, k, v, o, lse, do)      # (b, s, h, d) bf16; lse (b, h, s) fp32

Three steps on torch's current stream:

1. prepare: dPsum = rowsum(dO * O) in fp32 and LSE * log2(e) (a row whose
   LSE is -inf, fully masked, gets +inf: its P is 0), both (batch, heads,
   rows) with the rows padded to whole 64-row query blocks (padding: dPsum
   0, LSE +inf, so padded rows add nothing): the preprocess kernel
   (kernels/attention_bwd_prep.py, one pass over O and dO) where ``prep``
   is given, else the same in torch ops; and the fp32 dQ accumulator
   zeroed;
2. the main kernel: one CTA per (key block of 128 keys, 64 at head dim 256,
   K/V head, batch; ``meta["block_n"]``), dK and dV
   written once, dQ * softmax_scale added into the accumulator by TMA
   reduce-add;
3. dQ = the accumulator rounded to bf16; with ``meta["dq_acc_order"]``
   the accumulator is flat, in the fp32 dQ fragments' own order per
   (batch, 64-row query tile, head, 64-column group): the postprocess
   kernel (kernels/attention_bwd_dq_convert.py, ``dq_convert``)
   un-permutes and rounds it in one pass; without it, torch's copy of
   ``acc_order_view`` (``dq_from_acc_order``). With 80-query steps
   (``meta["block_m"]`` 80) the order is the transposed one, tiles of 80
   queries (``ACC_ORDER.for_block_m``).
"""

import math

from pipeline_mlir.ops.attention_bwd_acc_order import ACC_ORDER

META_KEYS = ("name", "head_dim", "causal", "block_m", "block_n", "threads",
             "layouts", "smem", "signature", "params")
LOG2_E = 1.4426950408889634
LAUNCH_CACHE = 256
# Error bounds of the check against fp32 gradients (``check``), relative to
# the largest magnitude of each reference gradient: P and dS are rounded to
# bf16 before the dV, dK and dQ GEMMs (2^-8 relative each) and the outputs
# once more; sums over up to a few thousand keys or queries average those
# roundings. 2e-2 of the largest entry is about five bf16 ulps of it.
REL_ERROR_BOUND = 2e-2
# dq_acc_order (ops/attention_bwd_acc_order.py): the flat accumulator seen by
# TMA as rows of ACC_ROW floats, a 64 x 64 tile ACC_TILE_ROWS of them.
ACC_ROW = ACC_ORDER.row
ACC_TILE_ROWS = ACC_ORDER.tile_rows
ACC_TILE = ACC_ORDER.tile


def acc_order_view(acc, batch, padded, heads, head_dim, block_m=64):
    """The flat accumulator ``acc`` in the accumulator's order (a torch
    tensor or numpy array) as a 9-D view (no copy) whose axes are those of
    (batch, padded, heads, head_dim) split: (b, query tile), w, eh, q,
    (h, column group), kk, kpar, p, el (``dq_from_acc_order``;
    ``ACC_ORDER.view_shape``, ``view_axes``); with ``block_m`` 80 the
    transposed order's 8-D view: (b, query tile), j, p, el, (h, column
    group), w, eh, q."""
    order = ACC_ORDER.for_block_m(block_m)
    a = acc.reshape(order.view_shape(batch, padded, heads, head_dim))
    axes = order.view_axes()
    return a.permute(*axes) if hasattr(a, "permute") else a.transpose(axes)


def dq_from_acc_order(acc, batch, padded, heads, head_dim, block_m=64):
    """(batch, padded, heads, head_dim) dQ from the flat accumulator ``acc``
    in the accumulator's order: tile (b, query tile, h, column group), within
    it float ``((2 kk + eh) 128 + 32 w + 4 q + p) 4 + 2 kpar + el`` holds row
    ``16 w + 8 eh + q``, column ``16 kk + 8 kpar + 2 p + el``
    (``ACC_ORDER``; ``block_m`` 80: its transposed order). A copy."""
    return acc_order_view(acc, batch, padded, heads, head_dim, block_m).reshape(
        batch, padded, heads, head_dim)


class AttentionBwd:
    """A loaded backward variant; calling it launches on torch's current
    stream."""

    def __init__(self, image, meta, prep=None, device=None, dq_convert=None):
        from pipeline_mlir import runtime
        from pipeline_mlir.layout import OperandLayout

        missing = [k for k in META_KEYS if k not in meta]
        if missing:
            raise ValueError(f"AttentionBwd: meta lacks {missing}")
        if prep is not None and prep[1].get("head_dim") != meta["head_dim"]:
            raise ValueError("AttentionBwd: the preprocess is for another head dim")
        self.meta = dict(meta)
        self.layouts = {name: OperandLayout.from_meta(m) for name, m in meta["layouts"].items()}
        self._runtime = runtime
        self.compiled = runtime.CompiledKernel.cached(
            image, name=meta["name"], params=list(meta["signature"]),
            block=meta["threads"], smem=meta["smem"])
        self.device = device or runtime.default_device()
        self.launcher = self.compiled.launcher(self.device)
        self.launches = runtime.LaunchCache(self.launcher, LAUNCH_CACHE)
        self.prep = None
        if prep is not None:
            pimage, pmeta = prep
            self.prep_meta = dict(pmeta)
            compiled = runtime.CompiledKernel.cached(
                pimage, name=pmeta["name"], params=list(pmeta["signature"]),
                block=pmeta["threads"], smem=pmeta["smem"])
            self.prep = compiled.launcher(self.device)
            self.prep_launches = runtime.LaunchCache(self.prep, LAUNCH_CACHE)
        self.dq_convert = None
        if dq_convert is not None:              # dq_acc_order's postprocess kernel
            cimage, cmeta = dq_convert
            if cmeta.get("head_dim") != meta["head_dim"]:
                raise ValueError("AttentionBwd: the dQ postprocess is for another head dim")
            self.convert_meta = dict(cmeta)
            compiled = runtime.CompiledKernel.cached(
                cimage, name=cmeta["name"], params=list(cmeta["signature"]),
                block=cmeta["threads"], smem=cmeta["smem"])
            self.dq_convert = compiled.launcher(self.device)
            self.convert_launches = runtime.LaunchCache(self.dq_convert, LAUNCH_CACHE)
        self._sms = None

    def _descriptor(self, t, layout):
        """3-D tensor map (batch, seqlen, heads * d) of ``t`` whose box is one
        batch entry of ``layout``'s box."""
        layout = self.layouts[layout]
        b, s, h, d = t.shape
        e = t.element_size()
        return self._runtime.make_tma_descriptor(
            t, shape=(b, s, h * d), strides=(s * h * d * e, h * d * e, e),
            box_shape=(1,) + tuple(layout.box), swizzle=layout.swizzle)

    def _acc_descriptor(self, acc):
        """2-D tensor map (n / ACC_ROW, ACC_ROW) of the flat accumulator
        ``acc`` (``dq_acc_order``), unswizzled box of one 64 x 64 tile (80 x
        64 with 80-query steps)."""
        n, e = acc.numel(), acc.element_size()
        order = ACC_ORDER.for_block_m(self.meta["block_m"])
        return self._runtime.make_tma_descriptor(
            acc, shape=(n // ACC_ROW, ACC_ROW), strides=(ACC_ROW * e, e),
            box_shape=(order.tile_rows, ACC_ROW), swizzle=0)

    def prepare(self, o, lse, do, stream=None):
        """(LSE * log2 e, dPsum), fp32 (b, h, padded rows), as the kernel
        reads them (module doc, step 1)."""
        import torch

        b, sq, h, _ = o.shape
        padded = math.ceil(sq / self.meta["block_m"]) * self.meta["block_m"]
        if self.prep is None:
            lse_log2 = torch.full((b, h, padded), float("inf"), dtype=torch.float32,
                                  device=o.device)
            lse_log2[:, :, :sq] = torch.where(torch.isneginf(lse), float("inf"),
                                              lse * LOG2_E)
            dpsum = torch.zeros((b, h, padded), dtype=torch.float32, device=o.device)
            dpsum[:, :, :sq] = (do.float() * o.float()).sum(-1).transpose(1, 2)
            return lse_log2, dpsum
        lse_log2 = torch.empty((b, h, padded), dtype=torch.float32, device=o.device)
        dpsum = torch.empty((b, h, padded), dtype=torch.float32, device=o.device)
        if padded > sq:                         # the last block's padding rows
            lse_log2[:, :, sq:] = float("inf")
            dpsum[:, :, sq:] = 0.0
        rows = b * sq * h
        if self._sms is None:
            self._sms = self.device.limits.multiprocessors
        # A warp takes rows_per_warp rows at a time (kernels/attention_bwd/
        # prep_wide.py: a tile of them; the old preprocess one).
        units = math.ceil(rows / self.prep_meta.get("rows_per_warp", 1))
        warps = self.prep_meta["warps_per_cta"]
        cap = self.prep_meta.get("grid_cap_per_sm", 16) * self._sms
        grid = (max(1, min(math.ceil(units / warps), cap)), 1, 1)
        key = (o.data_ptr(), do.data_ptr(), lse.data_ptr(), lse_log2.data_ptr(),
               dpsum.data_ptr(), b, sq, h, padded, stream)
        p = self.prep_launches.get(key)
        if p is None:
            args = {"o": o.data_ptr(), "do": do.data_ptr(), "lse": lse.data_ptr(),
                    "lse_log2": lse_log2.data_ptr(), "dpsum": dpsum.data_ptr(),
                    "rows": rows, "heads": h, "seqlen": sq, "padded": padded}
            p = self.prep_launches.prepare(
                key, tuple(args[n] for n in self.prep_meta["params"]), grid, stream)
        self.prep_launches.fire(p)
        return lse_log2, dpsum

    def __call__(self, q, k, v, o, lse, do, softmax_scale=None, stream=None, sync=False):
        import torch

        d = self.meta["head_dim"]
        for name, t in (("q", q), ("k", k), ("v", v), ("o", o), ("do", do)):
            if t.dtype != torch.bfloat16 or t.dim() != 4 or not t.is_cuda \
                    or not t.is_contiguous() or t.shape[3] != d:
                raise ValueError(f"{name} must be a contiguous 4-D (batch, seqlen, heads, "
                                 f"{d}) bf16 CUDA tensor")
        b, sq, h, _ = q.shape
        _, sk, hk, _ = k.shape
        if tuple(o.shape) != tuple(q.shape) or tuple(do.shape) != tuple(q.shape) \
                or tuple(v.shape) != tuple(k.shape) or k.shape[0] != b or h % hk:
            raise ValueError(f"shapes: q {tuple(q.shape)}, o, do like q; k {tuple(k.shape)}, "
                             f"v like k; heads a multiple of the K/V heads")
        if tuple(lse.shape) != (b, h, sq) or lse.dtype != torch.float32:
            raise ValueError(f"lse must be fp32 (batch, heads, seqlen_q) = {(b, h, sq)}")
        scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
        rt = self._runtime
        s = (rt.fastlaunch.current_stream_handle(self.device.ordinal) if stream is None
             else rt.launch.stream_address(stream))
        lse_log2, dpsum = self.prepare(o, lse.contiguous(), do, s)
        acc_order = self.meta.get("dq_acc_order", False)
        padded = math.ceil(sq / self.meta["block_m"]) * self.meta["block_m"]
        if acc_order:
            dq_accum = torch.zeros(b * padded * h * d, dtype=torch.float32, device=q.device)
        else:
            dq_accum = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
        dk = torch.empty_like(k)
        dv = torch.empty_like(v)
        grid = (math.ceil(sk / self.meta["block_n"]) * hk * b, 1, 1)
        tensors = (q, k, v, do, lse_log2, dpsum, dq_accum, dk, dv)
        # The caching allocator hands a training loop the same addresses
        # step after step: the prepared launch (tensor maps encoded) is
        # found again by them.
        key = tuple(t.data_ptr() for t in tensors) + (tuple(q.shape), tuple(k.shape),
                                                      scale, s)
        p = self.launches.get(key)
        if p is None:
            args = {"q": self._descriptor(q, "q"), "k": self._descriptor(k, "kv"),
                    "v": self._descriptor(v, "kv"), "do": self._descriptor(do, "q"),
                    "lse_log2": lse_log2.data_ptr(), "dpsum": dpsum.data_ptr(),
                    "dq_accum": (self._acc_descriptor(dq_accum) if acc_order
                                 else self._descriptor(dq_accum, "dq")),
                    "dk": self._descriptor(dk, "dkv"), "dv": self._descriptor(dv, "dkv"),
                    "batch": b, "heads": h, "heads_kv": hk, "seqlen_q": sq, "seqlen_k": sk,
                    "scale_log2": scale * LOG2_E, "scale": scale}
            p = self.launches.prepare(key, tuple(args[n] for n in self.meta["params"]),
                                      grid, s)
        if sync:
            self.launcher.launch(p.values, grid, s, True, None)
        else:
            self.launches.fire(p)
        if acc_order and self.dq_convert is not None:
            return self.convert_acc_order(dq_accum, b, padded, sq, h, s), dk, dv
        if acc_order:                           # un-permuted in the conversion's copy
            dq = torch.empty((b, padded, h, d), dtype=torch.bfloat16, device=q.device)
            view = acc_order_view(dq_accum, b, padded, h, d, self.meta["block_m"])
            dq.view(view.shape).copy_(view)
            return (dq if padded == sq else dq[:, :sq].contiguous()), dk, dv
        return dq_accum.to(torch.bfloat16), dk, dv

    def convert_acc_order(self, acc, batch, padded, seqlen, heads, stream=None):
        """(batch, seqlen, heads, head_dim) bf16 dQ from the flat accumulator
        ``acc`` of ``padded`` rows (a multiple of the main kernel's query
        block) in the accumulator's order, by the postprocess kernel
        (kernels/attention_bwd_dq_convert.py: one CTA per 64 x 64 tile, the
        padding rows past ``seqlen`` left out)."""
        import torch

        d = self.meta["head_dim"]
        tile = self.convert_meta["tile"]                    # columns of a tile
        queries = self.convert_meta.get("queries", tile)    # its query rows
        if queries != ACC_ORDER.for_block_m(self.meta["block_m"]).queries:
            raise ValueError("AttentionBwd: the dQ postprocess is for another query step")
        if padded % queries or not 0 < seqlen <= padded or acc.dtype != torch.float32 \
                or acc.numel() != batch * padded * heads * d:
            raise ValueError(f"convert_acc_order: acc must be the fp32 accumulator of "
                             f"{batch} x {padded} x {heads} x {d} (padded a multiple of {queries}, "
                             f"at least seqlen {seqlen})")
        tiles_per_batch = padded // queries
        dq = torch.empty((batch, seqlen, heads, d), dtype=torch.bfloat16, device=acc.device)
        if stream is None:
            stream = self._runtime.fastlaunch.current_stream_handle(self.device.ordinal)
        grid = (batch * tiles_per_batch * heads * (d // tile), 1, 1)
        key = (acc.data_ptr(), dq.data_ptr(), batch, padded, seqlen, heads, stream)
        p = self.convert_launches.get(key)
        if p is None:
            args = {"acc": acc.data_ptr(), "dq": dq.data_ptr(),
                    "tiles_per_batch": tiles_per_batch, "heads": heads, "seqlen": seqlen}
            p = self.convert_launches.prepare(
                key, tuple(args[n] for n in self.convert_meta["params"]), grid, stream)
        self.convert_launches.fire(p)
        return dq


def reference(q, k, v, do, causal, softmax_scale=None):
    """fp32 gradients (dq, dk, dv) of attention's O with upstream ``do``,
    bottom-right causal, GQA by repeating K/V heads (their gradients summed
    back over the group)."""
    import torch

    b, sq, h, d = q.shape
    hk = k.shape[2]
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
    kr = kf.repeat_interleave(h // hk, dim=2)
    vr = vf.repeat_interleave(h // hk, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", qf, kr) * scale
    if causal:
        sk = k.shape[1]
        r = torch.arange(sq, device=q.device)[:, None]
        c = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(c > r + (sk - sq), float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    o = torch.einsum("bhqk,bkhd->bqhd", p, vr)
    o.backward(do.float())
    return qf.grad, kf.grad, vf.grad


def relative_errors(got, want):
    """max |got - want| / max |want| for each pair (0 where want is 0)."""
    out = []
    for g, w in zip(got, want):
        top = w.abs().max().item()
        out.append((g.float() - w).abs().max().item() / top if top else
                   g.float().abs().max().item())
    return out
