"""The stage-balance check (pipeline-verify-protocol check 11) on every
kernel of the project: no false positive.

Every example (each ``examples/*.py`` with a ``build()``, plus the variants
the other tests build: the copy ring's schedules, the GEMMs' cluster, 2-CTA
and scheduler variants, attention's causal, d256 and non-ping-pong ones), the CuTe DSL and FlashAttention skeletons and the
GPU suite's kernels (builder-made and written in the dialect) pass the
checker with no error, and the kernels whose loops the check can count are
proved balanced: it says nothing about them even when asked to remark on
what it cannot compare. Planted twins of a ping-pong kernel built here with
the kernel layer (a consumer loop one stage short, a consumer loop over half
the range, a consumer role behind a kernel-argument condition) fail at the
Python line of the consumer's release, naming both counts.
"""

import glob
import importlib
import os
import sys
from dataclasses import replace

import mlir.ir as ir
import mlir.passmanager as passmanager
import pytest

import pipeline_mlir

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
EXAMPLES_DIR = os.path.join(ROOT, "examples")
GPU_DIR = os.path.join(ROOT, "test", "gpu")
for d in (EXAMPLES_DIR, GPU_DIR, HERE):
    if d not in sys.path:
        sys.path.insert(0, d)


def _example_modules():
    """examples/*.py that build a kernel with ``build()`` and no argument
    (their own, or the library kernel they script)."""
    names = []
    for path in sorted(glob.glob(os.path.join(EXAMPLES_DIR, "*.py"))):
        stem = os.path.splitext(os.path.basename(path))[0]
        if stem.startswith("_") or stem.endswith(("_run", "_host")):
            continue
        with open(path) as f:
            text = f.read()
            # a kernel of its own, or the script of a library kernel
            if "\ndef build(" in text or "from pipeline_mlir.kernels import" in text:
                names.append(stem)
    return names


def _kernels():
    """{case: zero-argument function returning the module's text}."""
    from _example_checks import EXAMPLES

    cases = {}
    for stem in _example_modules():
        cases[f"examples/{stem}"] = (
            lambda stem=stem: str(importlib.import_module(stem).build().module))
    for name, build in EXAMPLES.items():
        cases[f"example variant {name}"] = lambda build=build: str(build().module)

    def hopper(**kw):
        import hopper_gemm
        return str(hopper_gemm.build(replace(hopper_gemm.GemmConfig(), **kw)).module)
    cases["hopper_gemm cluster_m=2"] = lambda: hopper(cluster_m=2)
    cases["hopper_gemm no setmaxnreg, one consumer"] = lambda: hopper(
        setmaxnreg=False, consumer_warpgroups=1)

    def attention(**kw):
        import attention_fwd
        return str(attention_fwd.build(replace(attention_fwd.AttentionConfig(), **kw)).module)
    for name, kw in [("causal", {"causal": True}), ("d256", {"head_dim": 256}),
                     ("no pingpong", {"pingpong": False}),
                     ("no intra overlap", {"intra_overlap": False})]:
        cases[f"attention_fwd {name}"] = lambda kw=kw: attention(**kw)

    from test_blackwell_gemm import VARIANTS

    def blackwell(variant):
        import blackwell_gemm
        cfg = replace(blackwell_gemm.GemmConfig(), **VARIANTS[variant])
        return str(blackwell_gemm.build(cfg).module)
    for variant in VARIANTS:
        cases[f"blackwell_gemm {variant}"] = lambda v=variant: blackwell(v)

    from skeletons import cute_blackwell_gemm, cute_hopper_gemm, fa3_hopper_fwd
    cases["skeleton cute_hopper_gemm"] = lambda: str(cute_hopper_gemm.build().module)
    cases["skeleton cute_blackwell_gemm"] = lambda: str(cute_blackwell_gemm.build().module)
    cases["skeleton cute_blackwell_gemm pair"] = lambda: str(
        cute_blackwell_gemm.build(cta_pair=True).module)
    cases["skeleton fa3_hopper_fwd"] = lambda: str(fa3_hopper_fwd.build().module)

    import builder_kernels as bk
    for kind in sorted(bk.SPECS):
        cases[f"gpu builder {kind}"] = lambda kind=kind: str(bk.build(kind).module)
    import dialect_kernels as dk
    for name, text in [("pipeline_async", dk.pipeline_async("k")),
                       ("pipeline_cp_async", dk.pipeline_cp_async("k")),
                       ("named_barrier_copy", dk.named_barrier_copy("k")),
                       ("pipeline_order", dk.pipeline_order("k")),
                       ("tma_async", dk.tma_async("k")),
                       ("tma_store", dk.tma_store("k"))]:
        cases[f"gpu dialect {name}"] = lambda text=text: text
    return cases


KERNELS = _kernels()

# Causal attention's k-block loops end at the diagonal, a bound each role
# computes from the tile loop's variable: the counts are sums over the tiles
#, and equal sums are proved equal like every other count.
TRIANGULAR = set()


def check(text, module=None):
    """(errors, remarks) of pipeline-verify-protocol with remarks on, on the
    module ``text`` parses to (or on ``module``, keeping its locations)."""
    errors, remarks = [], []
    ctx = module.context if module is not None else pipeline_mlir.make_context()
    with ctx:
        def handler(d):
            sink = errors if d.severity == ir.DiagnosticSeverity.ERROR else remarks
            if d.severity in (ir.DiagnosticSeverity.ERROR, ir.DiagnosticSeverity.REMARK):
                sink.append(f"{d.location}: {d.message}")
            return True
        attached = ctx.attach_diagnostic_handler(handler)
        module = ir.Module.parse(text) if module is None else module
        pm = passmanager.PassManager.parse(
            "builtin.module(pipeline-verify-protocol{stage-balance-remarks=true})")
        try:
            pm.run(module.operation.clone())
        except ir.MLIRError as e:  # the errors go to the exception
            errors.extend(f"{d.location}: {d.message}" for d in e.error_diagnostics)
        finally:
            attached.detach()
    return errors, remarks


@pytest.mark.parametrize("case", sorted(KERNELS))
def test_no_false_positive(case):
    text = KERNELS[case]()
    errors, remarks = check(text)
    assert errors == []
    if "scf.while" in text:
        # A persistent loop over cluster-launch-control responses: its trip
        # count is the scheduler's, so the roles are not compared (and the
        # remark says so).
        assert remarks and all("'scf.while' whose trip count is not known" in r
                               for r in remarks), remarks
    elif case in TRIANGULAR:
        assert remarks and all("a loop whose bounds depend on the thread, an enclosing "
                               "loop's variable or memory" in r for r in remarks), remarks
    else:
        # Every other kernel is proved balanced.
        assert remarks == []


def _pingpong(consumer_loop, guard=False):
    """Warp 0 produces ``n`` stages; warp 1 consumes over
    ``consumer_loop(k, n)`` (a ``k.range``), behind ``flag != 0`` when
    ``guard``. Returns (kernel, line of the consumer's release)."""
    from pipeline_mlir.kernel import Int32, Kernel
    from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync,
                                        PipelineUserType, make_pipeline_state)
    import inspect

    k = Kernel("pingpong_balance", block_dim=64, params={"n": Int32(), "flag": Int32()})
    with k:
        n, flag = k.args
        one = CooperativeGroup(Agent.Thread, 32)
        pipe = PipelineAsync.create(num_stages=2, producer_group=one, consumer_group=one,
                                    barrier_storage=k.alloc_barriers(4), name="ab")
        warp = k.warp_idx()
        with k.if_(warp == 0):
            state = make_pipeline_state(PipelineUserType.Producer, 2)
            for _, _ in k.range(n, carry=[state]):
                pipe.producer_acquire(state)
                pipe.producer_commit(state)
                state.advance()
            pipe.producer_tail(state)
        with k.if_(warp == 1):
            def consume():
                state = make_pipeline_state(PipelineUserType.Consumer, 2)
                for _, _ in consumer_loop(k, n, state):
                    pipe.consumer_wait(state)
                    pipe.consumer_release(state); line = inspect.currentframe().f_lineno
                    state.advance()
                return line
            if guard:
                with k.if_(flag != 0):
                    line = consume()
            else:
                line = consume()
    return k, line


@pytest.mark.parametrize("name,loop,guard,counts", [
    ("off by one", lambda k, n, s: k.range(n - 1, carry=[s]), False,
     "commits n stages, the consumer role (one warp) releases n - 1 "
     "(for n = 1: 1 against 0)"),
    ("half the range", lambda k, n, s: k.range(0, n, 2, carry=[s]), False,
     "releases ceildiv(n, 2) (for n = 2: 2 against 1)"),
    ("unshared condition", lambda k, n, s: k.range(n, carry=[s]), True,
     "releases [flag ne 0] * n (for flag = 0, n = 1: 1 against 0)"),
])
def test_planted_imbalance_is_reported_at_the_python_line(name, loop, guard, counts):
    k, line = _pingpong(loop, guard)
    errors, _ = check(None, module=k.module)
    assert len(errors) == 1, errors
    assert f"test_stage_balance.py\":{line}:" in errors[0]
    assert "pipeline 'ab': the producer role (one warp) " in errors[0]
    assert counts in errors[0]


@pytest.mark.parametrize("loop", [
    lambda k, n, s: k.range(n, carry=[s]),
    lambda k, n, s: k.range(1, n + 1, carry=[s]),
    lambda k, n, s: k.range(0, n * 2, 2, carry=[s]),
])
def test_twins_are_silent(loop):
    k, _ = _pingpong(loop)
    assert check(None, module=k.module) == ([], [])
