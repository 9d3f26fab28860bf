"""The GPU soak's plan, checked where no GPU is (test/gpu/soak.py needs
torch to import, so its calls are read from its source): the variants it
forces exist in the GEMM's tables and are what the pick takes on the
class of shapes they stand for, so the long run keeps calling the code
paths users hit."""

import ast
import os

from pipeline_mlir.ops import gemm_configs

SOAK = os.path.join(os.path.dirname(__file__), "..", "gpu", "soak.py")


def _forced_stream_k():
    """(m, n, k, dtype, variant) of every StreamKGemm(...) in make_ops."""
    tree = ast.parse(open(SOAK).read())
    consts = {t.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
              for t in node.targets
              if isinstance(t, ast.Name) and isinstance(node.value, ast.Constant)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "StreamKGemm":
            m, n, k, dtype = (a.value for a in node.args[1:5])
            v = node.args[5]
            out.append((m, n, k, dtype, consts.get(getattr(v, "id", None))))
    return out


def test_the_soak_forces_the_shared_fixup_the_pick_takes_on_tiny_long_k_outputs():
    forced = [f for f in _forced_stream_k() if f[4] is not None]
    assert {f[3] for f in forced} == {"float16", "bfloat16"}, forced
    for m, n, k, dtype, variant in forced:
        assert variant in gemm_configs.STREAM_K_SHARE1_VARIANTS, variant
        picked = gemm_configs.choose(m, n, k, {"float16": "f16", "bfloat16": "bf16"}[dtype])
        assert picked == variant, (m, n, k, dtype, picked)
