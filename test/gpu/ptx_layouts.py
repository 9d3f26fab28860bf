"""The PTX ISA's register layouts of a warpgroup MMA ("Asynchronous Warpgroup
Level Matrix Multiply-Accumulate", "Register Fragments"), written out from
the ISA's figures, independently of python/pipeline_mlir/kernel/fragment.py,
so that the tests can hold the layer to them. Pure Python.

Thread ``T`` of the warpgroup: ``warp = T // 32``, ``groupID = (T % 32) //
4``, ``threadID_in_group = T % 4``.
"""

THREADS = 128


def thread_parts(T):
    return T // 32, (T % 32) // 4, T % 4


def accumulator_element(T, i):
    """(row, col) of value ``d_i`` of thread ``T`` in an m64nN f32
    accumulator: row ``16 warp + groupID + 8 ((i % 4) >= 2)``, col ``8 (i //
    4) + 2 threadID_in_group + i % 2``."""
    w, g, t = thread_parts(T)
    return 16 * w + g + 8 * ((i % 4) >= 2), 8 * (i // 4) + 2 * t + i % 2


def owner(r, c):
    """Thread holding accumulator element (r, c) (inverse of
    :func:`accumulator_element`; ints or integer tensors)."""
    return 32 * (r // 16) + 4 * (r % 8) + (c % 8) // 2


def a_register_elements(T, s, j, bits):
    """(row, col) of the elements in register ``j`` (0..3) of k-slice ``s``
    of thread ``T`` of a register A operand, lowest bits first: 16-bit types
    (k16: a0..a7, two per register): row ``16 w + g + 8 (j % 2)``, columns
    ``16 s + 2 t + 8 (j // 2)`` + 0, 1; 8-bit types (k32: a0..a15, four per
    register): columns ``32 s + 4 t + 16 (j // 2)`` + 0..3."""
    w, g, t = thread_parts(T)
    per = 32 // bits
    width = 8 * per
    row = 16 * w + g + 8 * (j % 2)
    col = s * width + per * t + (width // 2) * (j // 2)
    return [(row, col + e) for e in range(per)]
