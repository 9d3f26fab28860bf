"""``Kernel.compile(watchdog=True)``: the device watchdog with one argument.

The switch reaches the lowering (the PTX and the cubin carry the watchdog's
buffer, claim word and wait table, which a plain compile does not), and the
compiled kernel knows it has a watchdog: the flag travels with its launch
metadata (saved, loaded, pickled), so that loading the image checks the
buffer the launch reads its record and forensic report from
(docs/watchdog.md). The GPU side of the record and report is
test/gpu/test_gpu.py's watchdog and forensics tests.
"""

import os
import pickle
import sys

import pytest

from pipeline_mlir.kernel import has_pipeline_to_cubin
from pipeline_mlir.runtime.compiled import CompiledKernel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import pingpong  # noqa: E402

pytestmark = pytest.mark.skipif(not has_pipeline_to_cubin(),
                                reason="pipeline-to-cubin is not registered")

SYMBOLS = ("__pipeline_watchdog_buffer", "__pipeline_watchdog_claim",
           "__pipeline_watchdog_warps")


def test_the_switch_reaches_the_lowering():
    k = pingpong.build()
    ptx = k.to_ptx(watchdog=True)
    plain = k.to_ptx()
    for symbol in SYMBOLS:
        assert symbol in ptx
        assert symbol not in plain
    # Every bounded wait reads the global timer against its deadline.
    assert "%globaltimer" in ptx and "trap;" in ptx
    assert "trap;" not in plain


def test_the_compiled_kernel_knows_it_has_a_watchdog(tmp_path):
    k = pingpong.build()
    fn, plain = k.compile(watchdog=True), k.compile()
    assert fn.watchdog is True and plain.watchdog is False
    assert b"__pipeline_watchdog_buffer" in fn
    assert b"__pipeline_watchdog_buffer" not in plain
    assert fn.key != plain.key
    assert fn.metadata()["watchdog"] is True
    back = CompiledKernel.from_file(fn.save(str(tmp_path / "k.cubin")))
    assert back.watchdog is True and bytes(back) == bytes(fn)
    assert pickle.loads(pickle.dumps(fn)).watchdog is True


def test_a_wrong_switch_is_refused():
    with pytest.raises(TypeError, match="watchdog must be True or False"):
        pingpong.build().compile(watchdog="yes")
