"""Backward builds the option tests share: ``cfg_of`` (the configuration
of a head dim, mask and option set, as the op's tables make it) and the
``ptx_of`` module fixture (each (head_dim, causal, opts) built and lowered
to PTX once per test module). A test module imports both names."""

import pytest

from pipeline_mlir.kernels import attention_bwd as ab
from pipeline_mlir.ops import attention_configs


def cfg_of(head_dim, causal, opts):
    return ab.AttentionBwdConfig(**attention_configs.bwd_variant(head_dim, causal,
                                                                 options=opts)[1])


@pytest.fixture(scope="module")
def ptx_of():
    """PTX of (head_dim, causal, opts), each built once for the module."""
    built = {}

    def get(head_dim, causal, opts):
        key = (head_dim, causal, opts)
        if key not in built:
            built[key] = ab.build(cfg_of(head_dim, causal, opts)).to_ptx()
        return built[key]
    return get
