"""Modules, kernels and launches (cuModuleLoadData + cuLaunchKernelEx).

    mod = Module(cubin_bytes)                      # checks the cubin's SM first
    k = mod.kernel("copy", signature=["ptr", "ptr", "i32"])
    run = k.launch(grid=(128,), block=(64,), cluster=(2, 1, 1), smem=64 << 10,
                   args=[src, dst, 1024], timeout=5.0)
    run.elapsed_ms

Every check that can be made without the driver is made before it is
called, so a bad launch fails with a message naming the rule instead of
CUDA_ERROR_INVALID_VALUE.
"""

import ctypes
import os
import struct
from dataclasses import dataclass

from . import _driver, arch, watchdog
from .args import Pointer, Scalar, Tma, bind, device_address, where
from .device import default_device
from .errors import ArgumentError, CudaError, LaunchConfigError
from .memory import DeviceBuffer, HostMappedBuffer

STATIC_SMEM_DEFAULT_LIMIT = 48 * 1024


def default_timeout():
    return float(os.environ.get("PIPELINE_MLIR_KERNEL_TIMEOUT", "60"))


@dataclass
class FuncAttrs:
    """What the launch checks need to know about a compiled kernel."""

    static_smem: int = 0
    max_threads_per_block: int = 1024
    num_regs: int = 0
    required_cluster: tuple = None  # compiled-in cluster dims, if any


def _dims(value, what, kernel):
    if isinstance(value, int):
        value = (value,)
    try:
        dims = tuple(int(v) for v in value)
    except TypeError:
        raise LaunchConfigError(f"kernel '{kernel}': {what} must be an int or a tuple of "
                                f"1-3 ints, got {value!r}") from None
    if not 1 <= len(dims) <= 3:
        raise LaunchConfigError(f"kernel '{kernel}': {what} has {len(dims)} dimensions; 1-3 allowed")
    if any(d < 1 for d in dims):
        raise LaunchConfigError(f"kernel '{kernel}': every {what} dimension must be >= 1, got {dims}")
    return dims + (1,) * (3 - len(dims))


def validate_config(kernel, device, attrs, grid, block, cluster=None, smem=0):
    """Normalized (grid, block, cluster or None, smem); LaunchConfigError if
    the device or the kernel cannot take this configuration."""
    lim = device.limits
    grid = _dims(grid, "grid", kernel)
    block = _dims(block, "block", kernel)
    for axis, g, m in zip("xyz", grid, lim.max_grid_dims):
        if g > m:
            raise LaunchConfigError(f"kernel '{kernel}': grid {axis} = {g} exceeds the device limit {m}")
    for axis, b, m in zip("xyz", block, lim.max_block_dims):
        if b > m:
            raise LaunchConfigError(f"kernel '{kernel}': block {axis} = {b} exceeds the device limit {m}")
    threads = block[0] * block[1] * block[2]
    cap = min(lim.max_threads_per_block, attrs.max_threads_per_block or lim.max_threads_per_block)
    if threads > cap:
        why = (f" (the kernel uses {attrs.num_regs} registers per thread)"
               if attrs.max_threads_per_block < lim.max_threads_per_block else "")
        raise LaunchConfigError(f"kernel '{kernel}': block {block} has {threads} threads, "
                                f"more than the {cap} allowed{why}")
    if not isinstance(smem, int) or smem < 0:
        raise LaunchConfigError(f"kernel '{kernel}': smem must be a non-negative int, got {smem!r}")
    total = smem + attrs.static_smem
    if total > lim.max_smem_per_block_optin:
        raise LaunchConfigError(
            f"kernel '{kernel}': {smem} bytes of dynamic shared memory + {attrs.static_smem} "
            f"static = {total} bytes, more than the {lim.max_smem_per_block_optin} bytes a block "
            f"can have on {device.name} ({device.sm})")
    if cluster is not None:
        cluster = _dims(cluster, "cluster", kernel)
        if device.cc < (9, 0):
            raise LaunchConfigError(f"kernel '{kernel}': thread block clusters need compute "
                                    f"capability 9.0+, {device.name} is {device.sm}")
        for axis, g, c in zip("xyz", grid, cluster):
            if g % c:
                raise LaunchConfigError(f"kernel '{kernel}': cluster {cluster} does not divide "
                                        f"grid {grid} in {axis} ({g} % {c} != 0)")
        size = cluster[0] * cluster[1] * cluster[2]
        if size > lim.max_cluster_size_nonportable:
            raise LaunchConfigError(f"kernel '{kernel}': cluster {cluster} has {size} blocks; at "
                                    f"most {lim.max_cluster_size_nonportable} are possible "
                                    f"({lim.max_cluster_size_portable} portably)")
        if attrs.required_cluster and tuple(attrs.required_cluster) != cluster:
            raise LaunchConfigError(f"kernel '{kernel}' was compiled for cluster "
                                    f"{tuple(attrs.required_cluster)}, launched with {cluster}")
        if cluster == (1, 1, 1) and not attrs.required_cluster:
            cluster = None  # a 1x1x1 cluster is an ordinary launch
    return grid, block, cluster, smem


def describe(grid, block, cluster, smem):
    s = f"grid {grid}, block {block}"
    if cluster:
        s += f", cluster {cluster}"
    return s + f", smem {smem} B"


class _ParamPack:
    """The void*[] array cuLaunchKernelEx reads, and the storage it points at."""

    def __init__(self, blobs):
        self._keep = []
        self.array = (ctypes.c_void_p * max(len(blobs), 1))()
        for i, (data, align) in enumerate(blobs):
            raw = ctypes.create_string_buffer(len(data) + align)
            addr = ctypes.addressof(raw)
            addr += (-addr) % align
            ctypes.memmove(addr, data, len(data))
            self._keep.append(raw)
            self.array[i] = addr

    @property
    def address(self):
        return ctypes.addressof(self.array)


def plan_arguments(kernel, bound, names=None):
    """First pass, no allocation: resolve device addresses and check their
    alignment. Returns [(arg, address or None, host array or None)]."""
    planned = []
    for i, a in enumerate(bound):
        if isinstance(a, Pointer):
            try:
                addr, host = device_address(a.obj)
            except ArgumentError as err:
                raise ArgumentError(f"{where(i, kernel, names)}: {err}") from None
            if addr is not None and addr % a.align:
                raise ArgumentError(
                    f"{where(i, kernel, names)}: address {addr:#x} is not "
                    f"{a.align}-byte aligned ({addr % a.align} bytes past); declare "
                    f"ptr(x, align=N) / 'ptr:N' if the kernel needs less")
            planned.append((a, addr, host))
        else:
            planned.append((a, None, None))
    return planned


class Launch:
    """One kernel launch: wait for it, read its time, get outputs back."""

    def __init__(self, kernel, grid, block, cluster, smem, stream, events, temps, copy_back,
                 params, pool=None, captured=False, timed=True):
        self.kernel, self.grid, self.block, self.cluster, self.smem = kernel, grid, block, cluster, smem
        self.stream = stream
        self._events, self._temps, self._copy_back, self._params = events, temps, copy_back, params
        self._pool = pool  # events come from (and go back to) this EventPool
        self._elapsed = None
        # Recorded into a CUDA graph under stream capture: it runs when the
        # graph is launched, so there is nothing to wait for or time here.
        # None: not asked at launch (an asynchronous untimed launch saves the
        # driver call); ``captured`` asks the stream when first read.
        self._captured = captured
        self.done = bool(captured)
        # Untimed (an asynchronous call of a CompiledKernel, the default):
        # no events went out with the kernel; ``wait`` records one then,
        # which completes after the kernel (stream order) and after
        # anything queued on the stream since.
        self.timed = timed
        self._driver = None   # the launcher's driver (NativeDriver or a stand-in)

    @property
    def captured(self):
        """Whether the launch was recorded into a CUDA graph (stream
        capture) rather than run."""
        if self._captured is None:
            from .fastlaunch import native

            drv = self._driver or native()
            self._captured = bool(drv.is_capturing(self.stream))
            self.done = self.done or self._captured
        return self._captured

    @captured.setter
    def captured(self, value):
        self._captured = value

    def _describe(self):
        return self.kernel.name, describe(self.grid, self.block, self.cluster, self.smem)

    def wait(self, timeout=None):
        """Block until the kernel finished (at most `timeout` s, default
        PIPELINE_MLIR_KERNEL_TIMEOUT or 60); copy host arrays back."""
        if self.done:
            return self
        timeout = default_timeout() if timeout is None else timeout
        if not self._events:
            if not self._record_completion():
                return self
        wd = self.kernel.module._watchdog
        code, name = watchdog.wait_event(self._events[1], timeout, self._describe)
        if code:
            record = None
            if wd is not None:
                try:
                    record = watchdog.decode_record(wd.read())
                except ValueError:
                    record = None
            self.done = True
            raise watchdog.fault_error("kernel launch", code, name, self.kernel.name, record,
                                       self.kernel.module.watchdog_names,
                                       describe(self.grid, self.block, self.cluster, self.smem))
        drv = _driver.cuda()
        if self.timed:
            self._elapsed = _driver.check(drv.cuEventElapsedTime(*self._events),
                                          "cuEventElapsedTime")
        self._give_back_events()
        for buf, host in self._copy_back:
            buf.copy_to_host(host)
        for buf in self._temps:
            buf.free()
        self._temps, self._copy_back, self._params = [], [], None
        self.done = True
        return self

    def _record_completion(self):
        """An untimed launch being waited for: record an event on its
        stream now (False: the stream is being captured into a CUDA graph,
        so the kernel was recorded, not run, and there is nothing to wait
        for)."""
        from .fastlaunch import _handle, native

        drv = self._driver or native()
        if drv.is_capturing(self.stream):
            self.captured = self.done = True
            return False
        self._events = self._pool.acquire()
        drv.record(_handle(self._events[1]), self.stream)
        return True

    def _give_back_events(self):
        events, self._events = self._events, ()
        if not events:
            return
        if self._pool is not None:
            self._pool.release(events)
            return
        drv = _driver.cuda()
        for ev in events:
            drv.cuEventDestroy(ev)

    def __del__(self):
        # An asynchronous launch nobody waited for: its events are reusable
        # (recording a pending event again is allowed); without a pool they
        # are destroyed, never leaked.
        events = getattr(self, "_events", ())
        if not events:
            return
        self._events = ()
        if getattr(self, "_pool", None) is not None:
            self._pool.release(events)
            return
        try:
            drv = _driver.cuda()
            for ev in events:
                drv.cuEventDestroy(ev)
        except Exception:  # noqa: BLE001 - interpreter shutdown: the context goes with it
            pass

    @property
    def elapsed_ms(self):
        """Kernel time between the CUDA events around the launch (waits first)."""
        if self.captured:
            raise RuntimeError(f"kernel '{self.kernel.name}' was recorded into a CUDA graph "
                               "(stream capture), not run: time the graph's launches instead")
        if not self.timed:
            raise RuntimeError(f"kernel '{self.kernel.name}' was launched untimed (an "
                               "asynchronous call records no events, to launch in a few "
                               "microseconds): pass timed=True to read its time")
        self.wait()
        return self._elapsed


class Kernel:
    """A function of a loaded Module (or a stand-in with `attrs` for tests)."""

    def __init__(self, module, name, signature=None, *, device=None, attrs=None, function=None):
        self.module, self.name, self.signature = module, name, signature
        self.device = device or module.device
        self.function = function
        self.attrs = attrs or FuncAttrs()
        self._dynamic_smem_set = STATIC_SMEM_DEFAULT_LIMIT
        self._nonportable_set = False
        self._events = None   # fastlaunch.EventPool shared by every launch of this kernel

    def event_pool(self):
        """The timing-event pairs of this kernel's launches, reused (the
        explicit path and the fast ``Launcher`` share it)."""
        if self._events is None:
            from .fastlaunch import EventPool

            def create():
                drv = _driver.cuda()
                return tuple(_driver.check(drv.cuEventCreate(0), "cuEventCreate")
                             for _ in range(2))

            self._events = EventPool(create)
        return self._events

    def ensure_launch_attributes(self, smem, cluster):
        """Set, once, the function attributes a launch with ``smem`` bytes of
        dynamic shared memory and ``cluster`` needs (the larger opt-in
        shared memory, non-portable cluster sizes)."""
        if smem > self._dynamic_smem_set:
            self._set_attr("CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", smem)
            self._dynamic_smem_set = smem
        if cluster is not None and cluster[0] * cluster[1] * cluster[2] > \
                self.device.limits.max_cluster_size_portable and not self._nonportable_set:
            self._set_attr("CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 1)
            self._nonportable_set = True

    @classmethod
    def _load(cls, module, name, signature):
        drv = _driver.cuda()
        try:
            fn = _driver.check(drv.cuModuleGetFunction(module.handle, name.encode()),
                               "cuModuleGetFunction")
        except CudaError as err:
            raise CudaError(err.call, err.code, err.name,
                            f"no kernel named '{name}' in {module.label}") from None

        def attr(n):
            return _driver.check(drv.cuFuncGetAttribute(getattr(drv.CUfunction_attribute, n), fn),
                                 n)

        req = tuple(attr(f"CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_{a}") for a in ("WIDTH", "HEIGHT", "DEPTH"))
        attrs = FuncAttrs(static_smem=attr("CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES"),
                          max_threads_per_block=attr("CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK"),
                          num_regs=attr("CU_FUNC_ATTRIBUTE_NUM_REGS"),
                          required_cluster=req if any(req) else None)
        return cls(module, name, signature, attrs=attrs, function=fn)

    def _set_attr(self, name, value):
        drv = _driver.cuda()
        _driver.check(drv.cuFuncSetAttribute(self.function, getattr(drv.CUfunction_attribute, name),
                                             value), f"cuFuncSetAttribute({name}={value})")

    def max_active_clusters(self, block, cluster, smem=0):
        """How many clusters of ``cluster`` CTAs (with ``block`` threads and
        ``smem`` dynamic shared memory each) the GPU runs at once
        (``cuOccupancyMaxActiveClusters``). A persistent kernel launched with
        more clusters than this runs a second, mostly idle wave: SMs are
        grouped in GPCs, so fewer than ``multiprocessors / cluster_size``
        clusters may fit."""
        _, block, cluster, smem = validate_config(self.name, self.device, self.attrs,
                                                  cluster or (1, 1, 1), block, cluster, smem)
        self.device.require_real(f"occupancy query of kernel '{self.name}'")
        self.device.make_current()
        drv = _driver.cuda()
        self.ensure_launch_attributes(smem, None)
        config = drv.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = cluster or (1, 1, 1)
        config.blockDimX, config.blockDimY, config.blockDimZ = block
        config.sharedMemBytes = smem
        attr = drv.CUlaunchAttribute()
        attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = \
            cluster or (1, 1, 1)
        config.attrs = [attr]
        config.numAttrs = 1
        return _driver.check(drv.cuOccupancyMaxActiveClusters(self.function, config),
                             "cuOccupancyMaxActiveClusters")

    def launch(self, grid, block, cluster=None, smem=0, args=(), stream=None, sync=True,
               timeout=None):
        """Launch; with `sync` (default) wait for it (see Launch.wait)."""
        grid, block, cluster, smem = validate_config(self.name, self.device, self.attrs, grid,
                                                     block, cluster, smem)
        bound = bind(args, self.signature, self.name)
        planned = plan_arguments(self.name, bound)
        self.device.require_real(f"launch of kernel '{self.name}'")
        self.device.make_current()
        drv = _driver.cuda()
        temps, copy_back, blobs = [], [], []
        try:
            for a, addr, host in planned:
                if isinstance(a, Scalar):
                    blobs.append(a.pack())
                elif isinstance(a, Pointer):
                    if host is not None:
                        buf = DeviceBuffer(host.nbytes, self.device)
                        temps.append(buf)
                        buf.copy_from_host(host)
                        if host.flags["WRITEABLE"]:
                            copy_back.append((buf, host))
                        addr = buf.address
                    blobs.append((struct.pack("<Q", addr), 8))
                elif isinstance(a, Tma):
                    if a.by_value:
                        blobs.append((a.desc.bytes, 64))
                    else:
                        blobs.append((struct.pack("<Q", a.desc.device_copy(self.device).address), 8))
            params = _ParamPack(blobs)
            self.ensure_launch_attributes(smem, cluster)
            config = drv.CUlaunchConfig()
            config.gridDimX, config.gridDimY, config.gridDimZ = grid
            config.blockDimX, config.blockDimY, config.blockDimZ = block
            config.sharedMemBytes = smem
            config.hStream = _stream_handle(stream)
            if cluster is not None:
                attr = drv.CUlaunchAttribute()
                attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
                attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
                config.attrs = [attr]
                config.numAttrs = 1
            else:
                config.numAttrs = 0
            pool = self.event_pool()
            events = pool.acquire()
            self.module._arm_watchdog()
            try:
                _driver.check(drv.cuEventRecord(events[0], config.hStream), "cuEventRecord")
                _driver.check(drv.cuLaunchKernelEx(config, self.function, params.address, 0),
                              "cuLaunchKernelEx")
            except CudaError as err:
                pool.release(events)
                raise CudaError(err.call, err.code, err.name,
                                f"kernel '{self.name}' ({describe(grid, block, cluster, smem)})") from None
            _driver.check(drv.cuEventRecord(events[1], config.hStream), "cuEventRecord")
        except BaseException:
            for buf in temps:
                buf.free()
            raise
        run = Launch(self, grid, block, cluster, smem, config.hStream, events, temps, copy_back,
                     params, pool=pool)
        return run.wait(timeout) if sync else run


def stream_address(stream):
    """The CUstream handle (an int) of `stream`: None or 0 (the legacy
    default stream), an int, a ``torch.cuda.Stream`` (``.cuda_stream``), an
    object with the CUDA stream protocol (``__cuda_stream__()``) or a
    cuda-bindings CUstream (``getPtr()``)."""
    if stream is None:
        return 0
    if hasattr(stream, "__cuda_stream__"):  # CUDA Python stream protocol
        return int(stream.__cuda_stream__()[1])
    if hasattr(stream, "cuda_stream"):  # torch.cuda.Stream
        return int(stream.cuda_stream)
    if hasattr(stream, "getPtr"):  # cuda.bindings CUstream
        return int(stream.getPtr())
    if isinstance(stream, int) and not isinstance(stream, bool) and stream >= 0:
        return stream
    raise ArgumentError(f"stream must be None, a CUstream handle (int), a torch.cuda.Stream, "
                        f"a CUstream or an object with __cuda_stream__, got "
                        f"{type(stream).__name__} {stream!r}")


def _stream_handle(stream):
    drv = _driver.cuda()
    if isinstance(stream, drv.CUstream):
        return stream
    return drv.CUstream(stream_address(stream))


class Module:
    """A loaded cubin (or PTX, JIT-compiled by the driver).

    `image`: bytes, PTX text, or a path to a .cubin/.ptx file. The image's
    SM target is checked against the device before anything is loaded.
    `watchdog_names`: pipeline names by id (else read from the module's
    ``__pipeline_watchdog_names`` global when it has one).
    """

    def __init__(self, image, device=None, name=None, watchdog_names=None):
        if isinstance(image, os.PathLike) or (isinstance(image, str) and
                                              image.endswith((".cubin", ".ptx"))):
            path = os.fspath(image)
            name = name or os.path.basename(path)
            with open(path, "rb") as f:
                image = f.read()
        self.label = name or "module"
        self.target = arch.image_target(image)
        self.device = device or default_device()
        arch.check_compatible(self.target, self.device.cc,
                              f"device '{self.device.name}'",
                              f"{self.target.kind} '{self.label}'")
        self.device.require_real(f"cuModuleLoadData({self.label})")
        self.device.make_current()
        drv = _driver.cuda()
        data = image.encode() if isinstance(image, str) else bytes(image)
        if self.target.kind == "ptx" and not data.endswith(b"\0"):
            data += b"\0"
        self.handle = _driver.check(drv.cuModuleLoadData(data), f"cuModuleLoadData({self.label})")
        self._kernels = {}
        self.watchdog_names = list(watchdog_names) if watchdog_names else self._read_names()
        self._watchdog = None
        gp = self._global(watchdog.BUFFER_SYMBOL)
        if gp is not None:
            addr, size = gp
            if size != 8:
                raise CudaError("cuModuleGetGlobal", 0, "CUDA_SUCCESS",
                                f"{watchdog.BUFFER_SYMBOL} is {size} bytes, expected 8 (i64)")
            self._watchdog = HostMappedBuffer(watchdog.BUFFER_BYTES, self.device)
            ptr = ctypes.c_uint64(self._watchdog.device_address)
            _driver.check(drv.cuMemcpyHtoD(addr, ctypes.addressof(ptr), 8),
                          "cuMemcpyHtoD(watchdog buffer)")

    @property
    def has_watchdog(self):
        return self._watchdog is not None

    def _global(self, symbol):
        drv = _driver.cuda()
        ret = drv.cuModuleGetGlobal(self.handle, symbol.encode())
        if int(ret[0]) != 0:
            return None
        return int(ret[1]), int(ret[2])

    def _read_names(self):
        g = self._global(watchdog.NAMES_SYMBOL)
        if g is None:
            return []
        addr, size = g
        buf = ctypes.create_string_buffer(size)
        _driver.check(_driver.cuda().cuMemcpyDtoH(ctypes.addressof(buf), addr, size),
                      "cuMemcpyDtoH(watchdog names)")
        return watchdog.decode_names(buf.raw)

    def _arm_watchdog(self):
        if self._watchdog is not None:
            self._watchdog.clear()

    def watchdog_record(self):
        """The decoded record in the host buffer (None: nothing written)."""
        return watchdog.decode_record(self._watchdog.read()) if self._watchdog else None

    def kernel(self, name, signature=None):
        key = (name, tuple(signature) if signature else None)
        if key not in self._kernels:
            self._kernels[key] = Kernel._load(self, name, signature)
        return self._kernels[key]

    def unload(self):
        if getattr(self, "handle", None) is not None:
            _driver.cuda().cuModuleUnload(self.handle)
            self.handle = None
        if getattr(self, "_watchdog", None) is not None:
            self._watchdog.free()
            self._watchdog = None
