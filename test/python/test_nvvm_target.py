"""#nvvm.target values that upstream MLIR 22 or LLVM's NVPTX back end abort on
(NVVMTargetCheck.h, docs/fuzzing.md) never reach them from Python: a bad chip
given to Kernel / the compiler raises an error naming the argument, and a bad
target attached to a module by hand raises ValueError before the module is
verified, printed or lowered. Each case that used to abort runs in a child
process, so an abort shows as a return code instead of taking pytest down."""

import subprocess
import sys

import pytest

from pipeline_mlir import compiler
from pipeline_mlir._mlir_libs import _pipeline


def run_child(code):
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


@pytest.mark.parametrize("chip", ["P4", "sm", "abc", "sm_80", "sm_90a O=7", ""])
def test_kernel_rejects_chip(chip):
    # "P4" aborted Python in nvvm-attach-target's verifier, "sm_90a O=7"
    # smuggled an O level into the pass options (NVVMTargetAttr::get asserted).
    out = run_child(
        "from pipeline_mlir.kernel import Kernel\n"
        "try:\n"
        f"    Kernel('k', chip={chip!r})\n"
        "except ValueError as e:\n"
        "    print('ValueError:', e)\n")
    assert f"ValueError: chip: unsupported chip {chip!r}" in out


def test_kernel_rejects_chip_type():
    from pipeline_mlir.kernel import Kernel

    with pytest.raises(TypeError, match="chip must be a str"):
        Kernel("k", chip=90)


def test_supported_chips_come_from_the_lowering():
    assert compiler.SUPPORTED_CHIPS == ("sm_90a", "sm_100a", "sm_101a", "sm_103a")
    for chip in compiler.SUPPORTED_CHIPS:
        assert _pipeline.nvvm_target_problem(chip, "+ptx88") == ""


@pytest.mark.parametrize("chip, features, O, triple, rule", [
    ("P4", "", 2, "nvptx64-nvidia-cuda", 'chip "P4" is not a processor'),
    ("sm_x", "", 2, "nvptx64-nvidia-cuda", 'chip "sm_x" is not a processor'),
    ("sm_90a", "-ptx88", 2, "nvptx64-nvidia-cuda", '"-ptx88" is not "+ptx<version>"'),
    ("sm_90a", "+ptx60", 2, "nvptx64-nvidia-cuda", "PTX 6.0, below the PTX 8.0"),
    ("sm_100a", "+ptx80", 2, "nvptx64-nvidia-cuda", "PTX 8.0, below the PTX 8.6"),
    ("sm_101a", "+ptx90", 2, "nvptx64-nvidia-cuda", "is called sm_110"),
    ("sm_90a", "", 5, "nvptx64-nvidia-cuda", "O = 5 is not an optimization level"),
    ("sm_90a", "", 2, "x86_64-unknown-linux-gnu", "is not an NVPTX triple"),
])
def test_nvvm_target_problem(chip, features, O, triple, rule):
    assert rule in _pipeline.nvvm_target_problem(chip, features, O, triple)


def test_nvvm_target_problem_accepts_what_the_back_end_takes():
    assert _pipeline.nvvm_target_problem("sm_100f", "+ptx88,+ptx80") == ""
    assert _pipeline.nvvm_target_problem("sm_20", "", 0, "nvptx-nvidia-cuda") == ""


def test_module_with_bad_target_raises_instead_of_aborting():
    # A target attached by hand: verifying or printing the module (to_ptx
    # hashes its text) used to abort in NVVMTargetAttr::verifyTarget.
    out = run_child(
        "import mlir.ir as ir\n"
        "from pipeline_mlir import compiler\n"
        "from pipeline_mlir.kernel import Kernel\n"
        "k = Kernel('k', chip='sm_90a')\n"
        "with k.context:\n"
        "    bad = ir.Attribute.parse('#nvvm.target<chip = \"P4\">')\n"
        "    k.gpu_module.attributes['targets'] = ir.ArrayAttr.get([bad])\n"
        "for what, call in [('verify', k.verify), ('to_ptx', k.to_ptx),\n"
        "                   ('to_nvvm', lambda: compiler.to_nvvm(k.module))]:\n"
        "    try:\n"
        "        call()\n"
        "    except ValueError as e:\n"
        "        print(what, 'ValueError:', e)\n")
    for what in ("verify", "to_ptx", "to_nvvm"):
        assert (f'{what} ValueError: invalid #nvvm.target: invalid #nvvm.target<chip = "P4">: '
                'chip "P4" is not a processor of LLVM\'s NVPTX back end') in out, out
