"""GPU suite setup: find the bundle's manifest, detect the GPU, and skip
every test with a visible reason when there is no usable GPU."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)  # the bundle's own pipeline_mlir + gpu_child

from gpu_child import bundle_dir  # noqa: E402


def gpu_skip_reason():
    try:
        from pipeline_mlir.runtime import no_gpu_reason
    except ImportError as err:
        return f"pipeline_mlir.runtime cannot be imported: {err}"
    reason = no_gpu_reason()
    return f"no usable GPU: {reason}" if reason else None


def pytest_collection_modifyitems(config, items):
    reason = gpu_skip_reason()
    for item in items:
        item.add_marker(pytest.mark.gpu)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_report_header(config):
    reason = gpu_skip_reason()
    if reason:
        return f"pipeline-mlir GPU suite: {reason}"
    from pipeline_mlir.runtime import default_device

    d = default_device()
    return f"pipeline-mlir GPU suite: {d.name} ({d.sm}), bundle {bundle_dir()}"


@pytest.fixture(scope="session")
def device():
    from pipeline_mlir.runtime import default_device

    return default_device()
