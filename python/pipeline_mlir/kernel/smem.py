"""Shared memory: one dynamic shared-memory arena per kernel, bump-allocated.

Every allocation is a byte offset into the kernel's dynamic shared memory:
the external shared array :data:`DYNAMIC_SMEM_SYMBOL`, declared with
:data:`BASE_ALIGN`-byte alignment (PTX ``.extern .shared .align 1024 .b8
__pipeline_dynamic_smem[];``, as CuTe DSL declares its own), so offsets
aligned in Python are aligned in memory (TMA with 128B swizzle needs
1024-byte aligned buffers) without rounding the base up at run time. The
pointers are ``!llvm.ptr<3>`` values, computed once in the kernel's
prologue, so they may be used anywhere in the kernel.

Why dynamic: the total is only known when the kernel body is complete, CuTe
DSL kernels also use dynamic shared memory, and it is not limited to 48 KiB.
The launcher must pass :attr:`SharedMemory.size` bytes of dynamic shared
memory (``Kernel.smem_bytes``).
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm, nvvm

from ..user_location import user_line, user_location
from .values import Scalar, i32, to_value

BASE_ALIGN = 1024
DYNAMIC_SMEM_SYMBOL = "__pipeline_dynamic_smem"
# Discardable attribute naming the bytes of one allocation (read by
# pipeline-verify-protocol's ring-buffer check).
SMEM_BYTES_ATTR = "pipeline.smem_bytes"


def _gep_bytes(base, offset):
    """``base + offset`` bytes (``llvm.getelementptr i8``)."""
    off = to_value(offset, i32(), what="byte offset")
    return llvm.getelementptr(llvm.PointerType.get(3), base, [off],
                              [-2147483648], ir.IntegerType.get_signless(8), 0)


def _user_line():
    """``file:line`` of the user's call, or None."""
    loc = user_location()
    if loc is None or not loc.is_a_file():
        return None
    return f"{loc.filename}:{loc.start_line}"


def state_index_stages(value):
    """The stage count of the pipeline state whose ``pipeline.state.index``
    made ``value``, or None (``value`` is something else)."""
    owner = getattr(value, "owner", None)
    op = getattr(owner, "operation", None)
    if op is None or op.name != "pipeline.state.index":
        return None
    from ..dialects import pipeline as pl

    return pl.StateType(op.operands[0].type).stages


class SmemPtr:
    """A ``!llvm.ptr<3>`` with byte-offset arithmetic (``ptr + 128``).

    ``value`` may be a function that builds the pointer: an allocation's
    pointer is only emitted when first used, so an allocation nothing reads
    (a barrier array of a pipeline that keeps none, say) costs no
    instruction."""

    __hash__ = object.__hash__

    def __init__(self, value, size=None, name=None):
        self._value = value
        self.size = size
        self.name = name      # the allocation's (``smem_alloc(name=...)``)

    @property
    def ir_value(self):
        if callable(self._value):
            self._value = self._value()
        return self._value

    value = ir_value

    # At the user's line: the checker names the address of a ring buffer
    # that lies past its allocation there.
    @user_line
    def __add__(self, offset):
        return SmemPtr(_gep_bytes(self.ir_value, offset))

    def stage(self, index, stage_bytes):
        """Pointer to buffer ``index`` of a ring of ``stage_bytes`` buffers.

        When this is an allocation and ``index`` a pipeline state's index
        (``state.index``), the allocation must hold exactly one buffer per
        stage of that state's pipeline: the stage count is written at the
        create and again in the allocation's size, and where they disagree
        the last stages would overlap the next allocation (or buffers would
        sit unused), which neither the IR nor the simulator can see."""
        idx = index if isinstance(index, Scalar) else Scalar(to_value(index, i32()))
        self._check_ring(idx, stage_bytes)
        return self + idx * stage_bytes

    def _check_ring(self, idx, stage_bytes):
        stages = state_index_stages(idx.ir_value)
        if stages is None or self.size is None or not isinstance(stage_bytes, int):
            return
        if stages * stage_bytes != self.size:
            what = f"shared memory {self.name!r}" if self.name else "this shared memory"
            raise ValueError(
                f"{what} holds {self.size} bytes ({self.size / stage_bytes:g} buffers of "
                f"{stage_bytes} bytes) but it is indexed by the state of a {stages}-stage "
                f"pipeline: the ring's stage count is written twice and disagrees "
                f"(allocate {stages} * {stage_bytes} = {stages * stage_bytes} bytes, or "
                f"create the pipeline with the stage count the allocation was sized for)")

    def __repr__(self):
        return f"SmemPtr({self._value})"


class SharedMemory:
    """The bump allocator behind ``Kernel.smem_alloc``."""

    def __init__(self, entry_block, anchor):
        # Prologue ops go before `anchor`, the first op of the kernel body, so
        # they dominate every use.
        self._entry = entry_block
        self._anchor = anchor
        self._base = None
        self.used = 0
        self.allocations = []
        self._lines = []  # the user's file:line of each allocation

    @property
    def size(self):
        """Dynamic shared memory bytes to launch with (0 if none is used)."""
        return self.used

    def _declare_dynamic_smem(self):
        """``llvm.mlir.global external @__pipeline_dynamic_smem() {addr_space
        = 3, alignment = 1024} : !llvm.array<0 x i8>`` in the gpu.module,
        once per module (kernels of one module share the declaration, as
        every extern shared array aliases the dynamic shared memory)."""
        module = self._entry.owner.parent  # gpu.func -> gpu.module
        body = module.regions[0].blocks[0]
        for op in body.operations:
            if (op.operation.name == "llvm.mlir.global" and
                    ir.StringAttr(op.attributes["sym_name"]).value == DYNAMIC_SMEM_SYMBOL):
                return
        # The Python bindings have no builder for these two LLVM types.
        with ir.InsertionPoint.at_block_begin(body):
            llvm.GlobalOp(ir.Type.parse("!llvm.array<0 x i8>"), DYNAMIC_SMEM_SYMBOL,
                          ir.Attribute.parse("#llvm.linkage<external>"),
                          alignment=BASE_ALIGN, addr_space=3)

    def _make_base(self):
        """The array's address, passed once through ``shfl.sync.idx`` (as
        CuTe DSL does; the array is declared by ``alloc``): the NVPTX back end would otherwise rematerialize the
        symbol in every block that uses it, and on sm_90 each copy is three
        SASS instructions (the CTA's shared window from SR_CgaCtaId); the
        shuffle makes it one register, known warp-uniform by ptxas."""
        ptr3 = llvm.PointerType.get(3)
        sym = llvm.mlir_addressof(ptr3, DYNAMIC_SMEM_SYMBOL)
        bits = llvm.ptrtoint(i32(), sym)
        full = arith.constant(i32(), -1)
        lane0 = arith.constant(i32(), 0)
        clamp = arith.constant(i32(), 0x1f)
        bits = nvvm.shfl_sync(i32(), full, bits, lane0, clamp, nvvm.ShflKind.idx)
        return llvm.inttoptr(ptr3, bits)

    def alloc(self, nbytes, align=16, name=None):
        if not isinstance(nbytes, int) or nbytes <= 0:
            raise ValueError(f"smem_alloc: size must be a positive int, got {nbytes!r}")
        if not isinstance(align, int) or align <= 0 or align & (align - 1):
            raise ValueError(f"smem_alloc: align must be a power of two, got {align!r}")
        if align > BASE_ALIGN:
            raise ValueError(f"smem_alloc: align is at most {BASE_ALIGN}, got {align}")
        offset = (self.used + align - 1) // align * align
        self.used = offset + nbytes
        self._declare_dynamic_smem()
        loc = ir.Location.current

        def pointer():
            # In the prologue, whenever the first use asks for it.
            with loc, ir.InsertionPoint(self._anchor):
                if self._base is None:
                    self._base = self._make_base()
                ptr = _gep_bytes(self._base, offset) if offset else self._base
                # The allocation's size, for the protocol checker: a
                # pipeline whose stages index a ring in it must not index
                # past its end (more stages than buffers). The op yielding
                # an allocation's pointer carries it; the offset-0
                # allocation's is the base.
                ptr.owner.attributes[SMEM_BYTES_ATTR] = ir.IntegerAttr.get(
                    ir.IntegerType.get_signless(64), nbytes)
            return ptr

        self.allocations.append((name, offset, nbytes))
        self._lines.append(_user_line())
        return SmemPtr(pointer, nbytes, name)

    def check_fits(self, limit, chip):
        """Raise CompileError when the allocations need more than ``limit``
        bytes of dynamic shared memory per block (the launch would fail),
        naming each allocation and the line that made it, largest first."""
        if self.used <= limit:
            return
        from ..diagnostics import CompileError

        rows = sorted(zip(self.allocations, self._lines), key=lambda r: -r[0][2])
        listing = "\n".join(
            f"  {line or '<unknown line>'}: note: {name or 'smem_alloc'}: {nbytes} bytes "
            f"at offset {offset}" for (name, offset, nbytes), line in rows)
        first = next((line for _, line in rows if line), None)
        raise CompileError(
            (f"{first}: error: " if first else "error: ")
            + f"the kernel's shared memory allocations need {self.used} bytes, more "
            f"than the {limit} bytes ({limit // 1024} KiB) of dynamic shared memory "
            f"a block may use on {chip}: the launch would fail (use fewer stages "
            f"or smaller tiles)\n{listing}")
