"""Asynchronous reads and named barriers on the GEMMs: releases after the last
asynchronous read, and named barrier ids / counts.

The Hopper and Blackwell GEMMs check clean (checker and simulator); twins
planted in the Hopper GEMM's printed IR are caught by both tools, with
messages naming the release and the in-flight wgmma. The NamedBarrier
builder takes free ids when none is given.
"""

import os
import re
import sys

import pytest

from _example_checks import EXAMPLES_DIR, verify_protocol

if EXAMPLES_DIR not in sys.path:
    sys.path.insert(0, EXAMPLES_DIR)

import blackwell_gemm  # noqa: E402
import hopper_gemm  # noqa: E402

from pipeline_mlir.kernel import Kernel  # noqa: E402
from pipeline_mlir.pipeline import NamedBarrier, PipelineError  # noqa: E402

HOPPER_ARGS = ["4=256", "5=256", "6=256"]
# The mainloop's `wait_group(1)` and the release of the stage one behind.
MAINLOOP = re.compile(r"( +)nvvm\.wgmma\.wait\.group\.sync\.aligned 1\n"
                      r"( +pipeline\.consumer\.release [^\n]*\n)")


def hopper_ir():
    return str(hopper_gemm.build().module)


def edit(text, old, new):
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def simulate(text, args, capsys):
    from pipeline_mlir.sim.cli import main as sim_main
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"async_reads_{os.getpid()}.mlir")
    with open(path, "w") as f:
        f.write(text)
    try:
        rc = sim_main([path, *sum((["--arg", a] for a in args), []), "--schedules", "2"])
    finally:
        os.remove(path)
    return rc, capsys.readouterr().out


# -- the GEMMs are clean -------------------------------------------------------

def test_hopper_gemm_checks_clean_and_its_release_order_is_the_one_checked():
    text = hopper_ir()
    assert verify_protocol(text) == []
    # The order the check is about: the mainloop waits for all but the newest
    # group, then releases the stage one behind.
    assert len(MAINLOOP.findall(text)) == 1


def test_blackwell_gemm_checks_clean():
    for cfg in (blackwell_gemm.GemmConfig(), blackwell_gemm.GemmConfig(scheduler="static")):
        assert verify_protocol(str(blackwell_gemm.build(cfg).module)) == []


# -- planted twins in the Hopper GEMM -----------------------------------------

def plant(text, repl):
    new, n = MAINLOOP.subn(repl, text)
    assert n == 1
    return new


def wait_group_too_large(text):
    return plant(text, r"\1nvvm.wgmma.wait.group.sync.aligned 2\n\2")


def release_before_wait(text):
    return plant(text, r"\2\1nvvm.wgmma.wait.group.sync.aligned 1\n")


@pytest.mark.parametrize("plant, newer", [(wait_group_too_large, 1), (release_before_wait, 1)])
def test_checker_catches_release_with_wgmma_in_flight(plant, newer):
    diags = verify_protocol(plant(hopper_ir()))
    assert len(diags) == 1, diags
    msg = diags[0]
    assert msg.startswith("pipeline.consumer.release hands back a stage of pipeline 'ab' "
                          "while nvvm.wgmma.mma_async may still read it asynchronously: its "
                          "wgmma group is committed but not retired; add "
                          f"nvvm.wgmma.wait.group.sync.aligned N with N <= {newer}"), msg
    assert "note: the asynchronous read of that stage, still in flight at the release" in msg


@pytest.mark.parametrize("plant", [wait_group_too_large, release_before_wait])
def test_simulator_catches_release_with_wgmma_in_flight(plant, capsys):
    rc, out = simulate(plant(hopper_ir()), HOPPER_ARGS, capsys)
    assert rc == 1, out
    assert re.search(r"pipeline-sim: asynchronous read in flight: consumer warp \d+ of CTA 0 runs "
                     r"pipeline.consumer.release on stage \d of pipeline 'ab' at \S+ while "
                     r"nvvm.wgmma.mma_async at \S+ may still read that stage asynchronously: its "
                     r"wgmma group is committed but not retired", out), out


def test_simulator_passes_the_unplanted_twin(capsys):
    rc, out = simulate(hopper_ir(), HOPPER_ARGS, capsys)
    assert rc == 0, out
    assert "async-read" not in out


def test_checker_catches_epilogue_barrier_shared_by_both_warpgroups():
    # Drop the per-warpgroup index: both consumer warpgroups sync id 1 with
    # a count of one warpgroup.
    text = re.sub(r"(named_barrier.sync id = 1, threads = 128) index %\d+", r"\1", hopper_ir())
    diags = verify_protocol(text)
    assert diags, "no error"
    assert all("named barrier id 1 counts 128 threads but 256 threads (warps 4-11) reach it"
               in d for d in diags), diags


# -- NamedBarrier ids ------------------------------------------------------------

def test_named_barrier_takes_free_ids_from_the_top():
    with Kernel("ids", block_dim=256):
        explicit = NamedBarrier(1, 128)
        a = NamedBarrier(num_threads=128)
        b = NamedBarrier(None, 256)
        pair = NamedBarrier(num_threads=128, num_ids=2)
        assert (explicit.barrier_id, a.barrier_id, b.barrier_id, pair.barrier_id) == (1, 15, 14, 12)
        # An explicit id that an automatic barrier already took: refused.
        with pytest.raises(PipelineError, match=r"barrier_id 15 was already assigned to an "
                                                r"automatic NamedBarrier\(num_threads=128\)"):
            NamedBarrier(15, 128)
        # The same explicit id twice may be one barrier seen from two roles.
        assert NamedBarrier(1, 128).barrier_id == 1
    # A new kernel starts with every id free.
    with Kernel("ids2", block_dim=128):
        assert NamedBarrier(num_threads=128).barrier_id == 15


def test_named_barrier_without_kernel_needs_an_id():
    with pytest.raises(PipelineError, match="barrier_id=None assigns a free id of the kernel"):
        NamedBarrier(num_threads=128)


def test_named_barrier_ids_run_out():
    with Kernel("full", block_dim=128):
        for _ in range(15):
            NamedBarrier(num_threads=128)
        with pytest.raises(PipelineError, match="no 1 free consecutive barrier id"):
            NamedBarrier(num_threads=128)


def test_automatic_ids_check_clean_in_a_kernel():
    """Two warpgroups, each with its own automatic barrier: distinct ids,
    and the checker agrees with the counts."""
    k = Kernel("auto_ids", block_dim=256)
    with k:
        warpgroup = k.warp_idx() // 4
        with k.if_(warpgroup == 0) as role:
            NamedBarrier(num_threads=128).sync()
        with role.else_():
            NamedBarrier(num_threads=128).sync()
    text = str(k.module)
    assert "id = 15, threads = 128" in text and "id = 14, threads = 128" in text
    assert verify_protocol(text) == []


# -- a planted twin in the Blackwell GEMM ----------------------------------------

BW_ONE_CTA_ARGS = ["3=256", "4=512", "5=192"]


def blackwell_plain_release():
    """The operand ring as tma_async instead of tma_umma: its release becomes
    a plain mbarrier arrive while the MMAs issued on the stage run on."""
    text = str(blackwell_gemm.build(blackwell_gemm.GemmConfig(scheduler="static")).module)
    assert text.count("<tma_umma, stages = 4") > 0
    return text.replace("<tma_umma, stages = 4", "<tma_async, stages = 4")


def test_checker_catches_plain_release_after_tcgen05_mma():
    diags = verify_protocol(blackwell_plain_release())
    assert len(diags) == 1, diags
    assert diags[0].startswith(
        "pipeline.consumer.release hands back a stage of pipeline 'ab' while nvvm.tcgen05.mma "
        "may still read it asynchronously: the tcgen05.mma is not covered by a tcgen05.commit "
        "and this op is a plain mbarrier arrive"), diags[0]


def test_simulator_catches_plain_release_after_tcgen05_mma(capsys):
    rc, out = simulate(blackwell_plain_release(), BW_ONE_CTA_ARGS, capsys)
    assert rc == 1, out
    assert re.search(r"asynchronous read in flight: consumer warp \d+ of CTA 0 runs "
                     r"pipeline.consumer.release on stage \d of pipeline 'ab' at \S+ while "
                     r"nvvm.tcgen05.mma at \S+ may still read that stage asynchronously: no "
                     r"tcgen05.commit covers the tcgen05.mma", out), out


# -- named barriers in the FlashAttention-3 skeleton -----------------------------

def test_fa3_epilogue_barrier_counts_both_mma_warpgroups():
    from skeletons import fa3_hopper_fwd
    text = str(fa3_hopper_fwd.build().module)
    assert verify_protocol(text) == []
    # Planted: the count of one warpgroup, but both MMA warpgroups sync it.
    diags = verify_protocol(edit(text, "named_barrier.sync id = 2, threads = 256",
                                 "named_barrier.sync id = 2, threads = 128"))
    assert diags == ["named barrier id 2 counts 128 threads but 256 threads (warps 4-11) "
                     "reach it; num_threads must equal the threads of the warps that reach it"]
    # Planted: id 0, next to the block-wide sync that ends pipeline.create.
    diags = verify_protocol(edit(text, "named_barrier.sync id = 2,", "named_barrier.sync id = 0,"))
    assert any("uses barrier id 0, which" in d and "the two collide" in d for d in diags), diags
