"""References and error bounds for the row kernels (examples/row_softmax.py,
examples/rmsnorm.py): what test_gpu_rows.py and benchmarks/rows/bench_rows.py
compare with. Needs torch only.

Bounds: the kernels compute in fp32 and round once to the output type, so
each output is within half an ulp of the output type (2^-8 relative for
bf16, 2^-11 for f16) of the fp32 result, plus the fp32 math's own error:
``ex2.approx`` / ``rcp.approx`` / ``rsqrt.approx`` (2 ulp, 1 ulp, 2^-22.9)
and the sums' rounding, far below 2^-16 relative for these rows. Values
the approximate instructions flush to zero (results below 2^-126) may be 0
where fp32 keeps a subnormal, and f16 outputs below 2^-14 are subnormal:
the absolute term covers both.
"""

import torch

# dtype -> (relative bound, absolute bound) against the fp32 reference
BOUNDS = {
    torch.bfloat16: (2.0 ** -8 + 2.0 ** -16, 2.0 ** -126),
    torch.float16: (2.0 ** -11 + 2.0 ** -16, 2.0 ** -25),
    torch.float32: (2.0 ** -16, 2.0 ** -126),
}


def softmax_ref(x):
    """fp32 softmax of the rows of ``x``."""
    return torch.softmax(x.float(), dim=-1)


def rmsnorm_ref(x, w, eps):
    """fp32 RMSNorm: ``x rsqrt(mean(x^2) + eps) w``."""
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()


def beyond_bound(got, want):
    """(count, worst) for ``got`` against the fp32 ``want``: how many
    elements lie outside the bound of its dtype, and the largest error as a
    fraction of its element's bound (at most 1 when none does)."""
    rel, absolute = BOUNDS[got.dtype]
    err = (got.float() - want).abs()
    limit = rel * want.abs() + absolute
    bad = err > limit
    worst = (err / limit).max().item() if err.numel() else 0.0
    return int(bad.sum()), worst


def ulp_distance(a, b):
    """Per element, how many representable values of their (16-bit) dtype
    lie between ``a`` and ``b`` (0: bit-identical)."""
    def ordered(t):
        bits = t.contiguous().view(torch.int16).int()
        return torch.where(bits < 0, -(bits & 0x7FFF), bits)
    return (ordered(a) - ordered(b)).abs()
