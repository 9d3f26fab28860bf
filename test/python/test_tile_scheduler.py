"""PersistentTileScheduler's unit -> (m_block, n_block) map, evaluated by
folding its IR for constant units: every tile exactly once, in grouped order
(``group_m`` rows of tiles swept column by column), the pair's two CTAs on
vertically adjacent tiles. The map uses unsigned division (exact for the
units a kernel visits: 0 <= unit < num_units)."""

import re

import pytest
from mlir.dialects import arith
from mlir import passmanager as pm

from pipeline_mlir.kernel import GlobalPtr, Kernel, Scalar, store
from pipeline_mlir.kernel.tile_scheduler import PersistentTileScheduler
from pipeline_mlir.kernel.values import i32


def _const(v):
    return Scalar(arith.constant(i32(), v))


def _tiles(m, n, block_m, block_n, group_m, cluster_m, rank):
    """The folded (m_block, n_block) of every unit."""
    k = Kernel("sched", block_dim=32, params={"out": GlobalPtr()})
    with k:
        (out,) = k.args
        sched = PersistentTileScheduler(_const(m), _const(n), block_m, block_n,
                                        group_m=group_m, cluster_m=cluster_m)
        units = -(-m // (block_m * cluster_m)) * -(-n // block_n)
        for u in range(units):
            mb, nb = sched.tile(_const(u), _const(rank) if cluster_m > 1 else None)
            store(mb, out, 2 * u)
            store(nb, out, 2 * u + 1)
    pm.PassManager.parse("builtin.module(gpu.module(gpu.func(canonicalize)))",
                         k.context).run(k.module.operation)
    text = str(k.module)
    stored = re.findall(r"llvm\.store %(c[-\w]*)", text)
    consts = dict(re.findall(r"%(c[-\w]*) = arith\.constant (-?\d+) : i32", text))
    values = [int(consts[name]) for name in stored]
    assert len(values) == 2 * units, text
    return list(zip(values[0::2], values[1::2]))


@pytest.mark.parametrize("m, n, group_m", [(6 * 128, 3 * 256, 4), (5 * 128 + 1, 2 * 256, 8)])
def test_every_tile_once_in_grouped_order(m, n, group_m):
    tiles_m, tiles_n = -(-m // 128), -(-n // 256)
    got = _tiles(m, n, 128, 256, group_m, 1, 0)
    want = []
    for first in range(0, tiles_m, group_m):
        rows = min(group_m, tiles_m - first)
        for col in range(tiles_n):
            want += [(first + r, col) for r in range(rows)]
    assert got == want


@pytest.mark.parametrize("rank", [0, 1])
def test_pair_ranks_take_adjacent_rows(rank):
    got = _tiles(8 * 128, 2 * 256, 128, 256, 4, 2, rank)
    # Units are pairs of rows: 4 pair-rows, group of 2 pair-rows.
    want = []
    for first in (0, 2):
        for col in range(2):
            want += [(2 * (first + r) + rank, col) for r in range(2)]
    assert got == want
