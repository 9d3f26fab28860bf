"""Exceptions of the runtime. Each names what was wrong and what to do."""


class RuntimeErrorBase(RuntimeError):
    """Base of the runtime's own errors (not argument/validation errors)."""


class NoGpuError(RuntimeErrorBase):
    """No usable GPU: cuda-bindings missing, no driver, or no device."""


class CudaError(RuntimeErrorBase):
    """A CUDA driver call failed; ``code`` is the CUresult value."""

    def __init__(self, call, code, name, detail=""):
        self.call, self.code, self.name = call, code, name
        msg = f"{call} failed: {name} ({code})"
        if detail:
            msg += f": {detail}"
        super().__init__(msg)


class KernelFaultError(CudaError):
    """The kernel faulted (trap, illegal address, ...). The CUDA context is
    now unusable: no further launch or device-memory read can succeed in this
    process."""


class PipelineWatchdogError(KernelFaultError):
    """The device-side watchdog found a barrier wait past its deadline and
    trapped; ``record`` is the decoded :class:`~.watchdog.WatchdogRecord`."""

    def __init__(self, call, code, name, record, message):
        self.record = record
        CudaError.__init__(self, call, code, name, message)


class KernelTimeoutError(RuntimeErrorBase):
    """The host-side deadline passed before the kernel finished."""


class ArchMismatchError(RuntimeErrorBase):
    """The code object was built for another GPU architecture."""


class LaunchConfigError(ValueError):
    """Grid/block/cluster/shared-memory configuration the device rejects."""


class ArgumentError(TypeError):
    """Kernel arguments that do not match the kernel's parameters."""


class TmaDescriptorError(ValueError):
    """A TMA descriptor request that cuTensorMapEncodeTiled would reject."""
