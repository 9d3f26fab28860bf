"""Deviceless: ``ops/gemm_configs.py`` stays the one module callers import.
The table (gemm_variants), the plain time model (gemm_cost), split-K
(gemm_split_k) and the stream-K launch (gemm_stream_k) live in their own
modules; gemm_configs re-exports every public name of theirs, the same
object, so that ``gemm_configs.X`` in callers, benchmarks and docs keeps
naming the real thing."""

import pytest

from pipeline_mlir.ops import gemm_configs, gemm_cost, gemm_split_k, gemm_stream_k, gemm_variants


@pytest.mark.parametrize("module", [gemm_variants, gemm_cost, gemm_split_k, gemm_stream_k],
                         ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_gemm_configs_re_exports_every_public_name(module):
    own = [n for n in vars(module) if not n.startswith("_")
           and getattr(vars(module)[n], "__module__", module.__name__) == module.__name__
           and not isinstance(vars(module)[n], type(gemm_configs))]
    assert own, module.__name__
    missing = [n for n in own if getattr(gemm_configs, n, None) is not vars(module)[n]]
    assert not missing, f"gemm_configs does not re-export {missing} of {module.__name__}"


def test_the_pick_s_switches_are_read_where_set():
    """The switches and margins a test or fit_pick.py sets on gemm_configs
    (AUTO_*, the margins, the rule's candidate lists, TUNED) are defined
    there, where choose and its rules read them; a switch of another module
    (gemm_stream_k.AUTO_EVEN, gemm_cost.MISALIGNED_K) is set in its own."""
    for name in ("AUTO_SPLIT_K", "AUTO_STREAM_K", "AUTO_CUT", "AUTO_CLUSTER_N", "CUT_MARGIN",
                 "CUT_RULE_VARIANTS", "RULE_VARIANTS", "RULE_STREAM_K_TILES", "TUNED",
                 "STREAM_K_MARGIN", "STREAM_K_MARGIN_EVEN"):
        assert all(name not in vars(m) for m in (gemm_variants, gemm_cost, gemm_split_k,
                                                  gemm_stream_k)), name
        assert name in vars(gemm_configs), name
