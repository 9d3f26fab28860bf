"""Where compiled artifacts persist between processes.

``PIPELINE_MLIR_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/pipeline-mlir``
(``~/.cache/pipeline-mlir``). The compiler keeps its cubins here (keyed by
the content hash of the module and the lowering) and ``pipeline_mlir.gemm``
its GEMM variants (``gemm/``), so a GPU host without MLIR runs from a
directory filled where MLIR is installed.
"""

import os


def cache_root():
    root = os.environ.get("PIPELINE_MLIR_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "pipeline-mlir")
    os.makedirs(root, exist_ok=True)
    return root
