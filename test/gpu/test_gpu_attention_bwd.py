"""The GPU suite: ``pipeline_mlir.attention``'s backward against fp32
gradients, under ``torch.compile``, and in a training step of a small
transformer block against the same step with torch's SDPA.

The kernels come from the bundle's kernel cache (``gemm-cache/``, families
``attention_fwd`` and ``attention_bwd``: scripts/build-gpu-bundle.py or
benchmarks/attention/build_bwd_bundle.py fill it).

    cd .gpu-bundle && python3 -m pytest -q test_gpu_attention_bwd.py
"""

import copy
import math
import os

import pytest

from gpu_child import bundle_dir

torch = pytest.importorskip("torch", reason="these tests compare the op with torch")
CACHE = os.path.join(bundle_dir() or os.path.dirname(os.path.abspath(__file__)), "gemm-cache")


@pytest.fixture(scope="module")
def cache():
    if not os.path.isdir(os.path.join(CACHE, "attention_bwd")):
        pytest.skip(f"no attention backward kernels at {CACHE}: build the bundle with "
                    "scripts/build-gpu-bundle.py")
    os.environ["PIPELINE_MLIR_CACHE_DIR"] = CACHE


# b, sq, sk, h, hk, d, causal: every head dim, both masks, GQA and MQA,
# lengths the 64-query and 128-key (d 256: 64-key) tiles do not divide, more
# keys than queries and more queries than keys (causal: the first rows see
# no key).
SHAPES = [
    (2, 512, 512, 4, 4, 128, False), (1, 333, 517, 4, 2, 128, True),
    (2, 256, 256, 8, 1, 64, True), (1, 300, 77, 2, 1, 64, False),
    (1, 200, 330, 2, 2, 128, True), (1, 330, 200, 4, 1, 64, True),
    (1, 1000, 1000, 2, 2, 128, False), (2, 64, 64, 2, 1, 128, True),
    (2, 512, 512, 4, 2, 256, False), (1, 333, 517, 4, 1, 256, True),
    (1, 330, 200, 2, 2, 256, True), (1, 300, 77, 2, 1, 256, False)]


def inputs(b, sq, sk, h, hk, d, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, device="cuda", dtype=torch.bfloat16, generator=g)
    return randn(b, sq, h, d), randn(b, sk, hk, d), randn(b, sk, hk, d), randn(b, sq, h, d)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gradients_match_fp32(cache, device, shape):
    import pipeline_mlir
    from pipeline_mlir.ops.attention_bwd_host import (REL_ERROR_BOUND, reference,
                                                      relative_errors)

    b, sq, sk, h, hk, d, causal = shape
    q, k, v, do = inputs(b, sq, sk, h, hk, d, sq + sk)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    o = pipeline_mlir.attention(q, k, v, causal=causal)
    grads = torch.autograd.grad(o, (q, k, v), do)
    want = reference(q, k, v, do, causal)
    errs = relative_errors(grads, want)
    print(f"attention backward {shape}: relative errors dq {errs[0]:.2e} dk {errs[1]:.2e} "
          f"dv {errs[2]:.2e}")
    assert all(torch.isfinite(g).all() for g in grads)
    assert max(errs) <= REL_ERROR_BOUND, errs
    # Another scale: the kernel takes it, the reference agrees.
    scale = 0.5 / math.sqrt(d)
    o2 = pipeline_mlir.attention(q, k, v, causal=causal, softmax_scale=scale)
    errs2 = relative_errors(torch.autograd.grad(o2, (q, k, v), do),
                            reference(q, k, v, do, causal, softmax_scale=scale))
    assert max(errs2) <= REL_ERROR_BOUND, errs2


# The d 128 candidate with dQ split by columns between the consumer
# warpgroups: ragged, GQA and MQA, causal with more keys than queries and
# the reverse.
SPLIT_SHAPES = [(2, 512, 512, 4, 4, 128, False), (1, 333, 517, 4, 2, 128, True),
                (1, 330, 200, 4, 1, 128, True), (1, 1000, 1000, 2, 2, 128, False)]


@pytest.mark.parametrize("shape", SPLIT_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_dq_split_candidate_matches_fp32(cache, device, shape):
    """attention_configs.BWD_CANDIDATES (``dq_split``, not the op's default):
    its gradients within the bound against fp32, and its dK and dV bit for
    bit the default kernel's (the split changes only how dQ is summed)."""
    import importlib

    import pipeline_mlir
    from pipeline_mlir.ops.attention_bwd_host import (REL_ERROR_BOUND, reference,
                                                      relative_errors)

    op = importlib.import_module("pipeline_mlir.ops.attention")
    b, sq, sk, h, hk, d, causal = shape
    q, k, v, do = inputs(b, sq, sk, h, hk, d, sq + sk + 1)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    o = pipeline_mlir.attention(q, k, v, causal=causal)
    default = torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
    op.BWD_DQ_SPLIT = True
    try:
        split = torch.autograd.grad(o, (q, k, v), do)
    finally:
        op.BWD_DQ_SPLIT = False
    errs = relative_errors(split, reference(q, k, v, do, causal))
    print(f"attention backward, dq_split {shape}: relative errors dq {errs[0]:.2e} "
          f"dk {errs[1]:.2e} dv {errs[2]:.2e}")
    assert all(torch.isfinite(g).all() for g in split)
    assert max(errs) <= REL_ERROR_BOUND, errs
    assert torch.equal(split[1], default[1]) and torch.equal(split[2], default[2])


# The candidates with attention_configs.BWD_OPTIONS on: every head dim,
# ragged, GQA and MQA, causal with more keys than queries and the reverse.
OPTION_SHAPES = [(2, 512, 512, 4, 4, 128, False), (1, 333, 517, 4, 2, 128, True),
                 (2, 256, 256, 8, 1, 64, True), (1, 300, 77, 2, 1, 64, False),
                 (2, 512, 512, 4, 2, 256, False), (1, 330, 200, 2, 2, 256, True)]


def _option_cases():
    """(shape, options): every option set of attention_configs.bwd_option_sets
    on the shapes of its head dim (of d 256's own sets, those with
    ``split_scores``)."""
    from pipeline_mlir.ops import attention_configs
    d256 = tuple(o for o in attention_configs.BWD_D256_OPTION_SETS if "split_scores" in o)
    return [pytest.param(shape, opts, id="x".join(map(str, shape)) + "-" + "+".join(opts))
            for opts in (attention_configs.BWD_OPTION_SETS + attention_configs.BWD_D64_OPTION_SETS
                         + attention_configs.BWD_D128_OPTION_SETS + d256)
            for shape in OPTION_SHAPES
            if opts in attention_configs.bwd_option_sets(shape[5])]


@pytest.mark.parametrize("shape,options", _option_cases())
def test_option_candidates_match_fp32(cache, device, shape, options):
    """attention_configs.BWD_CANDIDATES with ``options`` (not the op's
    default): gradients within the bound against fp32, and dQ, dK and dV
    close to the default kernel's (the options reorder dQ's waits and
    where its stores land, not any sum: dK and dV bit for bit, dQ up to
    the reduce-add's order; with 128-query steps dK and dV within 1e-2)."""
    import importlib

    import pipeline_mlir
    from pipeline_mlir.ops.attention_bwd_host import (REL_ERROR_BOUND, reference,
                                                      relative_errors)

    op = importlib.import_module("pipeline_mlir.ops.attention")
    b, sq, sk, h, hk, d, causal = shape
    q, k, v, do = inputs(b, sq, sk, h, hk, d, sq + sk + 2)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    o = pipeline_mlir.attention(q, k, v, causal=causal)
    default = torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
    op.BWD_OPTIONS = options
    try:
        cand = torch.autograd.grad(o, (q, k, v), do)
    finally:
        op.BWD_OPTIONS = None
    errs = relative_errors(cand, reference(q, k, v, do, causal))
    print(f"attention backward, {'+'.join(options)} {shape}: relative errors dq "
          f"{errs[0]:.2e} dk {errs[1]:.2e} dv {errs[2]:.2e}")
    assert all(torch.isfinite(g).all() for g in cand)
    assert max(errs) <= REL_ERROR_BOUND, errs
    from pipeline_mlir.ops.attention_configs import bwd_default_options
    if {"block_m128", "p_packed"} & (set(options) ^ set(bwd_default_options(d, causal))):
        # 128-query steps on one side only (d 64's default takes them): the
        # same sums over queries in the same order, masked-out rows of a
        # partial block adding zeros; compared as dQ. p_packed on one side
        # (d 64 causal's default takes it): dS^T from P^T rounded to bf16
        # (dK's operand differs in its last bits).
        assert max(relative_errors(cand[1:], (default[1].float(), default[2].float()))) <= 1e-2
    else:
        assert torch.equal(cand[1], default[1]) and torch.equal(cand[2], default[2])
    assert max(relative_errors((cand[0],), (default[0].float(),))) <= 1e-2


# Six (batch, K/V head) pairs: a full group of lpt_order's LPT_PAIRS (4) and
# a partial one; GQA; causal, more keys than queries.
LPT_SHAPES = [(3, 384, 448, 4, 2, 64, True), (3, 384, 448, 4, 2, 128, True),
              (3, 200, 330, 4, 2, 256, True)]


@pytest.mark.parametrize("shape", LPT_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_lpt_order_matches_the_default(cache, device, shape):
    """The key blocks longest first (``lpt_order``, the op's causal
    default at d 128 and 256) against the head dim's set without it: every
    (pair, key block) computed once and stored where its block says, so dK
    and dV are bit for bit the same (each CTA sums its own in registers),
    dQ within 1e-2 (the reduce-adds' order) and all within the bound of
    fp32."""
    import importlib

    import pipeline_mlir
    from pipeline_mlir.ops.attention_bwd_host import (REL_ERROR_BOUND, reference,
                                                      relative_errors)
    from pipeline_mlir.ops.attention_configs import bwd_default_options

    op = importlib.import_module("pipeline_mlir.ops.attention")
    b, sq, sk, h, hk, d, causal = shape
    q, k, v, do = inputs(b, sq, sk, h, hk, d, sq + sk + 3)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    o = pipeline_mlir.attention(q, k, v, causal=causal)
    base = tuple(x for x in bwd_default_options(d, causal) if x != "lpt_order")
    try:
        op.BWD_OPTIONS = base
        default = torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
        op.BWD_OPTIONS = base + ("lpt_order",)
        lpt = torch.autograd.grad(o, (q, k, v), do)
    finally:
        op.BWD_OPTIONS = None
    errs = relative_errors(lpt, reference(q, k, v, do, causal))
    print(f"attention backward, lpt_order {shape}: relative errors dq {errs[0]:.2e} "
          f"dk {errs[1]:.2e} dv {errs[2]:.2e}")
    assert max(errs) <= REL_ERROR_BOUND, errs
    assert torch.equal(lpt[1], default[1]) and torch.equal(lpt[2], default[2])
    assert max(relative_errors((lpt[0],), (default[0].float(),))) <= 1e-2


# b, seqlen, heads: ragged (the padding rows left out), several heads (the
# heads of a GQA/MQA dQ are the query heads), one query tile.
CONVERT_SHAPES = [(2, 200, 3), (1, 333, 8), (3, 64, 1), (2, 1000, 2)]


@pytest.mark.parametrize("head_dim,causal", [(64, False), (64, True), (128, False),
                                             (128, True)])
def test_dq_convert_kernel_matches_the_torch_unpermute(cache, device, head_dim, causal):
    """dq_acc_order's postprocess kernel (kernels/attention_bwd_dq_convert.py),
    loaded with each default + dq_acc_order build: on random accumulators
    of ragged lengths (padded to the build's query block), bit for bit
    torch's un-permute (``dq_from_acc_order``) rounded to bf16."""
    from pipeline_mlir.ops import attention_configs
    from pipeline_mlir.ops.attention import variant_attention_bwd
    from pipeline_mlir.ops.attention_bwd_host import dq_from_acc_order

    opts = attention_configs.bwd_default_options(head_dim, causal) + ("dq_acc_order",)
    bwd = variant_attention_bwd(head_dim, causal, options=opts)
    assert bwd.dq_convert is not None
    block_m = bwd.meta["block_m"]
    g = torch.Generator(device="cuda").manual_seed(head_dim + causal)
    for b, sq, h in CONVERT_SHAPES:
        padded = math.ceil(sq / block_m) * block_m
        acc = torch.randn(b * padded * h * head_dim, device="cuda", generator=g)
        got = bwd.convert_acc_order(acc, b, padded, sq, h)
        want = dq_from_acc_order(acc, b, padded, h, head_dim,
                                 block_m)[:, :sq].to(torch.bfloat16)
        assert got.shape == (b, sq, h, head_dim) and torch.equal(got, want), (b, sq, h)
    with pytest.raises(ValueError, match="convert_acc_order"):
        bwd.convert_acc_order(acc[1:], b, padded, sq, h)
    torch.cuda.synchronize()


def test_dq_convert_m80_matches_the_torch_unpermute(cache, device):
    """The 80-query step's postprocess (the transposed order, loaded with
    FA4's order + block_m80 + dq_acc_order): bit for bit torch's
    un-permute of the transposed order on random ragged accumulators."""
    from pipeline_mlir.ops.attention import variant_attention_bwd
    from pipeline_mlir.ops.attention_bwd_host import dq_from_acc_order

    opts = ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles", "dk_last",
            "ds_one_barrier", "block_m80", "dq_acc_order")
    bwd = variant_attention_bwd(128, False, options=opts)
    assert bwd.dq_convert is not None and bwd.meta["block_m"] == 80
    g = torch.Generator(device="cuda").manual_seed(80)
    for b, sq, h in CONVERT_SHAPES:
        padded = math.ceil(sq / 80) * 80
        acc = torch.randn(b * padded * h * 128, device="cuda", generator=g)
        got = bwd.convert_acc_order(acc, b, padded, sq, h)
        want = dq_from_acc_order(acc, b, padded, h, 128, block_m=80)[:, :sq].to(torch.bfloat16)
        assert got.shape == (b, sq, h, 128) and torch.equal(got, want), (b, sq, h)
    torch.cuda.synchronize()


def test_preprocess_matches_torch(cache, device):
    """The preprocess kernel's LSE * log2(e) and dPsum against the same in
    torch, padding rows and fully masked (-inf) rows included."""
    from pipeline_mlir.ops.attention import variant_attention_bwd
    from pipeline_mlir.ops.attention_bwd_host import LOG2_E

    bwd = variant_attention_bwd(128, True)
    g = torch.Generator(device="cuda").manual_seed(5)
    o, do = (torch.randn(2, 100, 3, 128, device="cuda", dtype=torch.bfloat16, generator=g)
             for _ in range(2))
    lse = torch.randn(2, 3, 100, device="cuda", generator=g)
    lse[:, :, :7] = float("-inf")
    lse_log2, dpsum = bwd.prepare(o, lse, do)
    assert lse_log2.shape == dpsum.shape == (2, 3, 128)
    want = (do.float() * o.float()).sum(-1).transpose(1, 2)
    assert (dpsum[..., :100] - want).abs().max().item() <= 1e-4 * want.abs().max().item()
    assert torch.equal(dpsum[..., 100:], torch.zeros_like(dpsum[..., 100:]))
    assert torch.isposinf(lse_log2[..., :7]).all() and torch.isposinf(lse_log2[..., 100:]).all()
    assert torch.allclose(lse_log2[..., 7:100], lse[..., 7:] * LOG2_E, rtol=1e-6, atol=0)
    torch.cuda.synchronize()


# The wide preprocess (kernels/attention_bwd/prep_wide.py, option
# prep_wide): both walks, ragged row counts, GQA's head counts.
@pytest.mark.parametrize("head_dim,order,slots", [(64, "bhs", 4), (128, "bhs", 4),
                                                  (256, "bhs", 4), (64, "bsh", 4),
                                                  (128, "bsh", 4), (64, "bhs", 8),
                                                  (128, "bhs", 8)])
def test_wide_preprocess_matches_the_old_bit_for_bit(cache, device, head_dim, order, slots):
    """Its LSE * log2(e) and dPsum equal the old preprocess's bit for bit
    (the same sum in the same order), padding and -inf rows included, and
    dPsum is torch's rowsum(dO * O) within fp32 rounding."""
    from pipeline_mlir.ops import attention_configs as ac
    from pipeline_mlir.ops import kernel_cache
    from pipeline_mlir.ops.attention_bwd_host import AttentionBwd

    opts = ac.bwd_default_options(head_dim, False)
    image, meta = kernel_cache.get(*ac.bwd_variant(head_dim, False, options=opts), "bf16",
                                   "sm_90a", kernel="attention_bwd")
    old, new = (AttentionBwd(image, meta, prep=kernel_cache.get(
        *variant, "bf16", "sm_90a", kernel="attention_bwd"))
        for variant in (ac.bwd_prep_variant(head_dim),
                        ac.bwd_prep_wide_variant(head_dim, order=order, slots=slots)))
    g = torch.Generator(device="cuda").manual_seed(head_dim)
    for b, s, h in ((2, 333, 3), (3, 1000, 5), (1, 77, 16), (1, 1, 1)):
        o, do = (torch.randn(b, s, h, head_dim, device="cuda", dtype=torch.bfloat16,
                             generator=g) for _ in range(2))
        lse = torch.randn(b, h, s, device="cuda", generator=g)
        lse[:, :, :3] = float("-inf")
        want = old.prepare(o, lse, do)
        got = new.prepare(o, lse, do)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), (b, s, h)
        ref = (do.float() * o.float()).sum(-1).transpose(1, 2)
        assert (got[1][..., :s] - ref).abs().max().item() <= 1e-4 * ref.abs().max().item()
    torch.cuda.synchronize()


@pytest.mark.parametrize("shape", [s for s in OPTION_SHAPES if s[5] in (64, 128)],
                         ids=lambda s: "x".join(map(str, s)))
def test_wide_preprocess_backward_matches_fp32(cache, device, shape):
    """The default backward with prep_wide: gradients within the bound
    against fp32, dK and dV the default's bit for bit (the same dPsum), dQ
    up to the reduce-add's order. (d 64's default runs it already:
    BWD_PREP_WIDE_HEAD_DIMS; test_wide_preprocess_matches_the_old_bit_for_bit
    holds it to the old one there.)"""
    import importlib

    import pipeline_mlir
    from pipeline_mlir.ops.attention_bwd_host import (REL_ERROR_BOUND, reference,
                                                      relative_errors)
    from pipeline_mlir.ops.attention_configs import bwd_default_options

    op = importlib.import_module("pipeline_mlir.ops.attention")
    b, sq, sk, h, hk, d, causal = shape
    q, k, v, do = inputs(b, sq, sk, h, hk, d, sq + sk + 3)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    o = pipeline_mlir.attention(q, k, v, causal=causal)
    default = torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
    op.BWD_OPTIONS = bwd_default_options(d, causal) + ("prep_wide",)
    try:
        cand = torch.autograd.grad(o, (q, k, v), do)
    finally:
        op.BWD_OPTIONS = None
    errs = relative_errors(cand, reference(q, k, v, do, causal))
    print(f"attention backward, prep_wide {shape}: relative errors dq {errs[0]:.2e} "
          f"dk {errs[1]:.2e} dv {errs[2]:.2e}")
    assert max(errs) <= REL_ERROR_BOUND, errs
    assert torch.equal(cand[1], default[1]) and torch.equal(cand[2], default[2])
    assert max(relative_errors((cand[0],), (default[0].float(),))) <= 1e-2


@pytest.mark.parametrize("head_dim", [128, 256])
def test_dk_dv_are_deterministic(cache, device, head_dim):
    """dK and dV sum in registers in a fixed order (GQA included): two runs
    agree bit for bit."""
    import pipeline_mlir

    q, k, v, do = inputs(1, 700, 700, 8, 2, head_dim, 7)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    runs = [torch.autograd.grad(pipeline_mlir.attention(q, k, v, causal=True), (k, v), do)
            for _ in range(2)]
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])


def test_compile_traces_forward_and_backward(cache, device):
    import pipeline_mlir

    q, k, v, do = inputs(1, 256, 256, 4, 2, 64, 3)

    def step(q, k, v, do):
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        o = pipeline_mlir.attention(q, k, v, causal=True)
        (o.float() * do.float()).sum().backward()
        return o, q.grad, k.grad, v.grad

    eager = step(q, k, v, do)
    compiled = torch.compile(step, fullgraph=False)(q, k, v, do)
    for a, b in zip(eager, compiled):
        assert (a.float() - b.float()).abs().max().item() <= 1e-2 * a.float().abs().max().item()

    def loss(q, k, v):
        return pipeline_mlir.attention(q, k, v, causal=True).float().square().sum()

    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    torch.compile(loss, fullgraph=True)(qg, kg, vg).backward()
    qe, ke, ve = (t.detach().requires_grad_() for t in (q, k, v))
    loss(qe, ke, ve).backward()
    for a, b in ((qg.grad, qe.grad), (kg.grad, ke.grad), (vg.grad, ve.grad)):
        assert (a.float() - b.float()).abs().max().item() <= 1e-2 * b.float().abs().max().item()


class Block(torch.nn.Module):
    """Pre-norm transformer block: causal GQA attention and an MLP."""

    def __init__(self, dim=256, heads=4, kv_heads=2, head_dim=64):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.norm1 = torch.nn.LayerNorm(dim)
        self.wq = torch.nn.Linear(dim, heads * head_dim)
        self.wkv = torch.nn.Linear(dim, 2 * kv_heads * head_dim)
        self.wo = torch.nn.Linear(heads * head_dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(),
                                       torch.nn.Linear(4 * dim, dim))

    def forward(self, x, attn):
        b, s, _ = x.shape
        y = self.norm1(x)
        q = self.wq(y).view(b, s, self.heads, self.head_dim)
        k, v = self.wkv(y).view(b, s, 2, self.kv_heads, self.head_dim).unbind(2)
        x = x + self.wo(attn(q, k.contiguous(), v.contiguous()).reshape(b, s, -1))
        return x + self.mlp(self.norm2(x))


def sdpa(q, k, v):
    g = q.shape[2] // k.shape[2]
    k, v = (t.repeat_interleave(g, dim=2) for t in (k, v))
    o = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
    return o.transpose(1, 2)


def test_training_step_matches_sdpa(cache, device):
    """One SGD step of the block with our attention and with SDPA, both in
    bf16, against the same step in fp32 (SDPA's math): after the step every
    parameter of ours is at most twice as far from the fp32 one as SDPA's
    (plus 1e-3 of its size), and so are the loss and the gradients."""
    import pipeline_mlir

    torch.manual_seed(0)
    ref = Block().cuda()
    x = torch.randn(2, 300, 256, device="cuda")
    models = {"fp32": ref, "sdpa": copy.deepcopy(ref).bfloat16(),
              "ours": copy.deepcopy(ref).bfloat16()}
    attn = {"fp32": sdpa, "sdpa": sdpa,
            "ours": lambda q, k, v: pipeline_mlir.attention(q, k, v, causal=True)}
    losses, grads, params = {}, {}, {}
    for name, m in models.items():
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        xin = x if name == "fp32" else x.bfloat16()
        loss = m(xin, attn[name]).float().square().mean()
        loss.backward()
        losses[name] = loss.item()
        grads[name] = [p.grad.float().clone() for p in m.parameters()]
        opt.step()
        params[name] = [p.float() for p in m.parameters()]

    def dist(name, what):
        return [(a - r).abs().max().item() for a, r in zip(what[name], what["fp32"])]
    print(f"training step: loss fp32 {losses['fp32']:.6f} sdpa {losses['sdpa']:.6f} "
          f"ours {losses['ours']:.6f}")
    assert abs(losses["ours"] - losses["fp32"]) <= 2 * abs(losses["sdpa"] - losses["fp32"]) \
        + 1e-3 * abs(losses["fp32"])
    for what in (grads, params):
        scale = [r.abs().max().item() for r in what["fp32"]]
        for o, s, size in zip(dist("ours", what), dist("sdpa", what), scale):
            assert o <= 2 * s + 1e-3 * size, (o, s, size)
