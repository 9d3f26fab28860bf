"""Tensor-core and proxy fences the checker decides statically:
``wgmma.fence`` before a warpgroup's first MMA, ``tcgen05.wait::ld`` before
a TMEM load's registers are read, the proxy fence before a CLC response is
released, and the tcgen05 fence / CTA barrier / fence between a TMEM alloc
or dealloc and other warps' tcgen05 ops. The Hopper and Blackwell GEMMs
(built through the Python API) check clean; each bug is planted by dropping
the one line that prevents it from their printed IR (test_planted_bugs.py
style).
"""

import sys

from _example_checks import EXAMPLES_DIR, verify_protocol

if EXAMPLES_DIR not in sys.path:
    sys.path.insert(0, EXAMPLES_DIR)

import blackwell_gemm  # noqa: E402
import hopper_gemm  # noqa: E402


def drop(text, needle, which=-1):
    """Drop one line holding ``needle`` (the last by default)."""
    lines = text.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if needle in line]
    assert hits, needle
    del lines[hits[which]]
    return "".join(lines)


def hopper():
    return str(hopper_gemm.build().module)


def blackwell():
    return str(blackwell_gemm.build().module)


def test_the_gemms_are_clean():
    assert verify_protocol(hopper()) == []
    assert verify_protocol(blackwell()) == []


def test_wgmma_without_any_fence():
    text = hopper()
    while "nvvm.wgmma.fence.aligned" in text:
        text = drop(text, "nvvm.wgmma.fence.aligned")
    (msg,) = verify_protocol(text)
    assert msg.startswith("wgmma fence: this wgmma.mma_async may be the first of warps "
                          "4-11 with no wgmma.fence before it")
    assert "call wgmma.fence()" in msg


def test_tmem_registers_read_before_wait_load():
    # Two findings: the registers read before the load completed, and the
    # accumulator stage handed back to the MMA warp with the load in flight.
    msg, release = verify_protocol(drop(blackwell(), "nvvm.tcgen05.wait <load>"))
    assert msg.startswith("tcgen05 wait: this op reads the registers of a tcgen05.ld "
                          "with no tcgen05.wait::ld in between")
    assert "call tcgen05.wait_load() after load_32x32b()" in msg
    assert "note: the tcgen05.ld" in msg
    assert release.startswith("tcgen05 wait: this consumer.release hands the tensor "
                              "memory of pipeline 'acc' back while a tcgen05.ld of it may "
                              "still be in flight"), release


def test_tmem_dealloc_without_the_cta_barrier():
    (msg,) = verify_protocol(drop(blackwell(), "nvvm.barrier0"))
    assert msg.startswith("TMEM dealloc: this tcgen05.dealloc frees tensor memory that "
                          "other warps' tcgen05 ops use, with no CTA barrier between them")
    assert "note: a tcgen05 op of another warp" in msg


def test_tmem_dealloc_without_fence_after_thread_sync():
    (msg,) = verify_protocol(drop(blackwell(), "nvvm.tcgen05.fence <after>"))
    assert msg.startswith("tcgen05 fence: no tcgen05.fence::after_thread_sync between the "
                          "CTA barrier")


def test_tmem_dealloc_without_any_fence_before_thread_sync():
    text = blackwell()
    # The epilogue's (before its release) and the kernel's (before the
    # barrier): either one orders the loads.
    assert verify_protocol(drop(text, "nvvm.tcgen05.fence <before>")) == []
    text = drop(drop(text, "nvvm.tcgen05.fence <before>"), "nvvm.tcgen05.fence <before>")
    msgs = verify_protocol(text)
    assert any(m.startswith("tcgen05 fence: the CTA barrier orders this tcgen05.dealloc "
                            "after other warps' tcgen05 ops, but no "
                            "tcgen05.fence::before_thread_sync follows") for m in msgs)


def test_clc_response_released_without_proxy_fence():
    """The CLC scheduler's fence (``ClcTileScheduler.next_unit``) dropped
    from one role's tile loop; the epilogue's fence (before its TMA store)
    is the first one and stays."""
    text = blackwell()
    fence = "nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>"
    (msg,) = verify_protocol(drop(text, fence))
    assert msg.startswith("proxy fence: the response of pipeline 'clc' was read with an "
                          "ordinary load")
    assert "call fence_view_async_shared() after reading the response" in msg
    assert "note: the response read here" in msg


def test_tmem_alloc_published_without_fence_before_thread_sync():
    (msg,) = verify_protocol(drop(blackwell(), "nvvm.tcgen05.fence <before>", which=0))
    assert msg.startswith("tcgen05 fence: no tcgen05.fence::before_thread_sync between "
                          "this tcgen05.alloc and the CTA barrier that publishes it")
    assert "note: a tcgen05 op of another warp" in msg
