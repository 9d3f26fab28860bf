"""The GEMM pick's rules as they were before a plain pick could become a
tile of the cluster along N (``gemm_configs.AUTO_CLUSTER_N_ANY``). The
older pick tests pin those rules; test_gemm_cluster_n_tiles.py and
test_gemm_cluster_2x2.py pin the newer rule and what it changes. A test
module imports ``before_cluster_n_any`` (an autouse fixture) to run each
of its tests under the older rules."""

import pytest

from pipeline_mlir.ops import gemm_configs


@pytest.fixture(autouse=True)
def before_cluster_n_any():
    """``AUTO_CLUSTER_N_ANY`` off for the test. Set outside ``monkeypatch``,
    whose ``undo`` the tests call."""
    saved, gemm_configs.AUTO_CLUSTER_N_ANY = gemm_configs.AUTO_CLUSTER_N_ANY, False
    yield
    gemm_configs.AUTO_CLUSTER_N_ANY = saved
