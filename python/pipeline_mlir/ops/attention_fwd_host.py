"""Host side of pipeline_mlir/kernels/attention_fwd/: launch a compiled attention
forward on torch tensors and check it against PyTorch.

Needs only ``pipeline_mlir.runtime`` (cuda-bindings) and torch, no MLIR: the
kernel is compiled where MLIR is installed and run where the GPU is
(``benchmarks/attention/`` bundles both).

    attn = AttentionFwd(cubin_bytes, meta)      # meta: AttentionConfig.meta(kernel)
    o, lse = attn(q, k, v)                      # (b, s, h, d) bf16 tensors

The FP8 variants (meta ``dtype`` 'e4m3') take Q and K e4m3 (b, s, h, d), V
as ``fp8_v_operand(v)`` made it (V^T, its keys in P's register order) and
three one-element fp32 descale tensors: ``attn(q, k, vt, descales=(qd, kd,
vd))``; O is bf16.

It launches through the runtime's one engine, as the GEMM does: the first
call with a set of tensors checks them, encodes the tensor maps into the
device's descriptor arena and prepares the launch (``runtime.LaunchCache``,
bounded); a repeat fires it with two driver calls, creating no event and
allocating nothing.
"""

import math

META_KEYS = ("name", "head_dim", "causal", "block_m", "block_n", "threads",
             "layouts", "smem", "signature")
# Error bound of the check against fp32 attention: P is rounded to bf16 (2^-8
# relative) before P V, O once more on output; |O| <= max |V| ~ 4 for
# gaussian V. 2e-2 absolute is ~5 bf16 ulps of the largest outputs.
ABS_ERROR_BOUND = 2e-2
LSE_ERROR_BOUND = 1e-3
LAUNCH_CACHE = 256   # prepared launches (tensor sets) kept per variant


class AttentionFwd:
    """A loaded attention variant; calling it launches on torch's current
    stream."""

    def __init__(self, image, meta, device=None):
        from pipeline_mlir import runtime
        from pipeline_mlir.layout import OperandLayout

        missing = [k for k in META_KEYS if k not in meta]
        if missing:
            raise ValueError(f"AttentionFwd: meta lacks {missing}")
        self.meta = dict(meta)
        # The kernel's operand layouts: the tensor maps' boxes and swizzle.
        self.layouts = {name: OperandLayout.from_meta(m)
                        for name, m in meta["layouts"].items()}
        self._runtime = runtime
        self.compiled = runtime.CompiledKernel.cached(
            image, name=meta["name"], params=list(meta["signature"]),
            block=meta["threads"], smem=meta["smem"])
        self.device = device or runtime.default_device()
        self.launcher = self.compiled.launcher(self.device)
        self.kernel = self.launcher.fn          # the runtime Kernel (attributes)
        self.module = self.kernel.module
        self.launches = runtime.LaunchCache(self.launcher, LAUNCH_CACHE)
        self._sms = None

    @property
    def fp8(self):
        return self.meta.get("dtype", "bf16") != "bf16"

    def _check(self, q, k, v):
        import torch

        d = self.meta["head_dim"]
        dtype = getattr(torch, self.layouts["q"].torch_dtype)
        for name, t in (("q", q), ("k", k)) + ((("v", v),) if not self.fp8 else ()):
            if t.dtype != dtype or t.dim() != 4 or not t.is_cuda \
                    or not t.is_contiguous():
                raise ValueError(f"{name} must be a contiguous 4-D (batch, seqlen, heads, "
                                 f"head_dim) {self.layouts['q'].dtype} CUDA tensor")
            if t.shape[3] != d:
                raise ValueError(f"{name}: head_dim {t.shape[3]}, this kernel was built "
                                 f"for {d}")
        b, sq, h, _ = q.shape
        bk, sk, hk, _ = k.shape
        if self.fp8:
            if bk != b:
                raise ValueError(f"k's batch ({bk}) must be q's ({b})")
            want = (b, hk, d, fp8_v_keys(sk))
            if v.dtype != dtype or tuple(v.shape) != want or not v.is_cuda \
                    or not v.is_contiguous():
                raise ValueError(f"v must be fp8_v_operand(v): a contiguous {want} "
                                 f"{self.layouts['v'].dtype} CUDA tensor, got "
                                 f"{tuple(v.shape)} {v.dtype}")
        elif tuple(v.shape) != tuple(k.shape) or bk != b:
            raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must match, with "
                             f"q's batch {b}")
        if h % hk:
            raise ValueError(f"heads ({h}) must be a multiple of the K/V heads ({hk})")
        group = self.meta.get("pack_gqa", 0)
        if group and h // hk != group:
            raise ValueError(f"{self.meta['name']} packs {group} query heads per K/V head; "
                             f"got {h} heads on {hk} K/V heads")
        return b, sq, h, sk, hk

    def _descriptor(self, t, operand):
        """3-D tensor map (batch, seqlen, heads * d) of ``t`` whose box is one
        batch entry of ``operand``'s layout box: (1, rows, box columns)."""
        layout = self.layouts[operand]
        b, s, h, d = t.shape
        e = t.element_size()
        return self._runtime.make_tma_descriptor(
            t, shape=(b, s, h * d), strides=(s * h * d * e, h * d * e, e),
            box_shape=(1,) + tuple(layout.box), swizzle=layout.swizzle)

    def _packed_descriptor(self, t, operand):
        """4-D tensor map (batch, seqlen, heads, d) of ``t`` whose box is the
        packed tile: (1, block_m / g positions, the g heads of a group, box
        columns); its rows land in shared memory as (position, head)."""
        layout = self.layouts[operand]
        b, s, h, d = t.shape
        e = t.element_size()
        group = self.meta["pack_gqa"]
        rows, cols = layout.box
        return self._runtime.make_tma_descriptor(
            t, shape=(b, s, h, d), strides=(s * h * d * e, h * d * e, d * e, e),
            box_shape=(1, rows // group, group, cols), swizzle=layout.swizzle)

    def _transposed_descriptor(self, vt, operand):
        """3-D tensor map (batch, heads * d, keys) of the FP8 V^T operand
        (``fp8_v_operand``): a box is d rows of one head by the layout's
        128 keys."""
        layout = self.layouts[operand]
        b, hk, d, keys = vt.shape
        e = vt.element_size()
        return self._runtime.make_tma_descriptor(
            vt, shape=(b, hk * d, keys), strides=(hk * d * keys * e, keys * e, e),
            box_shape=(1,) + tuple(layout.box), swizzle=layout.swizzle)

    def units(self, b, h, sq, hk=None):
        """Work units: tiles of ``block_m`` rows of one head, or packed
        (``pack_gqa`` g), of block_m / g positions of one K/V group."""
        group = self.meta.get("pack_gqa", 0)
        if group:
            hk = h // group if hk is None else hk
            return b * hk * math.ceil(sq / (self.meta["block_m"] // group))
        return b * h * math.ceil(sq / self.meta["block_m"])

    def __call__(self, q, k, v, out=None, lse=None, softmax_scale=None, stream=None,
                 sync=False, descales=None):
        import torch

        b, sq, h, sk, hk = self._check(q, k, v)
        d = self.meta["head_dim"]
        if self.fp8:
            if descales is None or len(descales) != 3 or not all(
                    isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.is_cuda
                    and t.numel() == 1 for t in descales):
                raise ValueError("the FP8 forward takes descales=(q_descale, k_descale, "
                                 "v_descale): one-element fp32 CUDA tensors")
        elif descales is not None:
            raise ValueError("descales are for the FP8 forward")
        if out is None:
            out = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)
        if lse is None:
            lse = torch.empty(b, h, sq, dtype=torch.float32, device=q.device)
        scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
        if self._sms is None:
            self._sms = self.device.limits.multiprocessors
        units = self.units(b, h, sq, hk)
        # Persistent: ctas_per_sm CTAs per SM walk the work units; else one
        # per unit.
        slots = self._sms * self.meta.get("ctas_per_sm", 1)
        grid = (min(units, slots) if self.meta.get("persistent", True) else units, 1, 1)
        rt = self._runtime
        s = (rt.fastlaunch.current_stream_handle(self.device.ordinal) if stream is None
             else rt.launch.stream_address(stream))
        for t in (out, lse):
            if not (t.is_cuda and t.is_contiguous()):
                raise ValueError("out and lse must be contiguous CUDA tensors")
        o_tma = self.meta["signature"][3] == "tma"
        scale_ptrs = tuple(t.data_ptr() for t in descales) if self.fp8 else ()
        key = (q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr(),
               tuple(q.shape), tuple(k.shape), tuple(out.shape), tuple(lse.shape), scale, s,
               scale_ptrs)
        p = self.launches.get(key)
        if p is None:
            p = self.launches.prepare(key, (
                (self._packed_descriptor(q, "q") if self.meta.get("pack_gqa", 0)
                 else self._descriptor(q, "q")),
                self._descriptor(k, "k"),
                self._transposed_descriptor(v, "v") if self.fp8 else self._descriptor(v, "v"),
                # O: a tensor map when the kernel stores it with TMA.
                self._descriptor(out, "o") if o_tma else out.data_ptr(),
                lse.data_ptr(), b, h, hk, sq, sk, scale * math.log2(math.e)) + scale_ptrs,
                grid, s)
        if sync:
            self.launcher.launch(p.values, grid, s, True, None)
        else:
            self.launches.fire(p)
        return out, lse


# FP8 V^T's keys: whole blocks of the register A operand's 32-key order.
FP8_KEY_BLOCK = 32


def fp8_v_keys(seqlen_k):
    """Keys of the FP8 V^T operand: ``seqlen_k`` padded to a whole 32-key
    block (zeros; also makes the tensor map's row stride a multiple of 16
    bytes)."""
    return -(-seqlen_k // FP8_KEY_BLOCK) * FP8_KEY_BLOCK


def fp8_v_source_keys(seqlen_k):
    """For each column ``c`` of a V^T row (``fp8_v_keys(seqlen_k)`` of
    them), the key of V it holds: within every 32-key block, column
    ``kappa`` holds key ``ORDER[kappa]`` (``layout.fp8_register_a_key_order``),
    the accumulator column that P's in-place register operand puts at k
    index ``kappa``; a key past ``seqlen_k`` is padding (zeros)."""
    from pipeline_mlir.layout import fp8_register_a_key_order

    order = fp8_register_a_key_order()
    return [blk + order[kk] for blk in range(0, fp8_v_keys(seqlen_k), FP8_KEY_BLOCK)
            for kk in range(FP8_KEY_BLOCK)]


# A key of a 32-key block is 16 h + 8 a + 2 t + e (h, a, e in 0..1, t in
# 0..3); at V^T column 16 h + 4 t + 2 a + e it is ORDER[that column]
# (layout.fp8_register_a_key_order): the block's axes (h, a, t, e) become
# (h, t, a, e), one transpose that fp8_v_operand folds into V's.
FP8_KEY_AXES = (2, 2, 4, 2)
FP8_KEY_TRANSPOSE = (0, 2, 1, 3)


def fp8_v_operand(v):
    """V (batch, seqlen_k, kv_heads, d) e4m3 as the FP8 forward reads it:
    V^T (batch, kv_heads, d, keys), keys contiguous (an 8-bit wgmma's B is
    K-major), padded with zeros to ``fp8_v_keys`` and permuted within every
    32 as ``fp8_v_source_keys`` says (so that P's register fragment needs
    no shuffles: the module doc of kernels/attention_fwd/__init__.py). One copy of
    V (a permute of its axes); a KV cache can keep V in this form and pass
    it to every call."""
    import torch

    b, sk, hk, d = v.shape
    keys = fp8_v_keys(sk)
    raw = v.contiguous().view(torch.uint8)             # the copy moves bytes
    if keys != sk:
        raw = torch.cat([raw, raw.new_zeros(b, keys - sk, hk, d)], dim=1)
    blocks = raw.view(b, keys // FP8_KEY_BLOCK, *FP8_KEY_AXES, hk, d)
    # (b, block, h, a, t, e, hk, d) -> (b, hk, d, block, h, t, a, e)
    inner = tuple(2 + i for i in FP8_KEY_TRANSPOSE)
    vt = blocks.permute(0, 6, 7, 1, *inner).contiguous().view(b, hk, d, keys)
    return vt.view(v.dtype)


def reference(q, k, v, causal, softmax_scale=None):
    """fp32 attention of the same inputs: (O, LSE), bottom-right causal."""
    import torch

    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
    qf = q.float().transpose(1, 2)                              # b h sq d
    kf = k.float().transpose(1, 2).repeat_interleave(h // hk, dim=1)
    vf = v.float().transpose(1, 2).repeat_interleave(h // hk, dim=1)
    s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if causal:
        r = torch.arange(sq, device=q.device)[:, None]
        c = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(c > r + (sk - sq), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)                            # b h sq
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    o = torch.matmul(p, vf).transpose(1, 2)                     # b sq h d
    return o, lse


def check(attn, b, sq, sk, h, hk, seed=0):
    """Run ``attn`` on gaussian inputs and compare with fp32 attention;
    return (max |O error|, max |LSE error|). Raises AssertionError over the
    bounds."""
    import torch

    d = attn.meta["head_dim"]
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(b, sq, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16, generator=g)
    out = torch.full_like(q, float("nan"))
    o, lse = attn(q, k, v, out=out, sync=True)
    ro, rlse = reference(q, k, v, attn.meta["causal"])
    err = (o.float() - ro).abs().max().item()
    finite = torch.isfinite(rlse)
    lerr = (lse[finite] - rlse[finite]).abs().max().item() if finite.any() else 0.0
    if not torch.equal(torch.isfinite(lse), finite):
        raise AssertionError(f"{attn.meta['name']}: LSE -inf rows differ from the "
                             "reference")
    if not (err <= ABS_ERROR_BOUND and lerr <= LSE_ERROR_BOUND):
        raise AssertionError(f"{attn.meta['name']} b={b} sq={sq} sk={sk} h={h} hk={hk}: "
                             f"max |O err| {err:.3g} (bound {ABS_ERROR_BOUND}), "
                             f"max |LSE err| {lerr:.3g} (bound {LSE_ERROR_BOUND})")
    return err, lerr


# The FP8 forward against fp32 attention of its dequantized inputs. P is
# rounded to e4m3 before P V while the row sum adds the unrounded P, so
# O's error is sum_j (P8_j - P_j) V_j / L per row (L = sum_j P_j, P's
# largest entry 1): at most 2^-4 |P_j| where P_j >= 2^-6 (3 mantissa bits,
# round to nearest) and 2^-10 where P_j is subnormal in e4m3, so |O err|
# <= max|V| (2^-4 + 2^-10 seqlen_k / L) (+ 2^-9 |O| for O's bf16). The row
# sum is fp32, the LSE's error is S's: the 8-bit wgmma's accumulation.
FP8_LSE_ERROR_BOUND = 1e-2


def fp8_quantize(x, dtype):
    """``x`` (any float tensor) as e4m3 with a per-tensor scale mapping its
    amax to the type's largest value: (x8, descale), ``x ~ x8 * descale``
    (descale a one-element fp32 tensor)."""
    import torch

    from pipeline_mlir.layout import FP8_MAX

    amax = x.abs().amax().float().clamp(min=1e-12)
    descale = (amax / FP8_MAX["e4m3"]).reshape(1)
    return (x.float() / descale).to(dtype), descale


def check_fp8(attn, b, sq, sk, h, hk, seed=0):
    """Run the FP8 variant ``attn`` on gaussian inputs quantized per tensor
    and compare with fp32 attention of the dequantized inputs
    (``fp8_errors``); returns what that returns."""
    import torch

    d = attn.meta["head_dim"]
    f8 = torch.float8_e4m3fn
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(b, s, n, d, device="cuda", generator=g)
               for s, n in ((sq, h), (sk, hk), (sk, hk)))
    (q8, qd), (k8, kd), (v8, vd) = (fp8_quantize(t, f8) for t in (q, k, v))
    out = torch.full((b, sq, h, d), float("nan"), dtype=torch.bfloat16, device="cuda")
    o, lse = attn(q8, k8, fp8_v_operand(v8), out=out, sync=True, descales=(qd, kd, vd))
    return fp8_errors(o, lse, (q8, qd), (k8, kd), (v8, vd), attn.meta["causal"],
                      name=attn.meta["name"])


def fp8_errors(o, lse, q, k, v, causal, softmax_scale=None, name="attention_fp8"):
    """O and LSE of an FP8 forward against fp32 attention of its
    dequantized inputs (``q``, ``k``, ``v``: (e4m3 tensor, descale) pairs).
    Raises AssertionError over the bounds (the bound is per row, the
    comment above); returns (max |O error|, the largest error / bound
    ratio, max |LSE error|)."""
    import torch

    (q8, qd), (k8, kd), (v8, vd) = q, k, v
    b, sq, h, d = q8.shape
    sk, hk = k8.shape[1], k8.shape[2]
    qf, kf, vf = q8.float() * qd, k8.float() * kd, v8.float() * vd
    ro, rlse = reference(qf, kf, vf, causal, softmax_scale)
    # Per row: L = exp(LSE - max S) from the reference's S.
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
    qt = qf.transpose(1, 2)
    kt = kf.transpose(1, 2).repeat_interleave(h // hk, dim=1)
    s = torch.matmul(qt, kt.transpose(-1, -2)) * scale
    if causal:
        r = torch.arange(sq, device=s.device)[:, None]
        c = torch.arange(sk, device=s.device)[None, :]
        s = s.masked_fill(c > r + (sk - sq), float("-inf"))
    row_l = torch.exp(rlse - s.amax(dim=-1)).transpose(1, 2)[..., None]   # b sq h 1
    del s
    vmax = vf.abs().amax().item()
    bound = vmax * (2.0 ** -4 + 2.0 ** -10 * sk / row_l) + 2.0 ** -9 * ro.abs()
    finite = torch.isfinite(rlse)
    err = (o.float() - ro).abs()
    rows = finite.transpose(1, 2)[..., None].expand_as(err)
    over = (err > bound) & rows
    lerr = (lse[finite] - rlse[finite]).abs().max().item() if finite.any() else 0.0
    if not torch.equal(torch.isfinite(lse), finite):
        raise AssertionError(f"{name}: LSE -inf rows differ from the reference")
    emax = err[rows].max().item()
    if over.any() or lerr > FP8_LSE_ERROR_BOUND:
        raise AssertionError(f"{name} b={b} sq={sq} sk={sk} h={h} hk={hk}: "
                             f"{int(over.sum())} outputs over their bound (max |O err| "
                             f"{emax:.3g}), max |LSE err| {lerr:.3g} (bound "
                             f"{FP8_LSE_ERROR_BOUND})")
    return emax, (err / bound)[rows].max().item(), lerr
