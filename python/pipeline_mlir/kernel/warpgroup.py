"""Warpgroups: four consecutive warps starting at a warp index divisible by
4, the unit that issues ``wgmma`` and that ``setmaxnreg`` resizes.

``set_max_registers(n, increase)`` is ``setmaxnreg.{inc,dec}.sync.aligned.u32
n`` (``nvvm.setmaxregister``). It reallocates registers between warpgroup
roles: a TMA producer needs few, MMA consumers holding fp32 accumulators need
many. ptxas honours it only when the kernel has a register cap at entry
(``.reqntid``, which ``Kernel(block_dim=...)`` emits) and each role is its
own branch; it must be executed by all threads of the warpgroup.
"""

from mlir.dialects import nvvm

WARPS_PER_WARPGROUP = 4
THREADS_PER_WARPGROUP = 128
# setmaxnreg takes a multiple of 8 in 24..256.
MIN_REGISTERS, MAX_REGISTERS = 24, 256


def set_max_registers(count, increase):
    """Raise (``increase=True``) or lower this warpgroup's per-thread
    register count to ``count``."""
    if (not isinstance(count, int) or count % 8 or
            not MIN_REGISTERS <= count <= MAX_REGISTERS):
        raise ValueError("set_max_registers: count must be a multiple of 8 in "
                         f"{MIN_REGISTERS}..{MAX_REGISTERS}, got {count!r}")
    action = (nvvm.SetMaxRegisterAction.increase if increase
              else nvvm.SetMaxRegisterAction.decrease)
    nvvm.setmaxregister(count, action)


def check_register_budget(block_threads, producer_warpgroups, producer_registers,
                          consumer_warpgroups, consumer_registers,
                          register_file=65536):
    """Raise if the registers the roles ask for exceed the register file
    (``setmaxnreg.inc`` would block forever waiting for registers)."""
    total = THREADS_PER_WARPGROUP * (producer_warpgroups * producer_registers +
                                     consumer_warpgroups * consumer_registers)
    if producer_warpgroups + consumer_warpgroups != block_threads // THREADS_PER_WARPGROUP:
        raise ValueError("the warpgroup roles must cover the whole block")
    if total > register_file:
        raise ValueError(
            f"register budget: {producer_warpgroups} x {producer_registers} + "
            f"{consumer_warpgroups} x {consumer_registers} registers x 128 threads "
            f"= {total} > {register_file} in the register file")
