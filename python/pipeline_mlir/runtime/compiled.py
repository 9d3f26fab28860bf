"""A compiled kernel that launches itself: ``fn(a, b, n, grid=...)``.

``Kernel.compile()`` (pipeline_mlir.kernel) returns a :class:`CompiledKernel`.
It *is* the cubin (a ``bytes`` subclass: write it to a file, hand it to
``Module``, compare it, as before) and it knows how the kernel is launched:
its name, its parameters (names and kinds, from the Kernel's params), the
block size and cluster dims it was compiled for, and its dynamic shared
memory. So a launch is one call::

    fn = kernel.compile()
    fn(src, dst, 1024, grid=(128,))                  # waits, returns a Launch
    fn(src, dst, n=1024, grid=128, sync=False).wait()
    fn(x, y, 7, grid=(64,), stream=torch.cuda.Stream())

Arguments, by parameter kind:
  ptr   torch tensors (CUDA: passed in place; CPU: copied in and back), DLPack
        and ``__cuda_array_interface__`` objects, numpy arrays (copied to a
        temporary device buffer and back), DeviceBuffer / DevicePointer, or a
        raw device address (int)
  i32, i64, u32, ...  Python ints, numpy integers, anything with __index__
  f32, f16, f64       Python floats or ints, numpy floats
  tma   a ``runtime.TmaDescriptor`` (``make_tma_descriptor(...)``); its
        device copy is made on first use and passed by address
Everything is checked before the driver is called; a wrong argument raises
``ArgumentError`` (a TypeError) naming it: "argument 2 ('n') of kernel 'copy':
4294967296 is out of range for i32". A bad grid raises LaunchConfigError (a
ValueError).

Launch options (keyword-only): ``grid`` (required; int or 1-3 ints),
``stream`` (default: torch's current stream when torch is imported and has
initialized CUDA, else the default stream; or an int handle, a
torch.cuda.Stream, a CUstream, an object with ``__cuda_stream__``),
``sync`` (default True: wait for the kernel, with the host deadline
``timeout``, and copy host arrays back; False returns the running Launch),
``timeout``, ``device`` (default: the GPU of the torch CUDA tensors
passed, else GPU 0) and ``timed`` (default: ``sync``; True records CUDA
events around the kernel for ``Launch.elapsed_ms``: an asynchronous call
records none unless asked, as the events cost more host time than the
launch; ``wait()`` still works). Parameters whose names collide with these can still be
passed positionally.

Calls after the first take the fast path (runtime/fastlaunch.py): the
arguments' types seen before are converted by code generated for the
signature, the launch configuration of each grid is validated once, and
``cuLaunchKernelEx`` is called through ctypes: a few microseconds of host
time; an asynchronous call launches a prepared configuration and parameter
buffer cached per (argument values, grid, stream). Anything unusual goes
through the checked path, with the same messages. Inside CUDA stream capture (``torch.cuda.graph``) a call is
recorded into the graph: it returns a Launch with ``captured`` set, which
has nothing to wait for.

The module is loaded on the first call, once per CUDA context, and stays
loaded while the object lives. ``CompiledKernel.cached(...)`` (what
``Kernel.compile()`` uses) returns one object per content hash of image and
launch metadata, so compiling the same kernel twice reuses the loaded module.

Only cuda-bindings and numpy are needed (no MLIR): ``metadata()`` /
``save(path)`` write what a GPU machine needs, ``from_metadata`` /
``from_file(path)`` rebuild the callable there.
"""

import hashlib
import inspect
import json
import os
import sys

from .args import Pointer, Scalar, parse_signature
from .bounded import put_bounded
from .args import bind as _bind_args
from .device import default_device
from .errors import ArgumentError
from .fastlaunch import Launcher, Slow, _torch_tensor_type, current_stream_handle, make_converter
from .launch import FuncAttrs, Module, plan_arguments, stream_address, validate_config
from .watchdog import BUFFER_SYMBOL

LAUNCH_OPTIONS = ("grid", "stream", "sync", "timeout", "device", "timed")
COMPILED_CACHE = 512   # CompiledKernel objects kept by content hash (``cached``)


def _dims(value, what):
    if isinstance(value, int):
        value = (value,)
    try:
        dims = tuple(int(v) for v in value)
    except TypeError:
        raise ValueError(f"{what} must be an int or 1-3 ints, got {value!r}") from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ValueError(f"{what} must be 1-3 positive ints, got {value!r}")
    return dims + (1,) * (3 - len(dims))


class _FastEntry:
    """The fast path for one ``device=`` argument: the converter generated
    for the signature and the launcher per CUDA ordinal."""

    __slots__ = ("convert", "launchers")

    def __init__(self, convert):
        self.convert, self.launchers = convert, {}


def _params(params):
    """[(name, kind)] from [(name, kind)] or [kind] (names arg0, arg1...)."""
    out = []
    for i, p in enumerate(params):
        name, kind = (f"arg{i}", p) if isinstance(p, str) else tuple(p)
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"parameter {i}: name {name!r} is not an identifier")
        if any(name == n for n, _ in out):
            raise ValueError(f"parameter {i}: name {name!r} is used twice")
        parse_signature([kind])  # ArgumentError for an unknown kind
        out.append((name, str(kind)))
    return tuple(out)


def current_stream(device):
    """torch's current stream on ``device`` when torch is imported and has
    initialized CUDA (importing or initializing it here would cost seconds
    and a context for nothing), else None (the default stream)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_initialized():
            return None
        return torch.cuda.current_stream(device.ordinal)
    except Exception:  # a CPU-only or broken torch: no stream of its own
        return None


def _tensor_ordinal(values):
    """The CUDA ordinal of the first torch CUDA tensor among ``values``."""
    for v in values:
        dev = getattr(v, "device", None)
        if getattr(dev, "type", None) == "cuda" and type(v).__module__.startswith("torch"):
            return dev.index or 0
    return None


def _context_key(device):
    ctx = device.context
    return int(ctx.getPtr()) if hasattr(ctx, "getPtr") else int(ctx)


def content_key(image, metadata):
    """sha256 of the image and the launch metadata (hex)."""
    h = hashlib.sha256(bytes(image))
    h.update(b"\0" + json.dumps(metadata, sort_keys=True).encode())
    return h.hexdigest()


def _rebuild(image, metadata):
    return CompiledKernel.from_metadata(image, metadata)


class CompiledKernel(bytes):
    """The cubin (or PTX) of one kernel plus how to launch it; calling it
    launches it (see the module docstring).

    Args:
      image: cubin bytes (or PTX text/bytes, JIT-compiled by the driver).
      name: the kernel's symbol.
      params: ``[(name, kind)]`` with kinds of ``runtime.args.KINDS``
        (``"ptr"``, ``"ptr:4"``, ``"i32"``, ``"f32"``, ``"tma"``...), or kinds
        alone (named arg0, arg1, ...).
      block: threads per CTA the kernel was compiled for (int or 1-3 ints).
      cluster: CTAs per cluster (None: no cluster).
      smem: dynamic shared memory in bytes.
      chip: the target it was compiled for ("sm_90a"), informational.
      watchdog_names: pipeline names by id, for the device watchdog's report.
      watchdog: the image was compiled with the device watchdog
        (``Kernel.compile(watchdog=True)``); a launch then reads its record
        and forensic report when a wait times out (the module finds the
        watchdog's buffer by its symbol when it loads).
    """

    _cache = {}

    def __new__(cls, image, *, name, params, block, cluster=None, smem=0, chip=None,
                watchdog_names=None, watchdog=False):
        data = image.encode() if isinstance(image, str) else bytes(image)
        self = super().__new__(cls, data)
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be the kernel's symbol, got {name!r}")
        self.name = name
        self.params = _params(params)
        self.block = _dims(block, "block")
        self.cluster = None if cluster is None else _dims(cluster, "cluster")
        if self.cluster == (1, 1, 1):
            self.cluster = None
        if isinstance(smem, bool) or not isinstance(smem, int) or smem < 0:
            raise ValueError(f"smem must be a non-negative int, got {smem!r}")
        self.smem = smem
        self.chip = chip
        self.watchdog_names = list(watchdog_names) if watchdog_names else None
        if not isinstance(watchdog, bool):
            raise ValueError(f"watchdog must be a bool, got {watchdog!r}")
        self.watchdog = watchdog
        self._modules = {}
        self._launchers = {}   # context -> fastlaunch.Launcher
        self._fast = {}        # device argument -> _FastEntry
        return self

    # -- what it is -----------------------------------------------------------

    @property
    def image(self):
        """The cubin/PTX as plain bytes."""
        return bytes(self)

    @property
    def signature(self):
        """The parameter kinds, as ``runtime.Module.kernel(signature=...)`` takes them."""
        return [k for _, k in self.params]

    @property
    def param_names(self):
        return [n for n, _ in self.params]

    def metadata(self):
        """JSON-able launch metadata (what ``from_metadata`` takes back)."""
        return {"name": self.name, "params": [list(p) for p in self.params],
                "block": list(self.block),
                "cluster": list(self.cluster) if self.cluster else None,
                "smem": self.smem, "chip": self.chip, "watchdog_names": self.watchdog_names,
                "watchdog": self.watchdog}

    @property
    def key(self):
        """Content hash of the image and the launch metadata."""
        return content_key(self, self.metadata())

    @classmethod
    def from_metadata(cls, image, metadata):
        """The (cached) callable for ``image`` and ``metadata()``'s dict."""
        meta = dict(metadata)
        unknown = set(meta) - {"name", "params", "block", "cluster", "smem", "chip",
                               "watchdog_names", "watchdog"}
        if unknown:
            raise ValueError(f"unknown launch metadata {sorted(unknown)}")
        return cls.cached(image, **meta)

    @classmethod
    def cached(cls, image, **metadata):
        """One object per content hash of ``image`` and ``metadata``: the
        same kernel compiled twice shares its loaded modules."""
        probe = cls(image, **metadata)
        key = probe.key
        found = cls._cache.get(key)
        if found is None:
            found = put_bounded(cls._cache, key, probe, COMPILED_CACHE)
        return found

    def save(self, path):
        """Write the image to ``path`` and the metadata to ``<path without
        its extension>.json``; ``from_file(path)`` reads both back."""
        with open(path, "wb") as f:
            f.write(self)
        with open(os.path.splitext(path)[0] + ".json", "w") as f:
            f.write(json.dumps(self.metadata()) + "\n")
        return path

    @classmethod
    def from_file(cls, path):
        with open(path, "rb") as f:
            image = f.read()
        with open(os.path.splitext(path)[0] + ".json") as f:
            return cls.from_metadata(image, json.load(f))

    def __reduce__(self):
        return (_rebuild, (bytes(self), self.metadata()))

    def __repr__(self):
        params = ", ".join(f"{n}: {k}" for n, k in self.params)
        cluster = f", cluster={self.cluster}" if self.cluster else ""
        return (f"CompiledKernel({self.name!r}, {self.chip or 'image'}, {len(self)} B, "
                f"params=({params}), block={self.block}{cluster}, smem={self.smem}, "
                f"hash={self.key[:12]})")

    # bytes.__str__ would print the whole image; print() shows the summary.
    __str__ = __repr__

    @property
    def __signature__(self):
        P = inspect.Parameter
        params = [P(n, P.POSITIONAL_OR_KEYWORD) for n in self.param_names
                  if n not in LAUNCH_OPTIONS]
        params += [P("grid", P.KEYWORD_ONLY), P("stream", P.KEYWORD_ONLY, default=None),
                   P("sync", P.KEYWORD_ONLY, default=True),
                   P("timeout", P.KEYWORD_ONLY, default=None),
                   P("device", P.KEYWORD_ONLY, default=None),
                   P("timed", P.KEYWORD_ONLY, default=None)]
        return inspect.Signature(params)

    # -- launching ------------------------------------------------------------

    def _collect(self, args, kwargs):
        """The argument values in parameter order, from positional and
        keyword arguments (TypeError naming what is missing or extra)."""
        names = self.param_names
        listing = ", ".join(f"{n}: {k}" for n, k in self.params)
        if len(args) > len(names):
            raise ArgumentError(f"kernel '{self.name}' takes {len(names)} argument(s) "
                                f"({listing}), got {len(args)}")
        values = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names:
                raise ArgumentError(f"kernel '{self.name}' has no parameter {key!r}; "
                                    f"its parameters are ({listing})")
            if key in values:
                raise ArgumentError(f"kernel '{self.name}': argument {key!r} was given "
                                    "twice (by position and by keyword)")
            values[key] = value
        missing = [n for n in names if n not in values]
        if missing:
            raise ArgumentError(f"kernel '{self.name}' is missing argument(s) "
                                f"{', '.join(repr(m) for m in missing)} (parameters: {listing})")
        return [values[n] for n in names]

    def bind(self, *args, **kwargs):
        """Check the arguments without launching: the typed runtime Args
        (ArgumentError naming the first wrong one). Pointer arguments are
        resolved (address and alignment) as a launch would."""
        bound = _bind_args(self._collect(args, kwargs), self.signature, self.name,
                           names=self.param_names)
        plan_arguments(self.name, bound, names=self.param_names)
        return bound

    def module(self, device=None):
        """The ``runtime.Module`` of this image in ``device``'s context
        (loaded on first use, once per context)."""
        device = device or default_device()
        device.require_real(f"loading kernel '{self.name}'")
        key = _context_key(device)
        mod = self._modules.get(key)
        if mod is None:
            mod = Module(bytes(self), device=device, name=self.name,
                         watchdog_names=self.watchdog_names)
            if self.watchdog and not mod.has_watchdog:
                raise RuntimeError(
                    f"kernel '{self.name}' was compiled with the watchdog but its image has "
                    f"no {BUFFER_SYMBOL} (docs/watchdog.md): a timed-out wait "
                    "could not report")
            self._modules[key] = mod
        return mod

    def function(self, device=None):
        """The loaded ``runtime.Kernel`` (the explicit launch path)."""
        return self.module(device).kernel(self.name, signature=self.signature)

    def launcher(self, device=None):
        """The ``fastlaunch.Launcher`` of this kernel on ``device`` (loads
        the module on first use): ``launch_raw(values, grid, stream)``
        launches with raw parameter values and no checks beyond the grid,
        for callers that checked their arguments themselves (the GEMM)."""
        device = device or default_device()
        device.require_real(f"loading kernel '{self.name}'")   # NoGpuError, not a bad handle
        key = _context_key(device)
        found = self._launchers.get(key)
        if found is None:
            found = self._launchers[key] = Launcher(self, device, self.function(device))
        return found

    def __call__(self, *args, grid, stream=None, sync=True, timeout=None, device=None,
                 timed=None, **kwargs):
        # The fast path: arguments of the types seen before, converted by
        # code generated for this signature; anything else (or the first
        # call) goes through the checked path, which keeps every message.
        entry = None if kwargs else self._fast.get(device)
        if entry is not None:
            try:
                ordinal, values = entry.convert(*args)
            except (Slow, TypeError):  # TypeError: a wrong argument count
                ordinal = None
            launcher = None if ordinal is None else entry.launchers.get(
                0 if device is not None or ordinal < 0 else ordinal)
            if launcher is not None:
                if stream is None:
                    stream = current_stream_handle(launcher.device.ordinal)
                elif type(stream) is not int:
                    stream = stream_address(stream)
                try:
                    return launcher.launch(values, grid, stream, sync, timeout,
                                           sync if timed is None else timed)
                except Slow:  # a value struct cannot pack: nothing was launched
                    pass
        return self._call_checked(args, kwargs, grid, stream, sync, timeout, device, timed)

    def _call_checked(self, args, kwargs, grid, stream, sync, timeout, device, timed=None):
        """Every check, with the messages; then the launch (and, for
        arguments the fast path can take, its set-up for the next call)."""
        values = self._collect(args, kwargs)
        bound = _bind_args(values, self.signature, self.name, names=self.param_names)
        planned = plan_arguments(self.name, bound, names=self.param_names)
        device_arg = device
        if device is None:  # the device of the torch tensors given, else GPU 0
            device = default_device(_tensor_ordinal(values) or 0)
        # the checks that need no loaded module, before loading it
        validate_config(self.name, device, FuncAttrs(required_cluster=self.cluster), grid,
                        self.block, self.cluster, self.smem)
        fn = self.function(device)
        if getattr(fn, "function", None) is None or any(host is not None
                                                        for _, _, host in planned):
            # host arrays: copied to temporary device buffers and back (and
            # stand-ins without a loaded function: the deviceless tests)
            if stream is None:
                stream = current_stream(device)
            return fn.launch(grid=grid, block=self.block, cluster=self.cluster, smem=self.smem,
                             args=bound, stream=stream, sync=sync, timeout=timeout)
        launcher = self.launcher(device)
        raw = []
        for a, addr, _ in planned:
            if isinstance(a, Scalar):
                raw.append(a.value)
            elif isinstance(a, Pointer):
                raw.append(addr)
            elif a.by_value:
                raw.append(a.desc.bytes)
            else:
                raw.append(a.desc.device_copy(device).address)
        self._install_fast(device_arg, device, launcher)
        stream = (current_stream_handle(device.ordinal) if stream is None
                  else stream_address(stream))
        return launcher.launch(raw, grid, stream, sync, timeout, sync if timed is None else timed)

    def _install_fast(self, device_arg, device, launcher):
        entry = self._fast.get(device_arg)
        if entry is None or (not entry.convert.torch_aware and _torch_tensor_type()):
            entry = self._fast[device_arg] = _FastEntry(make_converter(self.signature))
        entry.launchers[0 if device_arg is not None else device.ordinal] = launcher

    def as_torch_op(self, name, *, mutates, grid):
        """This kernel as the torch custom op ``name`` ("namespace::op"),
        usable in ``torch.compile``d code; see runtime/torch_op.py."""
        from .torch_op import register_torch_op

        return register_torch_op(self, name, mutates=mutates, grid=grid)

    def unload(self):
        """Unload the modules loaded so far (the next call loads again)."""
        self._fast.clear()
        self._launchers.clear()
        for mod in self._modules.values():
            mod.unload()
        self._modules.clear()


__all__ = ["CompiledKernel", "content_key", "current_stream"]
