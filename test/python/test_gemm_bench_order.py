"""The GEMM benchmarks' contender order (benchmarks/gemm/run_gemm.py
round_orders, round_names, bench_interleaved; random_sweep.py --order): a
contender timed right after cuBLAS ran slower (up to 4 us a call on short
calls, docs/gemm.md), so random_sweep.py and shape_variants.py rotate the
order every round: every contender in every slot, and right after every
other one, equally often. No GPU: bench_interleaved runs on a stand-in for
torch's CUDA events that records the order of the calls."""

import collections
import pathlib
import sys
import types

import pytest

BENCH = str(pathlib.Path(__file__).parents[2] / "benchmarks" / "gemm")
sys.path.insert(0, BENCH)

import random_sweep  # noqa: E402
import run_gemm  # noqa: E402


def _balanced(rows, n):
    """(every contender in every slot equally often, every ordered pair
    adjacent equally often) over ``rows``."""
    slots = {len(c) == n and len(set(c.values())) == 1
             for c in (collections.Counter(row[s] for row in rows) for s in range(n))}
    pairs = collections.Counter((a, b) for row in rows for a, b in zip(row, row[1:]))
    return slots == {True}, n < 2 or (len(pairs) == n * (n - 1)
                                      and len(set(pairs.values())) == 1)


@pytest.mark.parametrize("n", range(1, 10))
def test_round_orders_balanced(n):
    rows = run_gemm.round_orders(n)
    assert all(sorted(row) == list(range(n)) for row in rows)
    assert len(rows) == (2 * n if n % 2 and n > 1 else n)
    assert _balanced(rows, n) == (True, True)


def test_fixed_order_is_not_balanced():
    """The planted mistake: the old order (the dict's, every round) puts the
    pick right after cuBLAS in every round; the check above refuses it."""
    rows = [[0, 1, 2]] * 6
    assert _balanced(rows, 3) == (False, False)
    # and the cyclic rotation alone keeps each contender's predecessor
    cyclic = [[(x + i) % 3 for x in range(3)] for i in range(3)]
    assert _balanced(cyclic, 3) == (True, False)


def test_round_names_rounds_up_to_a_cycle():
    names = ["cublas", "ours"]
    assert run_gemm.round_names(names, 3) == [names, names[::-1], names, names[::-1]]
    assert run_gemm.round_names(names, 3, "fixed") == [names] * 3
    five = run_gemm.round_names(["cublas", "ours", "a", "b", "c"], 9)
    assert len(five) == 10                   # a cycle of 2 x 5 rounds


def _run(monkeypatch, order, names=("cublas", "ours", "cand")):
    """The timed blocks of 10 calls in the order bench_interleaved ran them,
    and its medians, on a stand-in for torch's CUDA events (an event records
    a clock; a synchronize ends a block of calls). A call takes 1 ms, 1.2 ms
    in a block right after a cuBLAS block (the bias planted)."""
    clock = {"t": 0.0}
    blocks = [[None, 0]]

    def sync():
        if blocks[-1][1]:
            blocks.append([None, 0])

    class Event:
        def __init__(self, enable_timing=False):
            self.at = None

        def record(self):
            self.at = clock["t"]

        def synchronize(self):
            sync()

        def elapsed_time(self, other):
            return other.at - self.at

    cuda = types.SimpleNamespace(Event=Event, synchronize=sync)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))

    def timed(name):
        def call():
            assert blocks[-1][0] in (None, name)
            blocks[-1][0] = name
            blocks[-1][1] += 1
            after = blocks[-2][0] if len(blocks) > 1 else None
            clock["t"] += 1.2 if after == "cublas" else 1.0
        return call

    med, _ = run_gemm.bench_interleaved({n: timed(n) for n in names}, rounds=3, iters=10,
                                        warmup=0, order=order)
    blocks = [tuple(b) for b in blocks if b[1]]
    return [b[0] for b in blocks if b[1] == 10], blocks, med


def test_bench_interleaved_rotates(monkeypatch):
    seq, every, med = _run(monkeypatch, "balanced")
    rows = [seq[i:i + 3] for i in range(0, len(seq), 3)]
    assert len(rows) == 6                    # 3 rounds rounded up to the cycle of 3
    idx = {"cublas": 0, "ours": 1, "cand": 2}
    assert _balanced([[idx[x] for x in r] for r in rows], 3) == (True, True)
    # every timed block follows another contender's timed block in its round
    # or its own untimed call: the bias lands on each in a third of its rounds
    after = collections.Counter(b[0] for a, b in zip(every, every[1:])
                                if a[0] == "cublas" != b[0] and b[1] == 10)
    assert after == {"ours": 2, "cand": 2}
    assert med["ours"] == pytest.approx(1.0) and med["cand"] == pytest.approx(1.0)

    seq, every, med = _run(monkeypatch, "fixed")
    assert seq == [b[0] for b in every] == ["cublas", "ours", "cand"] * 3
    assert med["ours"] == pytest.approx(1.2) and med["cand"] == pytest.approx(1.0)


def test_random_sweep_rotates_by_default():
    assert random_sweep.parser().parse_args([]).order == "balanced"
    assert random_sweep.parser().parse_args(["--order", "fixed"]).order == "fixed"
