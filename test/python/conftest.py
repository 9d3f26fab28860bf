import pytest

import pipeline_mlir


@pytest.fixture
def ctx():
    """A context with the upstream dialects and `pipeline` loaded, entered."""
    import mlir.ir as ir

    context = pipeline_mlir.make_context()
    with context, ir.Location.unknown():
        yield context
