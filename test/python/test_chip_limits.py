"""The hardware facts live in pipeline_mlir/chip_limits.py; the C++
verifier's shared-memory limit must say the same, and the places that used
to write their own copies now read it."""

import os
import re

from pipeline_mlir import chip_limits
from pipeline_mlir.runtime.device import DeviceLimits

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_cpp_shared_memory_limit_is_the_python_one():
    header = os.path.join(ROOT, "include", "pipeline-mlir", "Dialect", "Pipeline", "IR",
                          "PipelineDialect.h")
    with open(header) as f:
        m = re.search(r"kMaxSharedMemoryBytes\s*=\s*(\d+)\s*\*\s*(\d+);", f.read())
    assert m, "kMaxSharedMemoryBytes not found in PipelineDialect.h"
    assert int(m.group(1)) * int(m.group(2)) == chip_limits.SMEM_PER_BLOCK


def test_the_checkers_default_register_file_is_the_python_one():
    """pipeline-verify-protocol's register-file option (the register budget
    of one CTA when pipeline-opt runs it without the option) is the SM's
    register file chip_limits names; Python passes its own value."""
    td = os.path.join(ROOT, "include", "pipeline-mlir", "Dialect", "Pipeline", "Transforms",
                      "Passes.td")
    with open(td) as f:
        m = re.search(r'Option<"registerFile",\s*"register-file",\s*"int64_t",\s*'
                      r'/\*default=\*/"(\d+)"', f.read())
    assert m, "the register-file option not found in Passes.td"
    assert int(m.group(1)) == chip_limits.REGISTER_FILE


def test_the_users_of_the_facts_read_them():
    from pipeline_mlir.kernel import warpgroup
    from pipeline_mlir.ops import fp8_configs, gemm_configs
    from pipeline_mlir.pipeline import emit

    assert DeviceLimits().max_smem_per_block_optin == chip_limits.SMEM_PER_BLOCK
    assert DeviceLimits().multiprocessors == chip_limits.MULTIPROCESSORS["sm_90a"]
    assert warpgroup.REGISTER_FILE == chip_limits.REGISTER_FILE
    assert emit.MAX_STAGES == chip_limits.SMEM_PER_BLOCK // 16
    assert gemm_configs.tile("128x256") == (2 * chip_limits.WGMMA_M, 256)
    assert fp8_configs.tile("fast_64x256") == (chip_limits.WGMMA_M, 256)
    # The simulator's cluster cap (its launch check, the CLI, the cluster model).
    from pipeline_mlir.sim import launch
    assert launch.MAX_CLUSTER_CTAS == chip_limits.MAX_CLUSTER_SIZE_NONPORTABLE


def test_no_other_copy_of_the_227_kib_limit_in_the_package():
    package = os.path.join(ROOT, "python", "pipeline_mlir")
    copies = []
    for d, _, files in os.walk(package):
        for name in files:
            if name.endswith(".py") and name != "chip_limits.py":
                with open(os.path.join(d, name)) as f:
                    for n, line in enumerate(f, 1):
                        code = line.split("#")[0]
                        if re.search(r"\b227 \* 1024\b|\b232448\b", code):
                            copies.append(f"{name}:{n}")
    assert copies == []
