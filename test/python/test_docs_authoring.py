"""docs/authoring.md cannot rot: every fenced Python block in it is marked
``<!-- test -->`` (run here, without a GPU) or ``<!-- test: gpu -->`` (run
where a GPU, cuda-bindings and torch are present; compiled everywhere).
The blocks run in order in one namespace, compiled under the document's
name and line numbers (so the locations the builders record, and so the
checker's and simulator's messages, name the guide's lines), and every
Kernel they leave in the namespace must verify and lower to PTX."""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "authoring.md")
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
_MARK = re.compile(r"<!-- test(: gpu)? -->\s*$")


def blocks():
    """[(first line, marker, code)] of every ```python block, in order."""
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    out = []
    for m in _BLOCK.finditer(text):
        line = text.count("\n", 0, m.start(1)) + 1
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = _MARK.match(before)
        out.append((line, None if mark is None else (mark.group(1) or ": cpu")[2:],
                    m.group(1)))
    return out


def _code(line, src):
    # Blank lines up front keep the guide's line numbers in tracebacks and
    # in the locations of the ops the block builds.
    return compile("\n" * (line - 1) + src, DOC, "exec")


def _gpu_reason():
    try:
        import torch
        from cuda.bindings import driver  # noqa: F401
    except ImportError as e:
        return f"needs torch and cuda-bindings ({e})"
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    return None


def _run(kinds):
    from pipeline_mlir.kernel import Kernel, has_pipeline_to_cubin

    ns = {"__name__": "authoring"}
    for line, mark, src in blocks():
        code = _code(line, src)
        if mark in kinds:
            exec(code, ns)
    kernels = {n: v for n, v in ns.items() if isinstance(v, Kernel)}
    lower = has_pipeline_to_cubin()
    for name, k in kernels.items():
        k.verify()
        if lower:
            assert ".entry" in k.to_ptx(), name
    return ns, kernels


def test_every_python_block_is_marked():
    found = blocks()
    assert len(found) >= 6
    unmarked = [line for line, mark, _ in found if mark is None]
    assert not unmarked, (f"docs/authoring.md: the python blocks at lines {unmarked} "
                          "have no <!-- test --> or <!-- test: gpu --> marker")
    for line, _, src in found:  # GPU blocks at least compile here
        _code(line, src)


def test_the_guide_runs_without_a_gpu(capsys):
    ns, kernels = _run({"cpu"})
    assert {"roles", "sums", "ring_kernel"} <= set(kernels)
    # The worked kernel: the simulator passed it, the PTX has the 2-D TMA.
    assert ns["report"].ok and ns["report"][0].kernel == "tma_ring"
    printed = capsys.readouterr().out
    assert ("pipeline-sim: OK: 20 schedules, 0 deadlocks (@tma_ring, 1 CTA(s) x "
            "5 warp(s); random, seed 0)") in printed
    # The checker's message names the guide's line of the acquire.
    acquire = _line_of("pipe.producer_acquire(state)", after="def forgot_to_advance")
    # (MLIR quotes the file name: "file":line:col)
    assert re.search(rf'"?{re.escape(DOC)}"?:{acquire}:', ns["checker_message"]), \
        ns["checker_message"]
    assert "advance" in ns["checker_message"]
    # The simulator names the deadlock and the guide's lines of both waits.
    report = ns["sim_report"]
    assert report.startswith("pipeline-sim: deadlock: consumer warp 1 of CTA 0 waits on "
                             "pipeline 'ab' full barrier")
    wait = _line_of("pipe.consumer_wait(state)", after="def mismatched_trips")
    assert f"consumer warp 1 of CTA 0 at {DOC}:{wait}:" in report


def _line_of(text, after):
    with open(DOC, encoding="utf-8") as f:
        lines = f.read().splitlines()
    start = next(i for i, l in enumerate(lines) if after in l)
    return next(i for i in range(start, len(lines)) if text in lines[i]) + 1


def test_the_guide_runs_on_a_gpu():
    reason = _gpu_reason()
    if reason:
        pytest.skip(f"the guide's GPU blocks: {reason}")
    _run({"cpu", "gpu"})


def test_readme_points_to_the_guide():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        assert "docs/authoring.md" in f.read()
