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

from ..chip_limits import REGISTER_FILE, THREADS_PER_WARPGROUP, WARPS_PER_WARPGROUP  # noqa: F401
from ..user_location import user_line

# setmaxnreg takes a multiple of 8 in 24..256.
MIN_REGISTERS, MAX_REGISTERS = 24, 256


@user_line  # the budget check's notes name the user's line
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


def entry_registers(block_threads):
    """Registers per thread every warp holds at entry: the kernel's cap,
    the register file over the block's threads in steps of 8 (ptxas gives
    a kernel that resizes its warpgroups that cap; 168 for 384 threads)."""
    return min(MAX_REGISTERS, REGISTER_FILE // block_threads // 8 * 8)


def _warpgroup_names(indices):
    """"warpgroup 0", "warpgroups 1-4", "warpgroups 0, 2"."""
    indices = sorted(indices)
    if len(indices) == 1:
        return f"warpgroup {indices[0]}"
    if indices == list(range(indices[0], indices[-1] + 1)):
        return f"warpgroups {indices[0]}-{indices[-1]}"
    return "warpgroups " + ", ".join(map(str, indices))


def budget_problem(registers, register_file=REGISTER_FILE, resized=None):
    """The message for per-warpgroup register counts (``registers[g]``
    threads of warpgroup ``g`` hold) that overflow the register file, or
    None when they fit. ``resized[g]`` False marks a warpgroup that keeps
    its entry registers."""
    per_thread = sum(registers)
    total = THREADS_PER_WARPGROUP * per_thread
    if total <= register_file:
        return None
    by_count = {}
    for g, r in enumerate(registers):
        by_count.setdefault(r, []).append(g)
    order = sorted(by_count.items(), key=lambda kv: (-kv[0], kv[1]))
    parts = []
    for i, (r, gs) in enumerate(order):
        kept = resized is not None and not any(resized[g] for g in gs)
        parts.append(f"{_warpgroup_names(gs)} at {r}"
                     + (" registers per thread" if i == 0 else "")
                     + (" (not resized: the entry registers)" if kept else ""))
    terms = " + ".join(f"{len(gs)} x {r}" if len(gs) > 1 else f"{r}" for r, gs in order)
    # The fix: the largest count the warpgroups at the top may ask for while
    # the others keep theirs.
    top, top_groups = order[0]
    room = register_file // THREADS_PER_WARPGROUP - (per_thread - top * len(top_groups))
    fits = room // len(top_groups) // 8 * 8
    fix = (f"lower the set_max_registers of {_warpgroup_names(top_groups)} to at most "
           f"{fits}, or give the kernel fewer warpgroups" if fits >= MIN_REGISTERS
           else "give the kernel fewer warpgroups")
    listing = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
    return (f"register budget: {listing} need {THREADS_PER_WARPGROUP} threads x "
            f"({terms}) = {total} > {register_file} registers (the {register_file:,}-register "
            f"file of an SM): setmaxnreg.inc waits until the registers it asks for are "
            f"free, and no warpgroup gives them back, so the kernel hangs ({fix})")


def check_register_budget(block_threads, producer_warpgroups, producer_registers,
                          consumer_warpgroups, consumer_registers,
                          register_file=REGISTER_FILE):
    """Raise if the registers the roles ask for exceed the register file
    (``setmaxnreg.inc`` would block forever waiting for registers).
    This is the configuration's check, before any IR exists; the kernel's own
    ``set_max_registers`` calls are checked by ``pipeline-verify-protocol``
    (RegisterBudgetChecks.cpp, the same rule and message) when
    ``Kernel.compile()`` or ``to_ptx()`` lowers it."""
    if producer_warpgroups + consumer_warpgroups != block_threads // THREADS_PER_WARPGROUP:
        raise ValueError("the warpgroup roles must cover the whole block")
    problem = budget_problem([producer_registers] * producer_warpgroups
                             + [consumer_registers] * consumer_warpgroups, register_file)
    if problem:
        raise ValueError(problem)


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
