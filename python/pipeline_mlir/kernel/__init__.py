"""A thin kernel-authoring layer on the upstream MLIR Python bindings.

Enough to write pipeline kernels in readable Python: a ``gpu.func`` with
launch bounds and cluster dims (:class:`Kernel`), parameters
(:mod:`.params`), thread/warp/lane/CTA-rank values, shared memory
(:class:`SmemPtr`), ``scf.for`` loops carrying pipeline states
(``k.range``), ``scf.if`` branches (``k.if_``), ``scf.while`` loops (``k.while_``), ``elect_one``, rows of a tensor in
registers for memory-bound kernels (:class:`Rows`, :class:`RowValues`; long ones staged
through a shared-memory ring, :class:`RowRing`), an operand's TMA-filled stages
(:class:`Ring`) and compilation
(``k.verify()``, ``k.to_ptx()``, ``k.compile()``).
"""

from .compile import LoweringUnavailable, has_pipeline_to_cubin
from .control import If, elect_one, range_, while_
from .kernel import Kernel
from .memory import element_ptr, fence_view_async_shared, load, store
from .params import Float32, GlobalPtr, Int32, Int64, Param, TmaDescriptor
from .ring import Ring
from .row_ring import (RowRing, RowStage, ring_stages, row_cluster, row_parts, row_plan,
                       row_stages)
from .rows import Rows, RowValues, row_threads
from .scope import ScopeError
from .smem import SmemPtr
from .values import Scalar, to_value

__all__ = [
    "Kernel", "Scalar", "SmemPtr", "Param", "GlobalPtr", "TmaDescriptor",
    "Int32", "Int64", "Float32", "If", "elect_one", "range_", "while_", "to_value",
    "ScopeError", "LoweringUnavailable", "has_pipeline_to_cubin",
    "load", "store", "element_ptr", "fence_view_async_shared",
    "Rows", "RowValues", "row_threads", "Ring", "RowRing", "RowStage", "ring_stages", "row_stages",
    "row_parts", "row_plan", "row_cluster",
]
