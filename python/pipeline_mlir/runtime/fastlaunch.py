"""The fast call path of a compiled kernel: a launch in a few microseconds.

``CompiledKernel.__call__`` checks its arguments through ``args.bind`` and
``launch.plan_arguments`` (every rule, every message). Doing that on every
call, then building a cuda-bindings ``CUlaunchConfig`` and parameter array,
cost ~130 us of host time per launch. What can be decided once is decided
once here:

- per signature, a converter generated from the parameter kinds (``make_converter``):
  straight-line code that accepts the common argument types (CUDA torch
  tensors, ints, floats, DeviceBuffer/DevicePointer, TmaDescriptor) and
  gives up (``Slow``) on anything else, so that the checked path runs and
  raises its usual message. The fast path never raises an argument error
  of its own: its answer is either the same launch or "ask the checked path";
- per signature, one parameter buffer and its ``void*[]`` (``ParamBuffer``),
  filled by a single precompiled ``struct.pack_into``;
- per (kernel, device): the function handle, the dynamic shared memory and
  cluster attributes set once, a ``CUlaunchConfig`` per grid validated once
  (``Launcher``);
- the launch itself is ``cuLaunchKernelEx`` from libcuda through ctypes
  (``NativeDriver``), which needs no MLIR and no compiler on a GPU host.

Inside CUDA stream capture (``torch.cuda.graph``, ``cuStreamBeginCapture``)
a launch is recorded into the graph and not run: no events are recorded and
nothing is waited for (``Launch.captured``).
"""

import ctypes
import struct
import sys
import threading

from .args import SCALARS, parse_signature
from .errors import CudaError, NoGpuError
from .launch import Launch

# CUlaunchAttributeID CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION of the driver API
_ATTR_CLUSTER_DIMENSION = 4


class _LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: an id, padding to 8 bytes, a 64-byte value union
    whose clusterDim member is its first three unsigned ints."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4),
                ("value", ctypes.c_uint * 16)]


class LaunchConfig(ctypes.Structure):
    """CUlaunchConfig of the driver API."""
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint),
                ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_LaunchAttribute)), ("numAttrs", ctypes.c_uint)]


def launch_config(grid, block, cluster, smem):
    """A CUlaunchConfig for these (normalized) dims; the cluster attribute,
    when there is one, lives in ``config._attr`` (kept alive with it)."""
    cfg = LaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
    cfg.sharedMemBytes = smem
    if cluster is not None:
        attr = _LaunchAttribute()
        attr.id = _ATTR_CLUSTER_DIMENSION
        attr.value[0], attr.value[1], attr.value[2] = cluster
        cfg._attr = attr
        cfg.attrs = ctypes.pointer(attr)
        cfg.numAttrs = 1
    return cfg


class NativeDriver:
    """The few libcuda entry points of a launch, called through ctypes (a
    cuda-bindings call costs microseconds of argument conversion; these
    cost a few hundred nanoseconds). Handles are plain ints."""

    def __init__(self, lib=None):
        if lib is None:
            try:
                lib = ctypes.CDLL("libcuda.so.1")
            except OSError as err:
                raise NoGpuError(f"the CUDA driver library is not available: {err}") from None
        vp = ctypes.c_void_p
        self._launch = self._fn(lib, "cuLaunchKernelEx",
                                [ctypes.POINTER(LaunchConfig), vp, vp, vp])
        # The same entry point taking the config by address: a prepared
        # launch passes ints only (no byref object per call).
        self._launch_addr = self._fn(lib, "cuLaunchKernelEx", [vp, vp, vp, vp])
        self._set_ctx = self._fn(lib, "cuCtxSetCurrent", [vp])
        self._record = self._fn(lib, "cuEventRecord", [vp, vp])
        self._capturing = self._fn(lib, "cuStreamIsCapturing", [vp, ctypes.POINTER(ctypes.c_int)])
        self._copy_async = self._fn(lib, "cuMemcpyHtoDAsync_v2", [ctypes.c_uint64, vp,
                                                                 ctypes.c_size_t, vp])
        self._event_create = self._fn(lib, "cuEventCreate", [ctypes.POINTER(vp), ctypes.c_uint])
        self._event_query = self._fn(lib, "cuEventQuery", [vp])
        self._event_destroy = self._fn(lib, "cuEventDestroy_v2", [vp])
        self._status = ctypes.c_int()

    @staticmethod
    def _fn(lib, name, argtypes):
        f = getattr(lib, name)
        f.argtypes, f.restype = argtypes, ctypes.c_int
        return f

    @staticmethod
    def _check(err, call):
        if err:
            from ._driver import result_name

            raise CudaError(call, err, result_name(err))

    def set_current(self, context):
        self._check(self._set_ctx(context), "cuCtxSetCurrent")

    def launch(self, config, function, params):
        """cuLaunchKernelEx; returns the CUresult (0: launched)."""
        return self._launch(ctypes.byref(config), function, params, None)

    def launch_at(self, context, config, function, params):
        """cuCtxSetCurrent, then cuLaunchKernelEx with the config and the
        parameter array given by address (a ``PreparedLaunch``); returns
        the launch's CUresult. Two foreign calls and nothing else: the
        per-call cost of a prepared launch."""
        err = self._set_ctx(context)
        if err:
            self._check(err, "cuCtxSetCurrent")
        return self._launch_addr(config, function, params, None)

    def record(self, event, stream):
        self._check(self._record(event, stream), "cuEventRecord")

    def is_capturing(self, stream):
        """True while ``stream`` is being captured into a CUDA graph."""
        self._check(self._capturing(stream, ctypes.byref(self._status)), "cuStreamIsCapturing")
        return self._status.value != 0  # CU_STREAM_CAPTURE_STATUS_NONE = 0

    def create_event_pair(self):
        """Two timing events, as cuda-bindings CUevent objects (what
        ``Launch.wait`` and ``elapsed_ms`` hand to cuda-bindings)."""
        from . import _driver

        drv = _driver.cuda()
        return tuple(_driver.check(drv.cuEventCreate(0), "cuEventCreate") for _ in range(2))

    def create_event(self):
        """A CUevent without timing (an int handle): a completion marker."""
        handle = ctypes.c_void_p()
        self._check(self._event_create(ctypes.byref(handle), 2), "cuEventCreate")  # DISABLE_TIMING
        return handle.value

    def destroy_event(self, event):
        self._check(self._event_destroy(event), "cuEventDestroy")

    def event_done(self, event):
        """cuEventQuery: True once the work before the event's record ran."""
        err = self._event_query(event)
        if err == 600:   # CUDA_ERROR_NOT_READY
            return False
        self._check(err, "cuEventQuery")
        return True

    def copy_to_device_async(self, dst, src, nbytes, stream):
        self._check(self._copy_async(dst, src, nbytes, stream), "cuMemcpyHtoDAsync")


_native = None


def native():
    """The process's NativeDriver (NoGpuError without libcuda)."""
    global _native
    if _native is None:
        _native = NativeDriver()
    return _native


# --- parameters --------------------------------------------------------------

_FORMATS = {k: fmt[1:] for k, (fmt, _, _) in SCALARS.items()}
# pointer-sized kinds: ptr, and tma (a pointer to the descriptor's device copy)
_LAYOUT = {"ptr": ("Q", 8, 8), "tma": ("Q", 8, 8), "tma_byval": ("128s", 128, 64)}


class ParamBuffer:
    """One buffer holding every parameter at its natural alignment, the
    ``void*[]`` cuLaunchKernelEx reads (pointing into it), and the
    precompiled ``struct.Struct`` that fills it in one call."""

    def __init__(self, signature):
        fmt, offsets, pos = "<", [], 0
        for kind, _ in parse_signature(signature):
            if kind in _FORMATS:
                code = _FORMATS[kind]
                size = align = struct.calcsize("<" + code)
            else:
                code, size, align = _LAYOUT[kind]
            pad = (-pos) % align
            fmt += "x" * pad + code
            pos += pad
            offsets.append(pos)
            pos += size
        self.struct = struct.Struct(fmt)
        # 64-byte alignment of the base, for by-value tensor maps
        self._raw = ctypes.create_string_buffer(max(pos, 1) + 64)
        base = ctypes.addressof(self._raw)
        self.offset = (-base) % 64
        self.array = (ctypes.c_void_p * max(len(offsets), 1))(
            *[base + self.offset + o for o in offsets])
        self.address = ctypes.addressof(self.array)

    def pack(self, values):
        self.struct.pack_into(self._raw, self.offset, *values)


class PreparedLaunch:
    """Everything cuLaunchKernelEx reads for one set of parameter values,
    grid and stream, built once: a CUlaunchConfig and a parameter buffer of
    its own (so a launch packs nothing and needs no lock). Launching it is
    ``Launcher.fire``."""

    __slots__ = ("config", "params", "config_address", "params_address", "stream", "values",
                 "holder")

    def __init__(self, config, params, stream, values):
        self.config, self.params, self.stream, self.values = config, params, stream, values
        self.holder = None   # launch_cache._Holder: the descriptor slots it names
        self.config_address = ctypes.addressof(config)
        self.params_address = params.address


class Slow(Exception):
    """The fast path cannot take these arguments: use the checked path."""


def _torch_tensor_type():
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", None)


def make_converter(signature):
    """``convert(*args) -> (ordinal, values)`` for ``signature``: the raw
    parameter values (addresses, numbers, TmaDescriptors for 'tma', the
    128 bytes for 'tma_byval') and the CUDA ordinal of the first torch
    tensor (-1: none). Raises Slow for anything it does not recognize or
    that breaks a rule (the checked path then says which rule)."""
    from .memory import DeviceBuffer, DevicePointer
    from .tensormap import TmaDescriptor

    class _NoTensor:  # torch not imported: no argument has this type
        pass

    env = {"Slow": Slow, "DeviceBuffer": DeviceBuffer, "DevicePointer": DevicePointer,
           "TmaDescriptor": TmaDescriptor, "Tensor": _torch_tensor_type() or _NoTensor}
    sig = parse_signature(signature)
    names = [f"a{i}" for i in range(len(sig))]
    body = ["    dev = -1"]
    for i, (kind, align) in enumerate(sig):
        a, v = f"a{i}", f"v{i}"
        if kind == "ptr":
            body += [f"    t = type({a})",
                     "    if t is Tensor:",
                     f"        if not {a}.is_cuda or not {a}.is_contiguous(): raise Slow",
                     f"        if dev < 0: dev = {a}.get_device()",
                     f"        {v} = {a}.data_ptr()",
                     f"    elif t is int and {a} >= 0: {v} = {a}",
                     f"    elif t is DeviceBuffer or t is DevicePointer: {v} = {a}.address",
                     "    else: raise Slow",
                     f"    if {v} % {align}: raise Slow"]
        elif kind in ("f16", "f32", "f64"):
            body += [f"    t = type({a})",
                     f"    if t is float: {v} = {a}",
                     f"    elif t is int: {v} = float({a})",
                     "    else: raise Slow"]
        elif kind in SCALARS:
            _, lo, hi = SCALARS[kind]
            body += [f"    if type({a}) is not int or not {lo} <= {a} <= {hi}: raise Slow",
                     f"    {v} = {a}"]
        elif kind == "tma":
            # its device copy when made (a freed and remade copy is a new
            # object: a prepared launch keyed on it is not reused)
            body += [f"    if type({a}) is not TmaDescriptor: raise Slow",
                     f"    {v} = {a}._device_copy",
                     f"    if {v} is None: {v} = {a}"]
        else:  # tma_byval
            body += [f"    if type({a}) is not TmaDescriptor: raise Slow",
                     f"    {v} = {a}.bytes"]
    values = "".join(f"v{i}, " for i in range(len(sig)))
    src = (f"def convert({', '.join(names)}):\n" + "\n".join(body)
           + f"\n    return dev, ({values})\n")
    exec(compile(src, f"<fast converter {signature}>", "exec"), env)  # noqa: S102
    convert = env["convert"]
    convert.torch_aware = env["Tensor"] is not _NoTensor
    convert.tma_params = tuple(i for i, (kind, _) in enumerate(sig) if kind == "tma")
    return convert


# --- streams and events ------------------------------------------------------

_raw_stream = (None, None)   # (torch module, its _cuda_getCurrentRawStream)


def current_stream_handle(ordinal):
    """torch's current stream on ``ordinal`` as an int handle when torch is
    imported and has initialized CUDA, else 0 (the default stream); the
    same rule as ``compiled.current_stream``, without building a
    torch.cuda.Stream object per call. Once torch has initialized CUDA the
    answer is one call of torch's raw-stream getter."""
    global _raw_stream
    torch = sys.modules.get("torch")
    mod, raw = _raw_stream
    if mod is torch and raw is not None:
        return raw(ordinal)
    if torch is None:
        return 0
    try:
        if not torch.cuda.is_initialized():
            return 0
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            _raw_stream = (torch, raw)   # CUDA stays initialized: ask once
            return raw(ordinal)
        return torch.cuda.current_stream(ordinal).cuda_stream
    except Exception:  # a CPU-only or broken torch: no stream of its own
        return 0


class EventPool:
    """Timing event pairs reused across launches (creating and destroying
    two events per launch costs more than the launch)."""

    def __init__(self, create):
        self._create = create  # () -> (CUevent, CUevent)
        self._free = []
        self._lock = threading.Lock()

    def acquire(self):
        with self._lock:
            if self._free:
                return self._free.pop()
        return self._create()

    def release(self, events):
        with self._lock:
            self._free.append(events)


# --- the launcher -------------------------------------------------------------

_PREPARED_CACHE = 1024   # prepared launches kept per launcher

class Launcher:
    """One compiled kernel loaded on one device, ready to launch fast.

    ``fn``: the loaded ``launch.Kernel``; ``image``: the CompiledKernel
    (name, signature, block, cluster, smem). Built once per device by
    ``CompiledKernel.launcher``."""

    def __init__(self, image, device, fn, driver=None):
        from .launch import validate_config

        self.image, self.device, self.fn = image, device, fn
        self.driver = driver or native()
        self.name = image.name
        self._validate = validate_config
        self.function = _handle(fn.function)
        self.context = _handle(device.context)
        self.params = ParamBuffer(image.signature)
        self.tma_params = tuple(i for i, k in enumerate(image.signature) if k == "tma")
        self._configs = {}
        self._prepared = {}    # (values, grid, stream) -> PreparedLaunch
        self._lock = threading.Lock()
        self._events = None
        self.watchdog = fn.module if getattr(fn.module, "has_watchdog", False) else None
        # Attributes a launch needs, set once instead of checked per launch.
        _, _, cluster, smem = validate_config(self.name, device, fn.attrs, 1 if image.cluster is
                                              None else image.cluster, image.block,
                                              image.cluster, image.smem)
        fn.ensure_launch_attributes(smem, cluster)

    def config(self, grid):
        """The CUlaunchConfig for ``grid``, validated on first use
        (LaunchConfigError) and kept."""
        try:
            cfg, keep = self._configs.get(grid), True
        except TypeError:  # an unhashable grid (a list): validate, do not keep
            cfg, keep = None, False
        if cfg is None:
            img = self.image
            g, block, cluster, smem = self._validate(self.name, self.device, self.fn.attrs, grid,
                                                     img.block, img.cluster, img.smem)
            cfg = launch_config(g, block, cluster, smem)
            cfg.dims = (g, block, cluster, smem)
            if keep and len(self._configs) < 4096:  # grids are few; never grow without bound
                self._configs[grid] = cfg
        return cfg

    def _pack(self, values):
        try:
            self.params.pack(values)
        except (struct.error, OverflowError):  # a float beyond f16: the checked path says so
            raise Slow from None

    def resolve_tma(self, values):
        """'tma' parameters -> device addresses: a TmaDescriptor's device
        copy (made now if needed), a device copy's address, or an int
        (an address already)."""
        from .tensormap import TmaDescriptor

        values = list(values)
        for i in self.tma_params:
            v = values[i]
            if type(v) is TmaDescriptor:
                values[i] = v.device_copy(self.device).address
            elif type(v) is not int:
                values[i] = v.address
        return values

    def prepare(self, values, grid, stream):
        """A PreparedLaunch of raw parameter ``values`` ('tma' ones as
        ``resolve_tma`` takes them) on ``grid`` (validated: LaunchConfigError) and
        the int ``stream``; Slow when a value cannot be packed."""
        g, block, cluster, smem = self.config(grid).dims
        cfg = launch_config(g, block, cluster, smem)
        cfg.dims = (g, block, cluster, smem)
        cfg.hStream = stream
        params = ParamBuffer(self.image.signature)
        if self.tma_params:
            values = self.resolve_tma(values)
        try:
            params.pack(values)
        except (struct.error, OverflowError):
            raise Slow from None
        return PreparedLaunch(cfg, params, stream, tuple(values))

    def prepared(self, values, grid, stream):
        """The PreparedLaunch for these values, grid and stream, built on
        first use and kept (a bounded cache: a caller cycling through many
        argument sets gets the same launches, prepared again)."""
        key = (tuple(values), grid, stream)
        try:
            found = self._prepared.get(key)
        except TypeError:  # an unhashable grid (a list): prepare, do not keep
            return self.prepare(values, grid, stream)
        if found is None:
            if len(self._prepared) >= _PREPARED_CACHE:
                self._prepared.clear()
            found = self._prepared[key] = self.prepare(values, grid, stream)
        return found

    def fire(self, p):
        """Launch a PreparedLaunch: no events, nothing waited for."""
        if self.watchdog is not None:
            self.watchdog._arm_watchdog()
        err = self.driver.launch_at(self.context, p.config_address, self.function,
                                    p.params_address)
        if err:
            self._fail(err, p.config)

    def launch_raw(self, values, grid, stream):
        """Launch with raw parameter values on the int ``stream``; no
        events, nothing waited for (callers that checked their arguments)."""
        self.fire(self.prepare(values, grid, stream))

    def launch(self, values, grid, stream, sync, timeout, timed=True):
        """Launch and return a ``launch.Launch`` (waited for when ``sync``).
        ``timed``: a pooled event pair around the kernel (``elapsed_ms``);
        untimed, the kernel goes out as a cached ``PreparedLaunch`` and the
        Launch records its completion event only if waited for. Inside
        stream capture it is recorded into the graph with no events
        (``Launch.captured``)."""
        drv = self.driver
        if not timed:
            p = self.prepared(values, grid, stream)
            # Whether the stream is being captured matters only to a wait:
            # asked now for a synchronous call, else when the Launch is
            # waited for or read (one driver call fewer per launch).
            captured = drv.is_capturing(stream) if sync else None
            self.fire(p)
            g, block, cluster, smem = p.config.dims
            run = Launch(self.fn, g, block, cluster, smem, stream, (), [], [], None,
                         pool=self._event_pool(), captured=captured, timed=False)
            run._driver = drv
            return run.wait(timeout) if sync and not captured else run
        cfg = self.config(grid)
        if self.tma_params:
            values = self.resolve_tma(values)
        with self._lock:
            self._pack(values)
            cfg.hStream = stream
            drv.set_current(self.context)
            captured = drv.is_capturing(stream)
            events = () if captured else self._event_pool().acquire()
            if self.watchdog is not None:
                self.watchdog._arm_watchdog()
            if events:
                drv.record(_handle(events[0]), stream)
            err = drv.launch(cfg, self.function, self.params.address)
            if err:
                if events:
                    self._events.release(events)
                self._fail(err, cfg)
            if events:
                drv.record(_handle(events[1]), stream)
        g, block, cluster, smem = cfg.dims
        run = Launch(self.fn, g, block, cluster, smem, stream, events, [], [], None,
                     pool=self._events, captured=captured)
        return run.wait(timeout) if sync and not captured else run

    def _event_pool(self):
        """The kernel's event pool (shared with its explicit launches)."""
        if self._events is None:
            pool = getattr(self.fn, "event_pool", None)
            self._events = pool() if pool is not None else EventPool(
                self.driver.create_event_pair)
        return self._events

    def _fail(self, err, cfg):
        from ._driver import result_name
        from .launch import describe

        raise CudaError("cuLaunchKernelEx", err, result_name(err),
                        f"kernel '{self.name}' ({describe(*cfg.dims)})")


def _handle(obj):
    """The int value of a cuda-bindings handle (CUfunction, CUcontext,
    CUevent) or of an int. ``int(handle)`` is the handle itself; a
    handle's ``getPtr()`` is the address of the Python object's copy of it
    (passing that as a CUcontext fails with CUDA_ERROR_CONTEXT_IS_DESTROYED),
    so it is used only for objects that have no int value."""
    if isinstance(obj, int):
        return obj
    try:
        return int(obj)
    except TypeError:
        return int(obj.getPtr())


__all__ = ["EventPool", "LaunchConfig", "Launcher", "NativeDriver", "ParamBuffer",
           "PreparedLaunch", "Slow",
           "current_stream_handle", "launch_config", "make_converter", "native"]
