"""The row kernels on the GPU: examples/row_softmax.py and examples/rmsnorm.py
(built on pipeline_mlir.kernel.rows) against fp32 references, on the row
lengths test/gpu/builders.py's build_rows compiled (a warp per row and a CTA
per row, rows that are multiples of a chunk and ragged ones, 16-byte and
scalar accesses, bf16 / f16 / f32). Each launch writes into a buffer one row
longer than the output, whose last row must come back untouched (a masked
tail that writes past the row would show there).

    cd .gpu-bundle && python3 -m pytest -q test_gpu_rows.py

Bounds: rows_reference.py (half an ulp of the output type around the fp32
result, plus the fp32 math's error); the softmax is also compared with
``torch.softmax`` in the tensor's own type, within 1 ulp.
"""

import os

import pytest

from gpu_child import bundle_dir, load_manifest

MANIFEST = load_manifest() or {"kernels": []}
ROWS = {e["name"]: e for e in MANIFEST["kernels"] if e.get("check") in ("row_softmax", "rmsnorm")}
SENTINEL = 7.0


def entries(check):
    return [n for n, e in ROWS.items() if e["check"] == check] or [
        pytest.param(None, marks=pytest.mark.skip(reason=f"no '{check}' kernel in the "
                                                  "manifest (scripts/build-gpu-bundle.py)"))]


def _load(name):
    torch = pytest.importorskip("torch", reason="the row kernels run on torch tensors")
    e = ROWS[name]
    with open(os.path.join(bundle_dir(), e["image"]), "rb") as f:
        image = f.read()
    return torch, e, image


def row_counts(meta):
    """Row counts: one row, a few (fewer than a CTA's rows), and more than
    one resident wave of CTAs (the grid-stride loop's second trip),
    bounded to 2^26 elements."""
    return [1, 3, 37, min(20000, (1 << 26) // meta["n"])]


def _padded_out(torch, m, n, dtype):
    buf = torch.full((m + 1, n), SENTINEL, dtype=dtype, device="cuda")
    return buf, buf[:m]


@pytest.mark.parametrize("name", entries("row_softmax"))
def test_row_softmax_matches_torch(name, device):
    torch, e, image = _load(name)
    from row_softmax import RowSoftmax
    import rows_reference as ref

    meta = e["rows"]
    softmax = RowSoftmax(image, meta, e["launch"])
    dtype = getattr(torch, {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}[meta["dtype"]])
    gen = torch.Generator(device="cuda").manual_seed(meta["n"])
    for m in row_counts(meta):
        x = torch.randn(m, meta["n"], device="cuda", generator=gen, dtype=torch.float32)
        x = (x * 3).to(dtype)                      # a spread of magnitudes
        buf, out = _padded_out(torch, m, meta["n"], dtype)
        y = softmax(x, out=out)
        torch.cuda.synchronize()
        assert y.data_ptr() == out.data_ptr()
        assert (buf[m] == SENTINEL).all(), f"m={m}: the kernel wrote past the last row"
        bad, worst = ref.beyond_bound(y, ref.softmax_ref(x))
        assert bad == 0, (f"m={m}: {bad} elements beyond the bound (worst {worst:.3g} of "
                          "the bound)")
        line = f"{name} m={m}: worst error {worst:.3g} of its bound"
        if dtype != torch.float32:
            ulps = ref.ulp_distance(y, torch.softmax(x, -1))
            assert ulps.max().item() <= 1, f"m={m}: {ulps.max().item()} ulps from torch.softmax"
            line += f", {(ulps > 0).float().mean().item():.2%} differ from torch by 1 ulp"
        sums = y.float().sum(-1)
        assert ((sums - 1).abs() < 0.02).all(), f"m={m}: row sums {sums.min()}..{sums.max()}"
        print(line)


@pytest.mark.parametrize("name", entries("rmsnorm"))
def test_rmsnorm_matches_fp32_reference(name, device):
    torch, e, image = _load(name)
    from rmsnorm import RmsNorm
    import rows_reference as ref

    meta = e["rows"]
    norm = RmsNorm(image, meta, e["launch"])
    dtype = getattr(torch, {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}[meta["dtype"]])
    gen = torch.Generator(device="cuda").manual_seed(meta["n"] + 1)
    w = (1 + 0.5 * torch.randn(meta["n"], device="cuda", generator=gen)).to(dtype)
    for m in row_counts(meta):
        for eps in (1e-6, 1e-2):
            x = torch.randn(m, meta["n"], device="cuda", generator=gen).to(dtype)
            buf, out = _padded_out(torch, m, meta["n"], dtype)
            y = norm(x, w, eps, out=out)
            torch.cuda.synchronize()
            assert (buf[m] == SENTINEL).all(), f"m={m}: the kernel wrote past the last row"
            bad, worst = ref.beyond_bound(y, ref.rmsnorm_ref(x, w, eps))
            assert bad == 0, (f"m={m} eps={eps}: {bad} elements beyond the bound (worst "
                              f"{worst:.3g} of the bound)")
        line = f"{name} m={m}: worst error {worst:.3g} of its bound"
        if dtype != torch.float32 and hasattr(torch.nn.functional, "rms_norm"):
            theirs = torch.nn.functional.rms_norm(x, (meta["n"],), w, eps)
            ulps = ref.ulp_distance(y, theirs)
            line += f"; vs F.rms_norm: max {ulps.max().item()} ulp, " \
                    f"{(ulps > 0).float().mean().item():.2%} differ"
        print(line)


@pytest.mark.parametrize("name", entries("row_softmax")[:1])
def test_row_launcher_refuses_a_wrong_row_length(name, device):
    torch, e, image = _load(name)
    from row_softmax import RowSoftmax

    softmax = RowSoftmax(image, e["rows"], e["launch"])
    x = torch.zeros(4, e["rows"]["n"] + 8, device="cuda",
                    dtype={"bf16": torch.bfloat16, "f16": torch.float16,
                           "f32": torch.float32}[e["rows"]["dtype"]])
    with pytest.raises(ValueError, match="built for rows of"):
        softmax(x)
