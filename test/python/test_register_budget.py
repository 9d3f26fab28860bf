"""Warpgroup registers over the register file, refused by ``Kernel.compile()``.

The rule lives in the protocol checker (``pipeline-verify-protocol``,
RegisterBudgetChecks.cpp), which ``compile()`` and ``to_ptx()`` run; its
message reaches the user in the Python API's words.

``setmaxnreg.inc`` waits until the registers it asks for are free; when the
warpgroups of a CTA together ask for more than the 65,536 registers of an
SM, nobody gives them back and the kernel hangs (four consumer warpgroups
at 160 registers and a producer: 128 x (4 x 160 + 40) = 87,040). The kernel
knows its warpgroups' ``set_max_registers`` from its IR: the ``scf.if``
conditions around each call, on thread and warp ids, say which warpgroups
run it (role splits written with ``if_`` / ``else_``, ``warp // 4 == i`` in
a Python loop, ``warpgroup >= 1``). ``compile()`` and ``to_ptx()`` refuse
the kernel at the user's line, naming each warpgroup's count, the register
file and the count that fits. Each bug has its correct twin, and every
example kernel still passes.
"""

import inspect
import os
import sys
from dataclasses import replace

import pytest

from pipeline_mlir.diagnostics import CompileError
from pipeline_mlir.kernel import Int32, Kernel
from pipeline_mlir.kernel.warpgroup import set_max_registers


EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_MLIR_CACHE_DIR", str(tmp_path))


def _roles(consumers, consumer_registers, producer_registers=40, style="if_else"):
    """Warpgroup 0 lowers its registers, warpgroups 1..consumers raise
    theirs. Returns (kernel, line of the consumers' set_max_registers)."""
    k = Kernel("budget", block_dim=128 * (1 + consumers))
    line = None
    with k:
        warpgroup = k.warp_idx() // 4
        if style == "if_else":
            with k.if_(warpgroup == 0) as role:
                set_max_registers(producer_registers, increase=False)
            with role.else_():
                set_max_registers(consumer_registers, increase=True); line = inspect.currentframe().f_lineno
        else:  # one role per consumer warpgroup, built in a Python loop
            with k.if_(warpgroup == 0):
                set_max_registers(producer_registers, increase=False)
            for i in range(1, consumers + 1):
                with k.if_(warpgroup == i):
                    set_max_registers(consumer_registers, increase=True); line = inspect.currentframe().f_lineno
    return k, line


@pytest.mark.parametrize("style", ["if_else", "python_loop"])
def test_four_consumers_at_160_and_a_producer_are_refused(style):
    k, line = _roles(4, 160, style=style)
    with pytest.raises(CompileError) as e:
        k.compile()
    text = str(e.value)
    first = text.splitlines()[0]
    assert f"test_register_budget.py:{line}:" in first
    assert ("register budget: warpgroups 1-4 at 160 registers per thread and warpgroup 0 "
            "at 40 need 128 threads x (4 x 160 + 40) = 87040 > 65536 registers (the "
            "65,536-register file of an SM): setmaxnreg.inc waits until the registers it "
            "asks for are free, and no warpgroup gives them back, so the kernel hangs "
            "(lower the set_max_registers of warpgroups 1-4 to at most 112, or give the "
            "kernel fewer warpgroups)") in first
    assert "note: set_max_registers(40, increase=False) runs in warpgroup 0" in text
    assert "note: set_max_registers(160, increase=True) runs in warpgroups 1-4" in text


@pytest.mark.parametrize("style", ["if_else", "python_loop"])
def test_four_consumers_at_112_twin_fits(style):
    k, _ = _roles(4, 112, style=style)          # 128 x (4 x 112 + 40) = 62464
    assert _budget_errors(str(k.module)) == []
    k.to_ptx()  # the check passes; the kernel lowers


def test_gemm_shape_at_240_is_refused_and_232_fits():
    k, _ = _roles(2, 240)
    with pytest.raises(CompileError, match=r"= 66560 > 65536 registers .* at most 232"):
        k.to_ptx()
    k, _ = _roles(2, 232)
    assert _budget_errors(str(k.module)) == []


def test_a_warpgroup_that_is_not_resized_keeps_its_entry_registers():
    """512 threads start at 128 registers each (the cap ptxas gives); a
    warpgroup that runs no setmaxnreg keeps them."""
    k = Kernel("budget_entry", block_dim=512)
    with k:
        warpgroup = k.warp_idx() // 4
        with k.if_(warpgroup == 0):
            set_max_registers(40, increase=False)
        with k.if_(warpgroup == 1):
            set_max_registers(232, increase=True)
        with k.if_(warpgroup == 2):
            set_max_registers(232, increase=True)
    with pytest.raises(CompileError) as e:
        k.to_ptx()
    assert ("warpgroups 1-2 at 232 registers per thread, warpgroup 3 at 128 (not resized: "
            "the entry registers) and warpgroup 0 at 40 need 128 threads x (2 x 232 + 128 "
            "+ 40) = 80896 > 65536") in str(e.value)


def test_roles_on_kernel_arguments_are_not_guessed():
    k = Kernel("budget_arg", block_dim=640, params={"flag": Int32()})
    with k:
        (flag,) = k.args
        with k.if_(flag != 0):
            set_max_registers(240, increase=True)
    assert _budget_errors(str(k.module)) == []
    k.to_ptx()


def _example_kernels():
    """Every example's build(), the example variants the other tests build,
    attention's and the GEMM's register-resizing variants and the skeletons."""
    import importlib

    from _example_checks import EXAMPLES
    from test_stage_balance import _example_modules

    builds = {f"examples/{stem}": (lambda stem=stem: importlib.import_module(stem).build())
              for stem in _example_modules()}
    builds.update({f"variant {name}": build for name, build in EXAMPLES.items()})

    import attention_fwd
    import hopper_gemm
    for name, kw in [("causal", {"causal": True}), ("d256", {"head_dim": 256}),
                     ("no pingpong", {"pingpong": False})]:
        builds[f"attention_fwd {name}"] = lambda kw=kw: attention_fwd.build(
            replace(attention_fwd.AttentionConfig(), **kw))
    builds["hopper_gemm one consumer"] = lambda: hopper_gemm.build(
        replace(hopper_gemm.GemmConfig(), consumer_warpgroups=1))
    from skeletons import cute_blackwell_gemm, cute_hopper_gemm, fa3_hopper_fwd
    for mod in (cute_hopper_gemm, cute_blackwell_gemm, fa3_hopper_fwd):
        builds[f"skeleton {mod.__name__}"] = mod.build
    return builds


def _budget_errors(text):
    """The register-budget errors of pipeline-verify-protocol on ``text``."""
    from test_stage_balance import check

    return [e for e in check(text)[0] if "register budget" in e]


def test_example_kernels_fit():
    for name, build in _example_kernels().items():
        assert _budget_errors(str(build().module)) == [], name


# The producer's setmaxnreg.dec dropped from a built kernel (what the
# mutation campaign does to the IR): the producer keeps the launch's
# registers, the consumers still raise theirs.
@pytest.mark.parametrize("name,expected", [
    ("examples/hopper_gemm", "warpgroups 1-2 at 232 registers per thread and warpgroup 0 at "
                             "168 (not resized: the entry registers) need 128 threads x "
                             "(2 x 232 + 168) = 80896 > 65536"),
    ("examples/attention_fwd", "warpgroups 1-2 at 240 registers per thread and warpgroup 0 "
                               "at 168 (not resized: the entry registers) need 128 threads "
                               "x (2 x 240 + 168) = 82944 > 65536"),
])
def test_the_producer_without_its_setmaxnreg_is_refused(name, expected):
    text = str(_example_kernels()[name]().module)
    assert _budget_errors(text) == []
    dropped = [line for line in text.split("\n") if "nvvm.setmaxregister  decrease" in line
               or "nvvm.setmaxregister decrease" in line]
    assert len(dropped) == 1
    errors = _budget_errors(text.replace(dropped[0] + "\n", "", 1))
    assert len(errors) == 1 and expected in errors[0], errors
