"""``pipeline_mlir.attention`` traced forward and backward with fake
tensors, no GPU and no MLIR needed (torch is; skipped without it): the
forward op and the backward op (``torch.ops.pipeline_mlir.attention`` and
``attention_backward``) each appear once in the graph with the shapes
of their fake implementations, and ``lse`` carries no gradient.
"""

import pytest

torch = pytest.importorskip("torch", reason="the op is a torch custom op")


def test_forward_and_backward_trace_with_fake_tensors():
    from torch.fx.experimental.proxy_tensor import make_fx

    import pipeline_mlir

    def step(q, k, v, do):
        o, lse = pipeline_mlir.attention(q, k, v, causal=True, return_lse=True)
        dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
        return o, lse, dq, dk, dv

    q = torch.empty(2, 100, 4, 64, dtype=torch.bfloat16, device="meta", requires_grad=True)
    k, v = (torch.empty(2, 130, 2, 64, dtype=torch.bfloat16, device="meta",
                        requires_grad=True) for _ in range(2))
    do = torch.empty(2, 100, 4, 64, dtype=torch.bfloat16, device="meta")
    gm = make_fx(step, tracing_mode="fake")(q, k, v, do)
    calls = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert calls.count(torch.ops.pipeline_mlir.attention.default) == 1
    assert calls.count(torch.ops.pipeline_mlir.attention_backward.default) == 1
    out = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
    shapes = [tuple(x.meta["val"].shape) for x in out]
    assert shapes == [(2, 100, 4, 64), (2, 4, 100), (2, 100, 4, 64), (2, 130, 2, 64),
                      (2, 130, 2, 64)]


def test_lse_has_no_gradient():
    import pipeline_mlir

    # Meta tensors run the ops' fake implementations.
    q = torch.empty(1, 8, 2, 64, dtype=torch.bfloat16, device="meta", requires_grad=True)
    k = torch.empty(1, 8, 1, 64, dtype=torch.bfloat16, device="meta", requires_grad=True)
    o, lse = pipeline_mlir.attention(q, k, k, return_lse=True)
    assert o.requires_grad and not lse.requires_grad
    assert o.shape == q.shape and lse.shape == (1, 2, 8)
