"""``python -m pipeline_mlir.sim FILE ...`` (same as the ``pipeline-sim`` command)."""

import sys

from .cli import main

sys.exit(main())
