"""Warpgroups: four consecutive warps starting at a warp index divisible by
4, the unit that issues ``wgmma`` and that ``setmaxnreg`` resizes.

``set_max_registers(n, increase)`` is ``setmaxnreg.{inc,dec}.sync.aligned.u32
n`` (``nvvm.setmaxregister``). It reallocates registers between warpgroup
roles: a TMA producer needs few, MMA consumers holding fp32 accumulators need
many. ptxas honours it only when the kernel has a register cap at entry
(``.reqntid``, which ``Kernel(block_dim=...)`` emits) and each role is its
own branch; it must be executed by all threads of the warpgroup.

The registers the warpgroups hold after their setmaxnreg must fit the
register file together, or ``setmaxnreg.inc`` waits forever: the protocol
checker (``pipeline-verify-protocol``, which ``Kernel.compile()`` and
``to_ptx()`` run) refuses such a kernel at the user's line; the message is
in this module's words there (``diagnostics.PYTHON_TERMS``).
"""

from mlir.dialects import nvvm

from ..chip_limits import REGISTER_FILE, THREADS_PER_WARPGROUP, WARPS_PER_WARPGROUP
from ..user_location import user_line

# setmaxnreg takes a multiple of 8 in 24..256.
MIN_REGISTERS, MAX_REGISTERS = 24, 256


def _check_count(count):
    if (not isinstance(count, int) or count % 8 or
            not MIN_REGISTERS <= count <= MAX_REGISTERS):
        raise ValueError("set_max_registers: count must be a multiple of 8 in "
                         f"{MIN_REGISTERS}..{MAX_REGISTERS}, got {count!r}")


@user_line  # the budget check's notes name the user's line
def set_max_registers(count, increase):
    """Raise (``increase=True``) or lower this warpgroup's per-thread
    register count to ``count``."""
    _check_count(count)
    action = (nvvm.SetMaxRegisterAction.increase if increase
              else nvvm.SetMaxRegisterAction.decrease)
    nvvm.setmaxregister(count, action)


def _roles_module(block_threads, producer_warpgroups, producer_registers,
                  consumer_registers):
    """The setmaxnreg of ``producer_consumer_roles`` alone, as IR: warpgroups
    below ``producer_warpgroups`` lower their registers, the others raise
    theirs."""
    return f"""gpu.module @budget {{
  gpu.func @roles() kernel attributes {{known_block_size = array<i32: {block_threads}, 1, 1>}} {{
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warpgroup_threads = arith.constant {THREADS_PER_WARPGROUP} : i32
    %producers = arith.constant {producer_warpgroups} : i32
    %warpgroup = arith.divui %tid, %warpgroup_threads : i32
    %producer = arith.cmpi ult, %warpgroup, %producers : i32
    scf.if %producer {{
      nvvm.setmaxregister decrease {producer_registers}
    }} else {{
      nvvm.setmaxregister increase {consumer_registers}
    }}
    gpu.return
  }}
}}"""


def check_register_budget(block_threads, producer_warpgroups, producer_registers,
                          consumer_warpgroups, consumer_registers,
                          register_file=REGISTER_FILE):
    """Raise if the registers the roles ask for exceed the register file
    (``setmaxnreg.inc`` would block forever waiting for registers).
    This is the configuration's check, before the kernel's IR exists; the
    rule is the protocol checker's (``pipeline-verify-protocol``,
    RegisterBudgetChecks.cpp), run here on the roles' setmaxnreg alone, so
    that the formula and its message are written once. ``register_file``:
    the registers one CTA may hold (less than the SM's when several CTAs
    share it). The kernel's own ``set_max_registers`` calls are checked by
    the same pass when ``Kernel.compile()`` or ``to_ptx()`` lowers it."""
    if (producer_warpgroups + consumer_warpgroups) * THREADS_PER_WARPGROUP != block_threads:
        raise ValueError("the warpgroup roles must cover the whole block")
    _check_count(producer_registers)
    _check_count(consumer_registers)
    import mlir.ir as ir
    from mlir import passmanager

    from .. import make_context
    from ..diagnostics import python_terms

    text = _roles_module(block_threads, producer_warpgroups, producer_registers,
                         consumer_registers)
    with make_context():
        module = ir.Module.parse(text)
        pm = passmanager.PassManager.parse(
            f"builtin.module(pipeline-verify-protocol{{register-file={int(register_file)}}})")
        try:
            pm.run(module.operation)
        except ir.MLIRError as err:
            messages = [d.message for d in err.error_diagnostics]
            raise ValueError(python_terms(messages[0]) if messages else str(err)) from None


def producer_consumer_roles(k, producer_registers, consumer_registers, producer, consumer):
    """The warp-specialized split of a kernel's warpgroups: warpgroup 0 the
    producer, which lowers its registers to ``producer_registers`` and whose
    warp 0 runs ``producer()`` (the TMA loads: one warp issues them, the
    other three idle); warpgroups 1.. the consumers, which raise theirs to
    ``consumer_registers`` and run ``consumer(warp, warpgroup)`` (warp and
    warpgroup indices, i32 Scalars). Each role is its own branch, as
    ``setmaxnreg`` needs (the module doc)."""
    warp = k.warp_idx()
    warpgroup = warp // WARPS_PER_WARPGROUP
    with k.if_(warpgroup == 0) as role:
        set_max_registers(producer_registers, increase=False)
        with k.if_(warp == 0):
            producer()
    with role.else_():
        set_max_registers(consumer_registers, increase=True)
        consumer(warp, warpgroup)
