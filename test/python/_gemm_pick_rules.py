"""The GEMM pick's rules as they were before a plain pick could become a
tile of the cluster along N (``gemm_configs.AUTO_CLUSTER_N_ANY``), and
before the clusters along N and 2x2 ran stream-K or replaced a stream-K
pick (``AUTO_CLUSTER_STREAM_K``, ``AUTO_CLUSTER_OVER_STREAM_K``). The
older pick tests pin those rules; test_gemm_cluster_n_tiles.py and
test_gemm_cluster_2x2.py pin the newer rule and what it changes,
test_gemm_cluster_streamk.py the newest. A test
module imports ``before_cluster_n_any`` (an autouse fixture) to run each
of its tests under the older rules."""

import pytest

from pipeline_mlir.ops import gemm_configs


@pytest.fixture(autouse=True)
def before_cluster_n_any():
    """``AUTO_CLUSTER_N_ANY`` and the cluster stream-K rules off for the
    test. Set outside ``monkeypatch``, whose ``undo`` the tests call."""
    names = ("AUTO_CLUSTER_N_ANY", "AUTO_CLUSTER_STREAM_K", "AUTO_CLUSTER_OVER_STREAM_K")
    saved = {name: getattr(gemm_configs, name) for name in names}
    for name in names:
        setattr(gemm_configs, name, False)
    yield
    for name, value in saved.items():
        setattr(gemm_configs, name, value)
