"""pipeline_mlir.runtime: run compiled kernels through the CUDA driver.

Needs only ``cuda-bindings`` and numpy (torch optional); never imports MLIR,
so it works on a GPU host that received prebuilt cubins.

    from pipeline_mlir import runtime as rt
    mod = rt.Module(open("k.cubin", "rb").read())
    k = mod.kernel("copy_async", signature=["ptr", "ptr", "i32"])
    run = k.launch(grid=(128,), block=(64,), args=[src, dst, 128], timeout=5.0)
    print(run.elapsed_ms)

A compiled kernel is also a callable that knows its launch (compiled.py):

    fn = kernel.compile()             # pipeline_mlir.kernel: a CompiledKernel
    fn(src, dst, 128, grid=(128,))    # block, cluster, smem and signature known
    fn = rt.CompiledKernel.from_file("k.cubin")   # + k.json, on a GPU host

TMA descriptors: ``make_tma_descriptor(tensor, box_shape=(64, 64),
swizzle=128)``; passed by default as a pointer to a 64-byte aligned device
copy of the 128-byte CUtensorMap (the dialect's ``!llvm.ptr`` descriptor
operand), or by value with ``tma(desc, by_value=True)``.
"""

from ._driver import no_gpu_reason
from .arch import Target, can_run, check_compatible, cubin_target, image_target, parse_sm, ptx_target
from .args import f16, f32, f64, i8, i16, i32, i64, ptr, tma, u8, u16, u32, u64
from .compiled import CompiledKernel, current_stream
from .device import Device, DeviceLimits, default_device
from .errors import (ArchMismatchError, ArgumentError, CudaError, KernelFaultError,
                     KernelTimeoutError, LaunchConfigError, NoGpuError, PipelineWatchdogError,
                     TmaDescriptorError)
from .launch import FuncAttrs, Kernel, Launch, Module, validate_config
from .descriptor_arena import ArenaFullError
from .launch_cache import LaunchCache, device_arena
from .memory import DeviceBuffer, DevicePointer, HostMappedBuffer, live_allocations
from .tensormap import TmaDescriptor, make_tma_descriptor
from .watchdog import WatchdogRecord, decode_record, encode_record

__all__ = [
    "no_gpu_reason", "CompiledKernel", "current_stream", "Target", "can_run",
    "check_compatible", "cubin_target", "image_target",
    "parse_sm", "ptx_target", "f16", "f32", "f64", "i8", "i16", "i32", "i64", "ptr", "tma",
    "u8", "u16", "u32", "u64", "Device", "DeviceLimits", "default_device", "ArchMismatchError",
    "ArgumentError", "CudaError", "KernelFaultError", "KernelTimeoutError", "LaunchConfigError",
    "NoGpuError", "PipelineWatchdogError", "TmaDescriptorError", "FuncAttrs", "Kernel", "Launch",
    "Module", "validate_config", "DeviceBuffer", "DevicePointer", "HostMappedBuffer",
    "live_allocations", "TmaDescriptor", "make_tma_descriptor", "WatchdogRecord",
    "decode_record", "encode_record", "LaunchCache", "device_arena", "ArenaFullError",
]
