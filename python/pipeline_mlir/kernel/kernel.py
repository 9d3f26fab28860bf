"""`Kernel`: one GPU kernel being built, and the module that holds it.

The module is::

    module attributes {gpu.container_module} {
      gpu.module @kernels [#nvvm.target<chip = "sm_90a">] {
        gpu.func @kernel(...) kernel attributes {known_block_size = ...,
                                                 known_cluster_size = ...}
      }
    }

``known_block_size`` becomes ``.reqntid`` (the exact block size; upstream's
gpu.func lowering emits ``.maxntid``, which pipeline-to-cubin turns into
``.reqntid`` as CuTe DSL declares it) and ``known_cluster_size`` becomes
``.explicitcluster .reqnctapercluster`` in the PTX. The ``#nvvm.target`` is attached with the
upstream ``nvvm-attach-target`` pass, so no IR is built from strings.

Use it as a context manager; inside, the builders of ``pipeline_mlir.pipeline``
and the helpers below emit at the end of the kernel body::

    k = Kernel("copy", chip="sm_90a", block_dim=128,
               params={"src": GlobalPtr(), "n": Int32()})
    with k:
        with k.if_(k.warp_idx() == 0):
            ...
    fn = k.compile()          # the cubin, and a callable that launches it
    fn(src, 4096, grid=(8,))
"""

from collections import namedtuple

import mlir.ir as ir
import mlir.passmanager as pm
from mlir.dialects import arith, gpu, nvvm

from pipeline_mlir.chip_limits import MAX_CLUSTER_SIZE_NONPORTABLE, SMEM_PER_BLOCK
from pipeline_mlir.user_location import user_line

from . import compile as _compile
from .control import If, elect_one, range_, while_
from .params import as_param
from .smem import SharedMemory
from .values import Scalar, i32

_ACTIVE = []  # kernels being built (innermost last)


def active_kernel():
    """The innermost Kernel whose ``with`` block is open, or None."""
    return _ACTIVE[-1] if _ACTIVE else None


def _dims(value, what):
    if value is None:
        return None
    if isinstance(value, int):
        value = (value,)
    value = tuple(value)
    if not 1 <= len(value) <= 3 or not all(
            isinstance(v, int) and v > 0 for v in value):
        raise ValueError(f"{what} must be 1 to 3 positive ints, got {value!r}")
    return value + (1,) * (3 - len(value))


def _volume(dims):
    return dims[0] * dims[1] * dims[2]


#: Resident CTAs per SM on sm_90 and sm_100 (the hardware limit).
MAX_CTAS_PER_SM = 32


def _check_min_ctas_per_sm(value):
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("min_ctas_per_sm must be an int or None, not "
                        f"{type(value).__name__}")
    if not 1 <= value <= MAX_CTAS_PER_SM:
        raise ValueError(f"min_ctas_per_sm must be in 1..{MAX_CTAS_PER_SM} "
                         f"(resident CTAs per SM), got {value}")


class Kernel:
    """A ``gpu.func`` kernel under construction (see the module docstring).

    Args:
      name: symbol of the gpu.func (the name to launch).
      chip: ``sm_90a``, ``sm_100a``, ...: the ``#nvvm.target`` chip.
      block_dim: threads per CTA (int or up to 3 ints); launch bound.
      cluster_dim: CTAs per cluster (int or up to 3 ints), or None.
      params: ``{name: Param}`` or ``[(name, Param)]`` (see ``params.py``).
      context: an ``mlir.ir.Context`` with the pipeline dialect (default: a
        new one from ``pipeline_mlir.make_context()``).
      min_ctas_per_sm: CTAs that must fit on one SM at once, or None: PTX
        ``.minnctapersm`` (CUDA's second ``__launch_bounds__`` argument), so
        that ptxas keeps registers per thread within 65536 / (CTAs x
        threads). For persistent kernels launched with several CTAs per SM:
        one register over the limit halves the CTAs that fit.
    """

    def __init__(self, name="kernel", *, chip="sm_90a", block_dim=128,
                 cluster_dim=None, params=(), context=None,
                 module_name="kernels", min_ctas_per_sm=None):
        import pipeline_mlir
        from pipeline_mlir.compiler import check_chip

        # Before the chip becomes an nvvm-attach-target option: upstream
        # aborts on some strings ("P4") instead of reporting them.
        check_chip(chip)
        self.name = name
        self.chip = chip
        self.block_dim = _dims(block_dim, "block_dim")
        self.cluster_dim = _dims(cluster_dim, "cluster_dim")
        if self.cluster_dim == (1, 1, 1):
            self.cluster_dim = None
        # The non-portable maximum of sm_90 and sm_100 (chip_limits: building
        # a kernel must not import the CUDA runtime, which costs a cold
        # build tens of milliseconds).
        most = MAX_CLUSTER_SIZE_NONPORTABLE
        if self.cluster_dim and _volume(self.cluster_dim) > most:
            raise ValueError(f"Kernel: cluster_dim {self.cluster_dim} has "
                             f"{_volume(self.cluster_dim)} CTAs; a cluster holds at "
                             f"most {most}")
        if self.block_dim[0] * self.block_dim[1] * self.block_dim[2] > 1024:
            raise ValueError(f"block_dim {self.block_dim} exceeds 1024 threads")
        _check_min_ctas_per_sm(min_ctas_per_sm)
        self.min_ctas_per_sm = min_ctas_per_sm
        items = list(params.items()) if isinstance(params, dict) else list(params)
        self.context = context or pipeline_mlir.make_context()
        self._entered = []
        # Named barrier ids taken in this kernel: id -> who took it
        # (pipeline/named_barrier.py assigns ids when none is given).
        self.named_barrier_ids = {}
        with self.context, ir.Location.unknown():
            specs = [(n, as_param(p, n)) for n, p in items]
            self.params = tuple(specs)
            self.module = ir.Module.create()
            self.module.operation.attributes["gpu.container_module"] = ir.UnitAttr.get()
            with ir.InsertionPoint(self.module.body):
                self.gpu_module = gpu.GPUModuleOp(module_name)
                self.gpu_module.bodyRegion.blocks.append()
            pm.PassManager.parse(
                f"builtin.module(nvvm-attach-target{{chip={chip}}})").run(
                    self.module.operation)
            ftype = ir.FunctionType.get([p.ir_type() for _, p in specs], [])
            with ir.InsertionPoint(self.gpu_module.bodyRegion.blocks[0]):
                self.func = gpu.GPUFuncOp(ftype, sym_name=name, kernel=True,
                                          known_block_size=list(self.block_dim))
                if self.cluster_dim:
                    self.func.attributes["known_cluster_size"] = \
                        ir.DenseI32ArrayAttr.get(list(self.cluster_dim))
                if min_ctas_per_sm is not None:
                    # Upstream's gpu.func lowering keeps nvvm.* attributes;
                    # LLVM's NVPTX back end prints it as .minnctapersm.
                    self.func.attributes["nvvm.minctasm"] = ir.IntegerAttr.get(
                        ir.IntegerType.get_signless(32), min_ctas_per_sm)
                if specs:
                    # The checker names arguments in messages by these
                    # (`k_tiles - 1`, not `%arg2 - 1`); the gpu.func
                    # lowering drops argument attributes (PTX unchanged).
                    self.func.attributes["arg_attrs"] = ir.ArrayAttr.get([
                        ir.DictAttr.get({"pipeline.name": ir.StringAttr.get(n)})
                        for n, _ in specs])
                self.entry = self.func.add_entry_block()
            with ir.InsertionPoint(self.entry):
                # The prologue (shared-memory pointers) goes before `anchor`;
                # the body goes before the return.
                anchor = arith.constant(i32(), 0)
                self._return = gpu.ReturnOp([])
            self.smem = SharedMemory(self.entry, anchor.owner)
            values = []
            for (n, _), arg in zip(specs, self.entry.arguments):
                scalar = isinstance(arg.type, (ir.IntegerType, ir.F32Type))
                values.append(Scalar(arg) if scalar else arg)
            names = [n for n, _ in specs]
            self.args = namedtuple("Args", names)(*values) if names else ()

    # -- building -----------------------------------------------------------

    def __enter__(self):
        managers = [self.context, ir.Location.unknown(self.context),
                    ir.InsertionPoint(self._return)]
        for m in managers:
            m.__enter__()
        self._entered.append(managers)
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc):
        _ACTIVE.remove(self)
        for m in reversed(self._entered.pop()):
            m.__exit__(*exc)
        return False

    def arg(self, name):
        """The kernel parameter called ``name``."""
        return getattr(self.args, name)

    # Thread, warp, block and cluster indices (i32 Scalars).
    def thread_idx(self, dim="x"):
        return Scalar(getattr(nvvm, f"read_ptx_sreg_tid_{dim}")(i32()))

    def block_idx(self, dim="x"):
        return Scalar(getattr(nvvm, f"read_ptx_sreg_ctaid_{dim}")(i32()))

    def grid_dim(self, dim="x"):
        """``%nctaid``: CTAs in the grid along ``dim``; a grid-stride loop
        steps by it (``Rows.grid_stride``), so one launch of any grid covers
        any number of rows or tiles."""
        return Scalar(getattr(nvvm, f"read_ptx_sreg_nctaid_{dim}")(i32()))

    def lane_idx(self):
        return Scalar(nvvm.read_ptx_sreg_laneid(i32()))

    def linear_thread_idx(self):
        x, y, _ = self.block_dim
        t = self.thread_idx("x")
        if self.block_dim[1] > 1 or self.block_dim[2] > 1:
            t = t + (self.thread_idx("y") + self.thread_idx("z") * y) * x
        return t

    def warp_idx(self):
        """Warp index in the CTA, warp-uniform.

        In a 1-D block it is ``tid.x / 32``: the threads of a warp are
        consecutive in x, and the kernel's PTX declares the exact block size
        (``.reqntid``), from which ptxas knows the value is warp-uniform.
        No ``shfl.sync`` then: LLVM folds ``warp_idx() == 0`` to the
        ``tid.x < 32`` that the pipeline creates test, so a role branch on
        warp 0 reuses their predicate (one compare instead of two, measured
        in benchmarks/parity), and ptxas dropped that shuffle anyway. With
        y or z extents, the linear index over 32 broadcast from lane 0
        (``shfl.sync``, as CUTLASS's ``canonical_warp_idx_sync``) tells
        the compilers that it is warp-uniform."""
        w = self.linear_thread_idx() // 32
        if self.block_dim[1] == 1 and self.block_dim[2] == 1:
            return w
        v = nvvm.shfl_sync(i32(), arith.constant(i32(), -1), w.ir_value,
                           arith.constant(i32(), 0), arith.constant(i32(), 0x1f),
                           nvvm.ShflKind.idx)
        return Scalar(v)

    def cluster_cta_rank(self):
        """``%cluster_ctarank``: this CTA's rank in its cluster."""
        return Scalar(nvvm.read_ptx_sreg_cluster_ctarank(i32()))

    @user_line
    def sync_threads(self):
        """``bar.sync 0`` (``__syncthreads``)."""
        nvvm.barrier0()

    @user_line
    def cluster_sync(self):
        """``barrier.cluster.arrive`` + ``barrier.cluster.wait``."""
        nvvm.cluster_arrive()
        nvvm.cluster_wait()

    # Shared memory.
    def smem_alloc(self, nbytes, align=16, name=None):
        """``nbytes`` of shared memory (an ``SmemPtr``, ``!llvm.ptr<3>``)."""
        return self.smem.alloc(nbytes, align, name)

    def alloc_barriers(self, count, name=None):
        """Storage for ``count`` 8-byte mbarriers (a pipeline of S stages
        needs ``2 * S``; PipelineOrder ``depth * length``)."""
        return self.smem.alloc(8 * count, 8, name)

    @property
    def smem_bytes(self):
        """Dynamic shared memory to launch with."""
        return self.smem.size

    # Control flow.
    def range(self, start, stop=None, step=1, *, carry=(), unroll=None,
              unroll_full=False):
        """``scf.for`` (see ``control.range_``); ``unroll=1`` keeps the loop
        rolled, the default for loops that carry pipeline states."""
        return range_(start, stop, step, carry=carry, unroll=unroll,
                      unroll_full=unroll_full)

    def while_(self, cond, *, carry=()):
        """``scf.while`` (see ``control.while_``): runs while the carried i1
        ``cond`` holds; what the body updates must be carried, as in
        ``k.range``."""
        return while_(cond, carry=carry)

    def if_(self, cond, carry=()):
        """``scf.if`` (see ``control.If``); ``carry=[...]`` makes it yield
        the listed objects' values, as ``k.range(carry=)`` does for loops."""
        return If(cond, carry=carry)

    def elect_one(self):
        return elect_one()

    # -- checking and compiling --------------------------------------------

    def verify(self):
        """Verify the module (raises ``mlir.ir.MLIRError`` on failure)."""
        return _compile.verify(self.module)

    def compile(self, chip=None, assembler=None, verbose=None, watchdog=False):
        """The compiled kernel for ``chip`` (default: the kernel's chip): a
        ``pipeline_mlir.runtime.CompiledKernel``, which is the cubin (a
        ``bytes`` subclass: write it, load it, compare it) and launches the
        kernel when called::

            fn = k.compile()
            fn(src, dst, n, grid=(128,))    # torch tensors, numpy arrays, ints...

        It knows the kernel's name, its parameters (names and kinds from
        ``params``), ``block_dim``, ``cluster_dim`` and ``smem_bytes`` (as
        they are now: allocate shared memory before compiling). Compiles
        are cached by content hash (the cubin on disk, the callable and its
        loaded module in the process).

        ``assembler``: 'nvjitlink' (in-process), 'ptxas' (subprocess) or
        'auto'; see ``pipeline_mlir.compiler.to_cubin``.

        A kernel the checks refuse raises ``CompileError`` led by the line
        of your code and the rule (``verbose=True`` or
        ``PIPELINE_MLIR_VERBOSE=1`` add MLIR's IR dumps); checker warnings
        are issued as ``pipeline_mlir.diagnostics.CheckerWarning``. Shared
        memory over the block limit is refused here, naming each
        allocation, rather than at launch, and so are warpgroup registers
        (``set_max_registers``) over the 65,536-register file, naming each
        warpgroup's count.

        ``watchdog=True`` compiles in the device watchdog (docs/watchdog.md):
        every barrier wait is bounded (2 s), and a wait past its deadline
        writes a record and traps; the launch then raises
        ``PipelineWatchdogError`` naming the wait, with the forensic report
        of every barrier of the CTA and who waits on what. It costs a few
        instructions per wait: a debugging switch, off by default."""
        from pipeline_mlir import compiler
        from pipeline_mlir.runtime.compiled import CompiledKernel

        chip = chip or self.chip
        for n, p in self.params:
            if p.kind is None:
                raise TypeError(f"parameter {n!r}: {type(p).__name__} names no runtime argument "
                                "kind (set its `kind`, e.g. 'ptr' or 'i32')")
        if not isinstance(watchdog, bool):
            raise TypeError(f"watchdog must be True or False, not {watchdog!r}")
        self._check_smem(chip)
        cubin = compiler.to_cubin(self.module, chip=chip, assembler=assembler,
                                  verbose=verbose, watchdog=watchdog)
        return CompiledKernel.cached(
            cubin, name=self.name, params=[(n, p.kind) for n, p in self.params],
            block=self.block_dim, cluster=self.cluster_dim, smem=self.smem_bytes,
            chip=chip, watchdog=watchdog)

    def to_ptx(self, chip=None, verbose=None, watchdog=False):
        """PTX text for ``chip`` (default: the kernel's chip); ``watchdog``
        as in ``compile``."""
        from pipeline_mlir import compiler

        self._check_smem(chip or self.chip)
        return compiler.to_ptx(self.module, chip=chip or self.chip,
                               verbose=verbose, watchdog=watchdog)

    def _check_smem(self, chip):
        # The launch limit of sm_90 and sm_100 alike (chip_limits).
        self.smem.check_fits(SMEM_PER_BLOCK, chip)

    def simulate(self, args=None, *, schedules=100, seed=0, trip_count=None,
                 cluster=None, grid=None, exhaustive_bound=None, check=True):
        """Run the CPU simulator (the engine of ``pipeline-sim``) on this
        kernel: its warps as concurrent agents over ``schedules`` random
        interleavings seeded by ``seed`` (or, with ``exhaustive_bound``,
        every schedule with at most that many preemptions).

        ``args``: values of the integer parameters, so that loops bounded by
        them run their real trip counts: ``{"ntiles": 8}`` by name, or a
        sequence in parameter order (pointers and descriptors may be
        ``None``). A pointer's value may be a list of ints: its buffer's
        contents, which the loads of a branch on memory read (a block-sparse
        mask, a decoded work item); a buffer not given gets a random 0/1
        fill per schedule (``pipeline_mlir.sim.memory``). ``trip_count`` is the
        fallback for bounds it cannot evaluate; ``cluster`` defaults to the
        kernel's ``cluster_dim``; ``grid`` (CTAs, a whole number of clusters
        per axis) runs several clusters, whose global memory is shared
        (a stream-K fix-up across clusters); it defaults to one cluster.

        Returns a ``pipeline_mlir.sim.SimResult`` (``.ok``, ``.findings``,
        ``str()`` is ``pipeline-sim``'s report). With ``check`` (default) a
        deadlock or any other finding raises ``sim.SimulationFailed`` whose
        message names it and the user's lines of the ops involved."""
        from pipeline_mlir.sim import simulate

        return simulate(self.module, kernel=self.name, args=self._sim_args(args),
                        block_dim=self.block_dim, cluster=cluster or self.cluster_dim,
                        grid=grid, trip_count=trip_count, schedules=schedules, seed=seed,
                        exhaustive_bound=exhaustive_bound, check=check)

    def _sim_args(self, args):
        """``{position: int}`` from ``simulate``'s ``args``."""
        names = [n for n, _ in self.params]
        if args is None:
            return {}
        if isinstance(args, dict):
            items = []
            for name, value in args.items():
                if name not in names:
                    raise ValueError(f"simulate: kernel {self.name!r} has no parameter "
                                     f"{name!r} (its parameters: {', '.join(names) or 'none'})")
                items.append((names.index(name), name, value))
        else:
            args = list(args)
            if len(args) > len(names):
                raise ValueError(f"simulate: {len(args)} arguments for the {len(names)} "
                                 f"parameters of kernel {self.name!r} ({', '.join(names)})")
            items = [(i, names[i], v) for i, v in enumerate(args) if v is not None]
        out = {}
        for pos, name, value in items:
            if isinstance(value, (list, tuple)) and all(
                    isinstance(v, int) and not isinstance(v, bool) for v in value):
                # A pointer's buffer: the values its loads read (the
                # simulator's branches on memory, sim/memory.py).
                out[pos] = list(value)
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"simulate: argument {name!r} must be a Python int (the "
                                f"simulator runs loops on integer arguments), or a list of "
                                f"ints for a pointer's buffer, got {type(value).__name__}")
            out[pos] = value
        return out

    def mlir(self, locations=True):
        """The module's text. With ``locations`` (the default) every op
        keeps its ``loc(...)`` (the user's file and line), so that
        ``pipeline-sim`` and ``pipeline-opt`` on the printed text report the
        kernel's Python lines; ``locations=False`` prints the bare IR."""
        return self.module.operation.get_asm(enable_debug_info=locations)

    def __str__(self):
        return self.mlir(locations=True)
