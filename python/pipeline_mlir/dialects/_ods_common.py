# The generated _pipeline_ops_gen.py imports its helpers relative to its own
# package; re-export upstream's so that ops register with the one mlir copy.
from mlir.dialects._ods_common import *  # noqa: F401,F403
from mlir.dialects._ods_common import _cext  # noqa: F401
