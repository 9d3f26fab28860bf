"""Kernel(min_ctas_per_sm=N): PTX .minnctapersm N, validated before MLIR."""

import pytest

from pipeline_mlir.kernel import Kernel


def _ptx(**kw):
    k = Kernel("k", block_dim=160, **kw)
    with k:
        pass
    return k.to_ptx()


def test_min_ctas_per_sm_becomes_minnctapersm():
    ptx = _ptx(min_ctas_per_sm=3)
    assert ".minnctapersm 3" in ptx
    assert ".reqntid 160, 1, 1" in ptx


def test_without_it_no_directive():
    assert ".minnctapersm" not in _ptx()


@pytest.mark.parametrize("bad, error", [(0, ValueError), (33, ValueError), (-1, ValueError),
                                        (2.0, TypeError), (True, TypeError), ("3", TypeError)])
def test_bad_values_name_the_argument(bad, error):
    with pytest.raises(error, match="min_ctas_per_sm"):
        Kernel("k", block_dim=160, min_ctas_per_sm=bad)
