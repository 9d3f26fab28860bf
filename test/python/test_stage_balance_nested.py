"""Stage balance on persistent kernels (and the causal
part of class 14): a tile loop around the k-block loop, the pipeline states
carried through the inner loop's results into the outer one.

Causal attention ends each query tile's k-block loop at the diagonal, a
bound every role computes from the tile loop's variable. The stage-balance
check (pipeline-verify-protocol check 11) counted a loop as a product of
trip counts and gave up on such a bound ("cannot compare"), so dropping or
doubling any wait, release or acquire of causal attention passed the
checker. The counts are now sums over the tiles, compared term by term
(the roles compute the bound with the same ops from the same values), and
witnesses evaluate min / max / select / division exactly. Each bug has its
correct twin.
"""

import inspect
import re

import pytest

from pipeline_mlir.kernel import Int32, Kernel
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync,
                                    PipelineUserType, make_pipeline_state)

from test_stage_balance import KERNELS, check

T32 = CooperativeGroup(Agent.Thread, 32)
Producer, Consumer = PipelineUserType.Producer, PipelineUserType.Consumer


def _persistent(consumer_diagonal=1, drop_inner_release=False):
    """Warp 0 produces, per tile of a persistent loop, the k-blocks up to
    the diagonal, min(n, tile + 1); warp 1 consumes them FA-3 style (block 0
    peeled off, then the k-block loop over [1, kb)), with its own bound
    min(n, tile + consumer_diagonal). Returns (kernel, line of the peeled
    release: the first release, where the errors are reported)."""
    k = Kernel("persistent_causal", block_dim=64,
               params={"tiles": Int32(), "n": Int32()})
    with k:
        tiles, n = k.args
        p = PipelineAsync.create(num_stages=2, producer_group=T32, consumer_group=T32,
                                 barrier_storage=k.alloc_barriers(4), name="kv")
        warp = k.warp_idx()
        with k.if_(warp == 0):
            s = make_pipeline_state(Producer, 2)
            for tile, (s,) in k.range(tiles, carry=[s]):
                kb = n.min(tile + 1)
                for _, (s,) in k.range(kb, carry=[s]):
                    p.producer_acquire(s)
                    p.producer_commit(s)
                    s.advance()
            p.producer_tail(s)
        with k.if_(warp == 1):
            c = make_pipeline_state(Consumer, 2)
            for tile, (c,) in k.range(tiles, carry=[c]):
                kb = n.min(tile + consumer_diagonal)
                p.consumer_wait(c)
                p.consumer_release(c); peeled = inspect.currentframe().f_lineno
                c.advance()
                for _, (c,) in k.range(1, kb, carry=[c]):
                    p.consumer_wait(c)
                    if not drop_inner_release:
                        p.consumer_release(c)
                    c.advance()
    return k, peeled


def test_persistent_causal_twin_is_proved_balanced():
    k, _ = _persistent()
    assert check(None, module=k.module) == ([], [])


def test_dropped_release_in_the_k_block_loop_is_reported():
    k, line = _persistent(drop_inner_release=True)
    errors, _ = check(None, module=k.module)
    assert len(errors) == 1, errors
    assert f"test_stage_balance_nested.py\":{line}:" in errors[0]
    assert "pipeline 'kv': this role waits on sum(" in errors[0]
    assert "every pipeline.consumer.wait needs its pipeline.consumer.release" in errors[0]


def test_consumer_past_the_diagonal_is_reported():
    k, line = _persistent(consumer_diagonal=2)
    errors, _ = check(None, module=k.module)
    assert len(errors) == 1, errors
    assert f"test_stage_balance_nested.py\":{line}:" in errors[0]
    assert "pipeline 'kv': the producer role (one warp) commits sum(" in errors[0]
    assert "the consumers wait on stages nobody fills" in errors[0]


# -- the FA-3 skeleton: a release dropped inside the k-block loop ----------

def _lines(text, verb):
    return [i for i, ln in enumerate(text.splitlines())
            if re.match(r"\s*pipeline\." + re.escape(verb) + r" ", ln)]


def _drop(text, i):
    lines = text.splitlines()
    return "\n".join(lines[:i] + lines[i + 1:]) + "\n"


def _dup(text, i):
    lines = text.splitlines()
    return "\n".join(lines[:i + 1] + [lines[i]] + lines[i + 1:]) + "\n"


def _indent(text, i):
    ln = text.splitlines()[i]
    return len(ln) - len(ln.lstrip())


def test_fa3_skeleton_release_dropped_in_the_k_block_loop():
    text = KERNELS["skeleton fa3_hopper_fwd"]()
    assert check(text) == ([], [])  # the twin
    releases = _lines(text, "consumer.release")
    deepest = max(_indent(text, i) for i in releases)
    inner = [i for i in releases if _indent(text, i) == deepest]
    assert len(inner) == 2  # K and V, in the k-block loop
    for i in inner:
        errors, _ = check(_drop(text, i))
        assert errors, f"dropping line {i + 1}: {text.splitlines()[i].strip()}"
        assert any("this role waits on" in e and "but releases" in e for e in errors), errors


# -- causal attention: every wait, release and acquire dropped or doubled ----

CAUSAL = KERNELS["attention_fwd causal"]


@pytest.fixture(scope="module")
def causal_text():
    return CAUSAL()


def test_causal_attention_is_proved_balanced(causal_text):
    assert check(causal_text) == ([], [])


@pytest.mark.parametrize("mutation", ["drop", "dup"])
@pytest.mark.parametrize("verb", ["consumer.wait", "consumer.release", "producer.acquire"])
def test_causal_attention_verb_mutants_are_caught(causal_text, mutation, verb):
    sites = _lines(causal_text, verb)
    assert len(sites) == 5, sites  # Q, K (peeled and in the loop), V (in the loop and last)
    missed = []
    for i in sites:
        mutant = (_drop if mutation == "drop" else _dup)(causal_text, i)
        errors, _ = check(mutant)
        if not errors:
            missed.append(f"line {i + 1}: {causal_text.splitlines()[i].strip()[:60]}")
    assert missed == []
