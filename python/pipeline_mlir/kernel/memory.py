"""Plain loads, stores and pointer offsets (global or shared memory).

Enough for example kernels: ``load(ptr, i32, index)`` reads element
``index`` of an array of i32 at ``ptr``; ``store`` writes one; ``fence_view_async_shared``
makes generic-proxy writes to shared memory visible to TMA (the async proxy).
"""

import mlir.ir as ir
from mlir.dialects import llvm, nvvm

from ..user_location import user_line
from .smem import SmemPtr
from .values import Scalar, i32, to_value


def _ptr(p):
    return p.ir_value if isinstance(p, SmemPtr) else to_value(p, what="pointer")


def element_ptr(ptr, elem_type, index):
    """``&ptr[index]`` for elements of ``elem_type``."""
    base = _ptr(ptr)
    idx = to_value(index, i32(), what="element index")
    v = llvm.getelementptr(base.type, base, [idx], [-2147483648], elem_type, 0)
    return SmemPtr(v) if isinstance(ptr, SmemPtr) else v


# Loads too: the simulator's read-after-release finding points at them.
@user_line
def load(ptr, elem_type, index=0):
    """``ptr[index]``; integers come back as Scalars."""
    p = _ptr(element_ptr(ptr, elem_type, index))
    v = llvm.load(elem_type, p)
    return Scalar(v) if isinstance(elem_type, ir.IntegerType) else v


# Stores and fences carry the user's line: the checker's shared-memory
# hand-over findings point at them.
@user_line
def store(value, ptr, index=0):
    """``ptr[index] = value`` (the element type is the value's type)."""
    v = to_value(value, what="stored value")
    llvm.store(v, _ptr(element_ptr(ptr, v.type, index)))


@user_line
def fence_view_async_shared():
    """``fence.proxy.async.shared::cta``: before a TMA store reads data that
    threads wrote to shared memory."""
    nvvm.fence_proxy(nvvm.ProxyKind.async_shared, space=nvvm.SharedSpace.shared_cta)
