"""The watchdog contract between the lowering (``watchdog=true``) and the
runner. docs/watchdog.md is the prose version; keep the two in step.

Device side (emitted by convert-pipeline-to-nvvm with watchdog=true):

* The gpu.module defines an externally visible global
  ``__pipeline_watchdog_buffer`` (``i64``, address space 1, initial 0). The
  runner stores there, before the launch, the *device* address of a pinned
  host buffer (cuMemHostAlloc(DEVICEMAP) + cuMemHostGetDevicePointer). Host
  memory survives the trap; device memory does not (after a trap every
  cuMemcpy fails with the sticky error).
* Each barrier wait reads %globaltimer before its first try; when a failed
  try finds ``now - start > timeout`` the thread elects itself with an
  atomic exchange on a *device* global ``__pipeline_watchdog_claim`` (i32;
  atomics on host memory over PCIe are not guaranteed), and the winner, if
  the buffer pointer is non-zero, writes RECORD_WORDS i32 words with
  volatile stores, **word 0 (the magic) last** between ``membar.sys``,
  sets the claim to 2 and traps. Losers wait (at most 20 ms) for the claim
  to reach 2, then trap: a trap aborts the grid, and an early one could cut
  the record short.
* Pipeline names: a global ``__pipeline_watchdog_names`` (i8 array, the
  names NUL-separated, indexed by pipeline id) and/or a JSON sidecar
  ``{"watchdog_names": [...]}`` written at compile time. The runner reads
  the global at load time, while the context is healthy.

Record (little-endian i32 words at the buffer's start):

====  ===========  ===================================================
word  field        meaning
====  ===========  ===================================================
0     magic        0x57444F47 ("WDOG"), written last
1     pipeline_id  index into the names; -1 if unknown
2     role         0 producer (acquire), 1 consumer (wait), 2 order (wait)
3     stage        the state's index
4     phase        the phase parity waited on
5-7   block        %ctaid.x, %ctaid.y, %ctaid.z
8     warp         linear thread id / 32
9     version      4 (RECORD_VERSION; 1: no dump; 2: the earlier dump;
                   3: the dump without the ledger)
10    elapsed_us   how long the wait had run, in microseconds (saturated)
11    warps        warps in the CTA (versions 3, 4)
12    barriers     barrier entries at word 64 (versions 3, 4)
13    samples      calibration samples at word 48 (versions 3, 4)
14-15 reserved     0
====  ===========  ===================================================

Version 4 carries the forensic dump (BUFFER_BYTES in all; see forensics.py,
which decodes it, and docs/watchdog.md "The forensic dump"): words 16..47
the wait table (one word per warp), 48..62 five calibration samples of a
scratch mbarrier, 64.. nine words per barrier of every pipeline of the CTA
(its state, then its ledger). Version 3 had five words per barrier (no
ledger); it is still decoded.
Version 2 had a dump of loads of the mbarrier word, which read 0 on sm_90;
its dump is not decoded.
"""

import struct
import time
from dataclasses import dataclass

from . import _driver
from .errors import KernelFaultError, KernelTimeoutError, PipelineWatchdogError

MAGIC = 0x57444F47  # "WDOG"
RECORD_VERSION = 4
DUMP_VERSIONS = (3, 4)  # record versions whose dump forensics.py decodes
RECORD_WORDS = 16
RECORD_BYTES = RECORD_WORDS * 4
BUFFER_BYTES = 4096  # what the runner maps: the record and the dump
BUFFER_SYMBOL = "__pipeline_watchdog_buffer"
NAMES_SYMBOL = "__pipeline_watchdog_names"
ROLE_NAMES = {0: "producer_acquire", 1: "consumer_wait", 2: "order_wait"}


@dataclass(frozen=True)
class WatchdogRecord:
    pipeline_id: int
    role: int
    stage: int
    phase: int
    block: tuple
    warp: int
    version: int = RECORD_VERSION
    elapsed_us: int = 0
    dump: object = None  # forensics.Dump (versions 3, 4 with the whole buffer)

    @property
    def role_name(self):
        return ROLE_NAMES.get(self.role, f"role {self.role}")

    def message(self, names=None, kernel=None):
        """e.g. "consumer_wait on pipeline 'ab' stage 2 phase 1 timed out in
        block (3,0,0) warp 4"."""
        names = names or []
        if 0 <= self.pipeline_id < len(names):
            pipe = f"pipeline '{names[self.pipeline_id]}'"
        elif self.pipeline_id >= 0:
            pipe = f"pipeline #{self.pipeline_id}"
        else:
            pipe = "an unnamed pipeline"
        x, y, z = self.block
        msg = (f"{self.role_name} on {pipe} stage {self.stage} phase {self.phase} "
               f"timed out in block ({x},{y},{z}) warp {self.warp}")
        if kernel:
            msg = f"kernel '{kernel}': {msg}"
        return msg


def encode_record(pipeline_id, role, stage, phase, block, warp, elapsed_us=0,
                  magic=MAGIC, version=1):
    """The bytes a kernel would write (used by tests and documentation);
    forensics.encode_dump appends a version-3 or -4 dump."""
    words = [magic, pipeline_id, role, stage, phase, *block, warp,
             version, elapsed_us] + [0] * 5
    return struct.pack("<16i", *[w if w < 2**31 else w - 2**32 for w in words])


def decode_record(raw):
    """WatchdogRecord from the buffer bytes, or None when no record was
    written (magic absent). Raises ValueError on a malformed record."""
    raw = bytes(raw)
    if len(raw) < RECORD_BYTES:
        raise ValueError(f"watchdog buffer holds {len(raw)} bytes, expected {RECORD_BYTES}")
    w = struct.unpack_from("<16i", raw)
    if (w[0] & 0xFFFFFFFF) != MAGIC:
        if w[0] == 0:
            return None
        raise ValueError(f"watchdog buffer word 0 is {w[0] & 0xFFFFFFFF:#x}, "
                         f"not the magic {MAGIC:#x}: not a watchdog record")
    if w[2] not in ROLE_NAMES:
        raise ValueError(f"watchdog record has unknown role {w[2]}")
    dump = None
    if w[9] in DUMP_VERSIONS and len(raw) >= BUFFER_BYTES:
        from .forensics import decode_dump
        dump = decode_dump(raw)
    return WatchdogRecord(pipeline_id=w[1], role=w[2], stage=w[3], phase=w[4],
                          block=(w[5], w[6], w[7]), warp=w[8], version=w[9],
                          elapsed_us=w[10], dump=dump)


def decode_names(raw):
    """Names from the NUL-separated ``__pipeline_watchdog_names`` bytes."""
    raw = bytes(raw).rstrip(b"\0")
    return [n.decode(errors="replace") for n in raw.split(b"\0")] if raw else []


def fault_error(call, code, name, kernel, record, names, launch_desc):
    """The exception for a launch that ended in error `code`."""
    if record is not None:
        msg = (f"{record.message(names, kernel)} (device watchdog; {launch_desc}). "
               "The kernel trapped, so this process's CUDA context is unusable; "
               "start a new process to run more kernels")
        if record.dump is not None:
            from .forensics import report
            msg += "\n" + report(record, names)
        return PipelineWatchdogError(call, code, name, record, msg)
    return KernelFaultError(
        call, code, name,
        f"kernel '{kernel}' faulted ({launch_desc}); the CUDA context is now "
        "unusable in this process")


def wait_event(event, deadline_s, describe, poll=None):
    """Poll cuEventQuery until `event` completes, an error is reported, or
    `deadline_s` seconds pass. Returns (0, None) on success, (code, name)
    on a device error; raises KernelTimeoutError at the deadline.

    `describe()` gives (kernel name, launch configuration) for the message. `poll()` (optional) runs every iteration (the watchdog buffer
    check)."""
    drv = _driver.cuda()
    not_ready = int(drv.CUresult.CUDA_ERROR_NOT_READY)
    start = time.monotonic()
    sleep = 20e-6
    while True:
        ret = drv.cuEventQuery(event)
        err = int(ret[0] if isinstance(ret, tuple) else ret)
        if err == 0:
            return 0, None
        if err != not_ready:
            return err, _driver.result_name(err)
        if poll is not None:
            poll()
        if time.monotonic() - start > deadline_s:
            kernel, config = describe()
            raise KernelTimeoutError(
                f"kernel '{kernel}' did not finish within {deadline_s:.1f} s "
                f"({config}). It may be "
                "deadlocked (a barrier wait that never completes); the kernel is "
                "still running, so this process's CUDA context cannot be reused: "
                "exit the process. Compile with watchdog=True to learn which wait hung")
        time.sleep(sleep)
        sleep = min(sleep * 2, 2e-3)
