"""``print(compiled_kernel)`` and ``repr`` show a one-line summary (name,
chip, params, block, cluster, shared memory, image size, content hash),
not the cubin's bytes (a ``CompiledKernel`` is a ``bytes`` subclass)."""

import os

import pytest

from pipeline_mlir.runtime.compiled import CompiledKernel

IMAGE = bytes(range(256)) * 28  # 7 KiB standing in for a cubin


def make(**over):
    meta = dict(name="copy", params=[("src", "ptr"), ("dst", "ptr"), ("n", "i32")],
                block=160, cluster=(2, 1, 1), smem=65664, chip="sm_90a")
    meta.update(over)
    return CompiledKernel(IMAGE, **meta)


def test_print_and_repr_are_the_summary():
    fn = make()
    text = str(fn)
    assert text == repr(fn)
    assert text == ("CompiledKernel('copy', sm_90a, 7168 B, params=(src: ptr, dst: ptr, "
                    f"n: i32), block=(160, 1, 1), cluster=(2, 1, 1), smem=65664, "
                    f"hash={fn.key[:12]})")
    assert "\\x" not in text and len(text) < 200


def test_the_hash_tells_images_apart():
    a, b = make(), CompiledKernel(IMAGE[:-1] + b"\1", name="copy",
                                  params=[("src", "ptr"), ("dst", "ptr"), ("n", "i32")],
                                  block=160, cluster=(2, 1, 1), smem=65664, chip="sm_90a")
    assert str(a) != str(b) and str(a).split("hash=")[0] == str(b).split("hash=")[0]


def test_no_cluster_no_chip():
    text = str(make(cluster=None, chip=None, smem=0))
    assert "cluster" not in text and text.startswith("CompiledKernel('copy', image, 7168 B,")


def test_still_the_bytes():
    fn = make()
    assert bytes(fn) == IMAGE and fn == IMAGE and len(fn) == len(IMAGE)


def test_a_compiled_kernel_prints_its_summary(capsys):
    from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, has_pipeline_to_cubin

    if not has_pipeline_to_cubin():
        pytest.skip("this build has no pipeline-to-cubin")
    k = Kernel("tiny", block_dim=32, params={"out": GlobalPtr(), "n": Int32()})
    with k:
        k.smem_alloc(256)
    fn = k.compile()
    print(fn)
    out = capsys.readouterr().out.strip()
    assert out.startswith("CompiledKernel('tiny', sm_90a, ") and "smem=256" in out
    assert f"{len(fn)} B" in out and len(out) < 200
