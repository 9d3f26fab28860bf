"""Warpgroups: four consecutive warps starting at a warp index divisible by
4, the unit that issues ``wgmma`` and that ``setmaxnreg`` resizes.

``set_max_registers(n, increase)`` is ``setmaxnreg.{inc,dec}.sync.aligned.u32
n`` (``nvvm.setmaxregister``). It reallocates registers between warpgroup
roles: a TMA producer needs few, MMA consumers holding fp32 accumulators need
many. ptxas honours it only when the kernel has a register cap at entry
(``.reqntid``, which ``Kernel(block_dim=...)`` emits) and each role is its
own branch; it must be executed by all threads of the warpgroup.
"""

import mlir.ir as ir
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
    ``Kernel.compile()`` makes the same check from the kernel's own
    ``set_max_registers`` calls (:func:`check_kernel_register_budget`)."""
    if producer_warpgroups + consumer_warpgroups != block_threads // THREADS_PER_WARPGROUP:
        raise ValueError("the warpgroup roles must cover the whole block")
    problem = budget_problem([producer_registers] * producer_warpgroups
                             + [consumer_registers] * consumer_warpgroups, register_file)
    if problem:
        raise ValueError(problem)


# -- the budget of a built kernel ---------------------------------------------------
#
# Which warpgroups run a setmaxnreg is decided by the scf.if conditions around
# it, built from thread ids with arith ops (`warp_idx() // 4 == 0`, `warpgroup
# < 4`, the shfl.sync broadcast of a warp index). They are evaluated here on
# the first and last lane of every warp; a condition on anything else (kernel
# arguments, memory) leaves the kernel unchecked rather than guessed.

class _Unknown(Exception):
    pass


_CMP = {0: lambda a, b: a == b, 1: lambda a, b: a != b,
        2: lambda a, b: a < b, 3: lambda a, b: a <= b, 4: lambda a, b: a > b,
        5: lambda a, b: a >= b, 6: lambda a, b: a < b, 7: lambda a, b: a <= b,
        8: lambda a, b: a > b, 9: lambda a, b: a >= b}

_BINARY = {
    "arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b, "arith.andi": lambda a, b: a & b,
    "arith.ori": lambda a, b: a | b, "arith.xori": lambda a, b: a ^ b,
    "arith.shli": lambda a, b: a << b, "arith.shrui": lambda a, b: a >> b,
    "arith.shrsi": lambda a, b: a >> b, "arith.minsi": min, "arith.minui": min,
    "arith.maxsi": max, "arith.maxui": max,
}
_DIVISION = {
    "arith.divui": lambda a, b: a // b, "arith.divsi": lambda a, b: int(a / b),
    "arith.floordivsi": lambda a, b: a // b, "arith.ceildivsi": lambda a, b: -(-a // b),
    "arith.ceildivui": lambda a, b: -(-a // b),
    "arith.remui": lambda a, b: a % b, "arith.remsi": lambda a, b: a - b * int(a / b),
}
_CASTS = ("arith.index_cast", "arith.index_castui", "arith.extui", "arith.extsi",
          "arith.trunci", "arith.bitcast")


class _ThreadEval:
    """Values of pure thread-id arithmetic for one thread of the block."""

    def __init__(self, tid, block_dim):
        x, y, _ = block_dim
        self.tid = tid
        self.xyz = (tid % x, (tid // x) % y, tid // (x * y))
        self.block_dim = block_dim
        self.memo = {}

    def __call__(self, value):
        key = value
        if key not in self.memo:
            self.memo[key] = self._eval(value)
        return self.memo[key]

    def _eval(self, value):
        owner = value.owner
        if isinstance(owner, ir.Block):
            raise _Unknown  # a block argument: a kernel argument, an iter_arg
        op = owner.operation
        name = op.name
        if name in ("arith.constant", "llvm.mlir.constant"):
            try:
                attr = ir.IntegerAttr(op.attributes["value"])
            except ValueError:
                raise _Unknown from None
            if ir.IntegerType(attr.type).width == 1:
                return attr.value & 1  # true may read as -1
            return attr.value
        for d, axis in enumerate("xyz"):
            if name == f"nvvm.read.ptx.sreg.tid.{axis}":
                return self.xyz[d]
            if name == f"nvvm.read.ptx.sreg.ntid.{axis}":
                return self.block_dim[d]
        if name == "gpu.thread_id" or name == "gpu.block_dim":
            d = "xyz".index(str(op.attributes["dimension"]).split()[-1].strip(">"))
            return self.xyz[d] if name == "gpu.thread_id" else self.block_dim[d]
        if name == "nvvm.read.ptx.sreg.laneid":
            return self.tid % 32
        operands = list(op.operands)
        if name in _CASTS:
            return self(operands[0])
        if name in _BINARY:
            return _BINARY[name](self(operands[0]), self(operands[1]))
        if name in _DIVISION:
            b = self(operands[1])
            if b == 0:
                raise _Unknown
            return _DIVISION[name](self(operands[0]), b)
        if name == "arith.cmpi":
            pred = ir.IntegerAttr(op.attributes["predicate"]).value
            return int(_CMP[pred](self(operands[0]), self(operands[1])))
        if name == "arith.select":
            return self(operands[1]) if self(operands[0]) else self(operands[2])
        if name == "nvvm.shfl.sync" and "idx" in str(op.attributes["kind"]):
            # The idx broadcast (warp_idx of a 2-D/3-D block): the value of
            # lane `src` of this warp.
            src = self(operands[2]) & 31
            other = _ThreadEval(self.tid - self.tid % 32 + src, self.block_dim)
            return other(operands[1])
        raise _Unknown


def _setmaxnreg_sites(block, conditions, out):
    """(op, [(condition value, in then branch)]) of every nvvm.setmaxregister
    under ``block``, with the scf.if branches around it."""
    for op in block.operations:
        op = op.operation
        if op.name == "nvvm.setmaxregister":
            out.append((op, list(conditions)))
        for i, region in enumerate(op.regions):
            branch = conditions
            if op.name == "scf.if":
                branch = conditions + [(op.operands[0], i == 0)]
            for b in region.blocks:
                _setmaxnreg_sites(b, branch, out)
    return out


def kernel_warpgroup_registers(func, block_dim):
    """Per warpgroup of the block: (registers per thread, [the setmaxnreg
    ops it runs]), the registers being the most any of them asks for, or
    the entry registers when it runs none. None when the kernel runs no
    setmaxnreg, or when who runs one cannot be told from the IR (a
    condition on kernel arguments or memory, a warpgroup split by one)."""
    block_dim = tuple(block_dim) + (1,) * (3 - len(tuple(block_dim)))
    threads = block_dim[0] * block_dim[1] * block_dim[2]
    sites = []
    for region in func.regions:
        for b in region.blocks:
            _setmaxnreg_sites(b, [], sites)
    if not sites or threads % THREADS_PER_WARPGROUP:
        return None
    n_groups = threads // THREADS_PER_WARPGROUP
    runs = [[] for _ in range(n_groups)]
    for op, conditions in sites:
        for g in range(n_groups):
            ran = set()
            for warp in range(g * WARPS_PER_WARPGROUP, (g + 1) * WARPS_PER_WARPGROUP):
                for tid in (32 * warp, 32 * warp + 31):
                    ev = _ThreadEval(tid, block_dim)
                    try:
                        ran.add(all(bool(ev(c)) == then for c, then in conditions))
                    except (_Unknown, ValueError, TypeError, KeyError, IndexError):
                        return None
            if len(ran) > 1:
                return None  # part of a warpgroup: another bug, not a budget
            if ran.pop():
                runs[g].append(op)
    entry = entry_registers(threads)
    return [(max((ir.IntegerAttr(op.attributes["regCount"]).value for op in ops),
                 default=entry), ops) for ops in runs]


def check_kernel_register_budget(func, block_dim):
    """Raise CompileError, at the user's set_max_registers lines, when the
    registers the kernel's warpgroups hold after their setmaxnreg (the entry
    registers for a warpgroup that runs none) exceed the register file:
    four consumer warpgroups at 160 and a producer do not fit 65,536. The
    kernel would hang in ``setmaxnreg.inc``."""
    groups = kernel_warpgroup_registers(func, block_dim)
    if groups is None:
        return
    problem = budget_problem([r for r, _ in groups],
                             resized=[bool(ops) for _, ops in groups])
    if problem is None:
        return
    from ..diagnostics import CompileError, _where

    # One note per set_max_registers line (a Python loop makes one op per
    # warpgroup on the same line), the error at the line of the warpgroups
    # asking for the most: their setmaxnreg.inc is the one that waits.
    sites = {}
    for g, (_, ops) in enumerate(groups):
        for op in ops:
            action = str(op.attributes["action"]).split()[-1].strip(">")
            count = ir.IntegerAttr(op.attributes["regCount"]).value
            sites.setdefault((_where(op.location), action, count), []).append(g)
    top = max(r for r, _ in groups)
    first = next((w for (w, _, c) in sites if c == top and w), None)
    notes = [f"  {where or '<unknown line>'}: note: set_max_registers({count}, "
             f"increase={action == 'increase'}) runs in {_warpgroup_names(gs)}"
             for (where, action, count), gs in sites.items()]
    raise CompileError((f"{first}: error: " if first else "error: ") + problem
                       + "".join("\n" + n for n in notes))
