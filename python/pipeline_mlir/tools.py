"""Entry points for the command-line tools installed with the package."""

import os
import sys


def tool_path(name):
    """Absolute path of a native tool shipped in ``pipeline_mlir/bin``."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", name)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{name} is not installed at {path}; reinstall pipeline-mlir "
            "(scripts/setup.sh)")
    return path


def pipeline_opt_main():
    """``pipeline-opt``: exec the native tool with the same arguments."""
    path = tool_path("pipeline-opt")
    os.execv(path, [path] + sys.argv[1:])
