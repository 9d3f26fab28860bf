"""Small helpers shared by the builders: operands and checks."""

import mlir.ir as ir

from ..chip_limits import SMEM_PER_BLOCK
from ..kernel.scope import current_block, require_visible
from ..kernel.smem import SmemPtr
from ..kernel.values import Scalar, i1, i32, to_value
from .errors import PipelineError


def i32_value(x, what):
    """An i32 operand from a Python int, a Scalar or an i32 value."""
    if isinstance(x, bool):
        raise TypeError(f"{what}: expected an i32, got a bool")
    v = to_value(x, i32(), what=what)
    if not isinstance(x, int):
        require_visible(v, what)
    return v


def token_value(token, what):
    """An i1 token operand (None stays None; Python bools become constants)."""
    if token is None:
        return None
    v = to_value(token, i1(), what=what)
    if not isinstance(token, bool):
        require_visible(v, what)
    return v


def smem_pointer(ptr, what):
    """A ``!llvm.ptr<3>`` operand from an SmemPtr or a value."""
    v = ptr.ir_value if isinstance(ptr, SmemPtr) else to_value(ptr, what=what)
    t = v.type
    if str(t) != "!llvm.ptr<3>":
        raise TypeError(f"{what}: expected a shared-memory pointer "
                        f"(!llvm.ptr<3>), got {t}")
    require_visible(v, what)
    return v


def barrier_storage(ptr, ptype, what):
    """The barrier storage operand of a create of type ``ptype``, refused
    when it is an allocation (``k.alloc_barriers(n)``, ``k.smem_alloc``) too
    small for the pipeline's 8-byte mbarriers: the last ones would overlap
    the next allocation, which neither the IR nor the simulator can see
    (the checker sees it only for a sized shared global)."""
    v = smem_pointer(ptr, what)
    size = getattr(ptr, "size", None)
    needed = 8 * ptype.barrier_plan()["num_barriers"]
    if size is not None and size < needed:
        raise PipelineError(
            f"{what} holds {size} bytes ({size // 8} mbarriers) but this "
            f"pipeline needs {needed} ({needed // 8} mbarriers of 8 bytes: "
            + ("depth x length" if ptype.length else
               "a full and an empty barrier per stage")
            + f"): the last barriers would overlap the next allocation "
            f"(use k.alloc_barriers({needed // 8}))")
    return v


def cluster_layout(cta_layout_vmnk, what):
    """Validate a (V, M, N, L) tuple; None stays None."""
    if cta_layout_vmnk is None:
        return None
    shape = getattr(cta_layout_vmnk, "shape", cta_layout_vmnk)
    try:
        shape = tuple(shape)
    except TypeError:
        shape = None
    if shape is None or len(shape) != 4 or not all(
            isinstance(s, int) and not isinstance(s, bool) and s > 0
            for s in shape):
        raise PipelineError(
            f"{what}: cta_layout_vmnk must be a tuple of 4 positive ints "
            f"(V, M, N, L), got {cta_layout_vmnk!r}")
    return shape


def cluster_size(cta_layout_vmnk, what="cta_layout_vmnk"):
    shape = cluster_layout(cta_layout_vmnk, what)
    if shape is None:
        return 1
    v, m, n, l = shape
    return v * m * n * l


# Limits the dialect verifiers enforce (PipelineDialect.h), checked here first
# so that the error names the Python argument.
MAX_STAGES = SMEM_PER_BLOCK // (2 * 8)  # 2 * stages mbarriers in 227 KiB of smem
MAX_TX_COUNT = (1 << 20) - 1        # mbarrier tx-count is 20 bits
MAX_I32 = (1 << 31) - 1


def positive_int(x, what, limit=MAX_I32, why="the largest i32"):
    if not isinstance(x, int) or isinstance(x, bool) or x <= 0:
        raise PipelineError(f"{what} must be a positive int, got {x!r}")
    if x > limit:
        raise PipelineError(f"{what} = {x} exceeds {limit} ({why})")
    return x


def stage_count(x, what):
    """A stage count: positive, and small enough for its barriers to fit."""
    return positive_int(x, what, MAX_STAGES,
                        "2 * stages 8-byte mbarriers must fit in the 227 KiB "
                        "of shared memory of a CTA")


def optional_name(name, what):
    """A pipeline's label: None or a non-empty str."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise TypeError(f"{what}: name must be a str or None, got "
                        f"{type(name).__name__}")
    if not name:
        raise PipelineError(f"{what}: name must not be empty")
    return name


def wrap_i32(v):
    return Scalar(v)


__all__ = ["i32_value", "token_value", "smem_pointer", "barrier_storage", "cluster_layout",
           "cluster_size", "positive_int", "stage_count", "optional_name",
           "MAX_STAGES", "MAX_TX_COUNT", "wrap_i32", "current_block",
           "require_visible", "ir"]
