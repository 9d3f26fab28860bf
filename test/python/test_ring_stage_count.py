"""A ring's stage count is written in four places: the barrier storage
(``k.alloc_barriers(2 * stages)``), the ring's bytes (``k.smem_alloc(stages
* stage_bytes)``), the create (``num_stages``) and each state
(``make_pipeline_state(side, stages)``). Where two disagree the build
stops with a message naming the ring: the barriers at the create (too
few), a state at the verb, and the ring's bytes at ``ring.stage(state.index,
stage_bytes)``. The attention forward writes each ring's count once
(``Rings``) and derives the rest."""

import pytest

from pipeline_mlir.kernel import Kernel, TmaDescriptor
from pipeline_mlir.kernels import attention_fwd
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineTmaAsync,
                                    PipelineUserType, make_pipeline_state)

T1 = CooperativeGroup(Agent.Thread, 1)
TILE = 4096


def ring_kernel(buffers, stages, index_of=lambda state: state.index):
    """A TMA ring of ``stages`` stages over ``buffers`` tiles of shared
    memory; the producer loads into ``ring.stage(index_of(state), TILE)``."""
    k = Kernel("ring", block_dim=64, params={"desc": TmaDescriptor()})
    with k:
        (desc,) = k.args
        ring = k.smem_alloc(buffers * TILE, align=1024, name="A ring")
        pipe = PipelineTmaAsync.create(num_stages=stages, producer_group=T1,
                                       consumer_group=T1, tx_count=TILE,
                                       barrier_storage=k.alloc_barriers(2 * stages),
                                       name="a")
        state = make_pipeline_state(PipelineUserType.Producer, stages)
        pipe.producer_acquire(state)
        pipe.tma_load(state, desc, [0, 0], ring.stage(index_of(state), TILE), TILE)
        pipe.producer_commit(state)
    return k


def test_a_ring_sized_for_its_pipeline_builds():
    assert "pipeline.copy.tma_load" in str(ring_kernel(3, 3).module)


@pytest.mark.parametrize("buffers", [2, 4])
def test_a_ring_sized_for_another_stage_count_is_refused_naming_it(buffers):
    with pytest.raises(ValueError) as err:
        ring_kernel(buffers, 3)
    assert str(err.value).startswith(
        f"shared memory 'A ring' holds {buffers * TILE} bytes ({buffers} buffers of {TILE} "
        f"bytes) but it is indexed by the state of a 3-stage pipeline: the ring's stage "
        f"count is written twice and disagrees (allocate 3 * {TILE} = {3 * TILE} bytes")


def test_an_index_that_is_not_a_state_s_is_not_judged():
    """A plain run-time index (a counter modulo the buffers, a TMA-store
    staging ring) says nothing of a pipeline's stages."""
    from pipeline_mlir.kernel.values import Scalar

    k = ring_kernel(4, 3, index_of=lambda state: Scalar(state.index.ir_value) % 3 + 0)
    assert "pipeline.copy.tma_load" in str(k.module)


def test_the_attention_rings_derive_every_count_from_one():
    """Q's, K's and V's stage counts are read once; the barriers, the ring
    bytes, the create and the states follow (a config with 3 K/V stages
    and one Q buffer builds, and its allocations say so)."""
    cfg = attention_fwd.AttentionConfig(head_dim=64, stages=3, q_stages=1)
    k = attention_fwd.build(cfg)
    sizes = {name: size for name, _, size in k.smem.allocations}
    assert sizes["K ring"] == 3 * cfg.k_layout().bytes
    assert sizes["V ring"] == 3 * cfg.v_layout().bytes
    assert sizes["Q"] == 1 * cfg.q_layout().bytes
    text = str(k.module)
    for name, stages in (("q", 1), ("k", 3), ("v", 3)):
        assert f'{{name = "{name}"}} : <tma_async, stages = {stages},' in text


def test_the_attention_plan_must_be_what_the_rings_allocate():
    """AttentionConfig.smem_bytes() (which picks Q's buffers and passes the
    limit check before anything is built) counts the stages once more: a
    plan that disagrees with the allocations stops the build."""
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Misplanned(attention_fwd.AttentionConfig):
        def smem_bytes(self):
            return super().smem_bytes() - 2 * self.k_layout().bytes   # one K/V stage short

    with pytest.raises(ValueError, match="the plan and Rings disagree"):
        attention_fwd.build(Misplanned(head_dim=64))
    attention_fwd.build(attention_fwd.AttentionConfig(head_dim=64))
