"""pipeline_mlir.pipeline: misuse raises a clear Python exception, at the call."""

import pytest

from pipeline_mlir.kernel import Kernel, ScopeError, TmaDescriptor
from pipeline_mlir.pipeline import (
    Agent, CooperativeGroup, NamedBarrier, PipelineAsync, PipelineError,
    PipelineOp, PipelineOrder, PipelineState, PipelineTmaAsync,
    PipelineTmaMultiConsumersAsync, PipelineTmaStore, PipelineTmaUmma,
    PipelineUserType, make_pipeline_state)

from _ir_utils import names

T1 = CooperativeGroup(Agent.Thread, 1)
T32 = CooperativeGroup(Agent.Thread, 32)
Producer, Consumer = PipelineUserType.Producer, PipelineUserType.Consumer


@pytest.fixture
def k():
    kern = Kernel("k", chip="sm_100a", block_dim=128,
                  params={"desc": TmaDescriptor()})
    with kern:
        yield kern


def async_pipe(stages=2):
    return PipelineAsync.create(num_stages=stages, producer_group=T32,
                                consumer_group=T32)


def test_group_must_be_cooperative_group(k):
    with pytest.raises(TypeError, match="producer_group must be a CooperativeGroup"):
        PipelineAsync.create(num_stages=2, producer_group=Agent.Thread,
                             consumer_group=T32)
    with pytest.raises(TypeError, match="agent must be an Agent"):
        CooperativeGroup("thread", 32)
    with pytest.raises(PipelineError, match="size must be a positive int"):
        CooperativeGroup(Agent.Thread, 0)


def test_wrong_agent_for_elected_side_is_rejected_by_type(k):
    # TMA producers arrive from one elected thread: the agent must be Thread.
    with pytest.raises(PipelineError, match="producer agent must be 'thread'"):
        PipelineTmaAsync.create(num_stages=2,
                                producer_group=CooperativeGroup(Agent.Warp, 1),
                                consumer_group=T32, tx_count=64)


def test_tma_pipeline_needs_tx_count(k):
    with pytest.raises(PipelineError, match="tx_count must be positive"):
        PipelineTmaUmma.create(num_stages=2, producer_group=T1,
                               consumer_group=T1, tx_count=0)


def test_bad_stage_count_and_layout(k):
    with pytest.raises(PipelineError, match="num_stages must be a positive int"):
        async_pipe(0)
    with pytest.raises(PipelineError, match="cta_layout_vmnk must be a tuple of 4"):
        PipelineTmaUmma.create(num_stages=2, producer_group=T1,
                               consumer_group=T1, tx_count=64,
                               cta_layout_vmnk=(2, 1))


def test_stage_mismatch(k):
    p = async_pipe(2)
    s = make_pipeline_state(Producer, 3)
    with pytest.raises(PipelineError, match="state has 3 stages but the pipeline has 2"):
        p.producer_acquire(s)


def test_role_mismatch(k):
    p = async_pipe()
    with pytest.raises(PipelineError, match="consumer verb but the state was made for the producer"):
        p.consumer_wait(make_pipeline_state(Producer, 2))
    with pytest.raises(PipelineError, match="producer verb but the state was made for the consumer"):
        p.producer_commit(make_pipeline_state(Consumer, 2))


def test_not_a_state(k):
    p = async_pipe()
    with pytest.raises(TypeError, match="expected a PipelineState"):
        p.producer_acquire(0)


def test_extra_tx_needs_tma(k):
    p = async_pipe()
    with pytest.raises(PipelineError, match="extra_tx_count .* needs a TMA/CLC pipeline"):
        p.producer_acquire(make_pipeline_state(Producer, 2), extra_tx_count=16)


def test_elect_one_only_for_async_thread_sides(k):
    with pytest.raises(PipelineError, match="elect_one_commit"):
        PipelineTmaAsync.create(num_stages=2, producer_group=T1,
                                consumer_group=T32, tx_count=64)._build(
            num_stages=2, producer_group=T1, consumer_group=T32, tx_count=64,
            elect_one_commit=True)


def test_masks_rejected(k):
    with pytest.raises(PipelineError, match="producer_mask / consumer_mask"):
        PipelineAsync.create(num_stages=2, producer_group=T32,
                             consumer_group=T32, producer_mask=1)


def test_producer_consumer_start_state_is_ambiguous(k):
    with pytest.raises(PipelineError, match="ProducerConsumer state has no start state"):
        make_pipeline_state(PipelineUserType.ProducerConsumer, 2)


def test_consumer_verb_through_producer_handle(k):
    producer, consumer = async_pipe().make_participants()
    h = producer.acquire()
    with pytest.raises(PipelineError, match="release is a consumer verb"):
        h.release()
    with pytest.raises(PipelineError, match="got a producer handle"):
        consumer.release(h)
    with pytest.raises(PipelineError, match="release is a consumer verb"):
        producer.release(h)
    ch = consumer.wait()
    with pytest.raises(PipelineError, match="commit is a producer verb"):
        ch.commit()
    with pytest.raises(PipelineError, match="got a consumer handle"):
        producer.commit(ch)
    with pytest.raises(PipelineError, match="tail is a producer verb"):
        consumer.tail()


def test_handle_of_another_pipeline(k):
    a, b = async_pipe(), async_pipe()
    pa, _ = a.make_participants()
    pb, _ = b.make_participants()
    h = pa.acquire()
    with pytest.raises(PipelineError, match="belongs to another pipeline"):
        pb.commit(h)


def test_handle_used_after_its_region_ended(k):
    producer, _ = async_pipe().make_participants()
    with k.if_(k.warp_idx() == 0):
        h = producer.acquire()
    before = names(k).count("pipeline.producer.commit")
    with pytest.raises(ScopeError, match="region that has ended"):
        h.commit()
    assert names(k).count("pipeline.producer.commit") == before


def test_state_used_after_its_region_ended(k):
    p = async_pipe()
    with k.if_(k.warp_idx() == 0):
        s = make_pipeline_state(Producer, 2)
    with pytest.raises(ScopeError, match="region .* has ended"):
        p.producer_acquire(s)


def test_pipeline_used_after_its_region_ended(k):
    with k.if_(k.warp_idx() == 0):
        p = async_pipe()
        s = make_pipeline_state(Producer, 2)
    with k.if_(k.warp_idx() == 1):
        with pytest.raises(ScopeError, match="pipeline"):
            p.producer_acquire(make_pipeline_state(Producer, 2))


def test_advance_inside_if_in_loop_is_refused(k):
    s = make_pipeline_state(Producer, 2)
    with pytest.raises(ScopeError, match="nested region"):
        for i, _ in k.range(4, carry=[s]):
            with k.if_(i == 0):
                s.advance()


# --- loops: what the body updates must be carried ----------------------------

def test_state_advanced_but_not_carried_is_named(k):
    """`for i, _ in k.range(n)` (the shape of a carrying loop, without
    carry=) used to fail with "cannot unpack non-iterable Scalar object"."""
    state = make_pipeline_state(Producer, 2)
    p = async_pipe()
    with pytest.raises(ScopeError, match=r"k.range: `state` \(PipelineState\(.*\)\) is advanced "
                       r"in the loop body but not carried by the loop.*Carry it: `for i, "
                       r"\(state,\) in k.range\(n, carry=\[state\]\):`"):
        for i, _ in k.range(4):
            p.producer_acquire(state)
            state.advance()


def test_participant_advanced_but_not_carried_is_named(k):
    producer, _ = async_pipe().make_participants()
    with pytest.raises(ScopeError, match=r"`producer` \(a PipelineProducer; its state\) is "
                       r"advanced.*carry=\[producer\]"):
        for _ in k.range(4):
            producer.commit(producer.acquire_and_advance())


def test_order_and_scalar_updated_but_not_carried(k):
    order = PipelineOrder.create(None, depth=2, length=2, group_id=0, producer_group=T32)
    with pytest.raises(ScopeError, match=r"`order` .* is advanced \(arrive\)"):
        for _ in k.range(4):
            order.wait()
            order.arrive()
    from pipeline_mlir.kernel import Scalar
    total = Scalar(0)
    with pytest.raises(ScopeError, match=r"`total` \(Scalar\(.*\)\) is set in the loop body "
                       r"but not carried.*carry=\[total\]"):
        for i in k.range(4):
            total.set(total + i)


def test_inner_loop_must_carry_what_it_advances(k):
    state = make_pipeline_state(Producer, 2)
    with pytest.raises(ScopeError, match="`state` .* is advanced"):
        for _ in k.range(4, carry=[state]):
            for _ in k.range(2):
                state.advance()


def test_objects_made_in_the_body_and_carried_ones_are_fine(k):
    from pipeline_mlir.kernel.scope import _loops

    state = make_pipeline_state(Producer, 2)
    for i, (s,) in k.range(4, carry=[state]):
        local = make_pipeline_state(Consumer, 2)   # made in the body: not carried
        local.advance()
        s.advance()
        for _ in k.range(2, carry=[s]):
            s.advance()
    for i, _ in k.range(4):                        # nothing to carry: fine
        make_pipeline_state(Producer, 2).advance()
    assert _loops == []
    k.verify()


def test_unpacking_carried_objects_of_a_loop_without_carry(k):
    from pipeline_mlir.kernel.scope import _loops

    with pytest.raises(TypeError, match=r"no carry=\[...\], so there are no carried objects "
                       r"to unpack.*carry=\[state\]"):
        for i, (a,) in k.range(4):
            pass
    assert _loops == []


def test_no_insertion_point():
    Kernel("k")  # built, but its body is not entered
    with pytest.raises(ScopeError, match="needs an insertion point"):
        make_pipeline_state(Producer, 2)
    with pytest.raises(ScopeError, match="needs an insertion point"):
        PipelineAsync.create(num_stages=2, producer_group=T32,
                             consumer_group=T32)


def test_tma_store_has_no_consumer(k):
    p = PipelineTmaStore.create(num_stages=2, producer_group=T32)
    with pytest.raises(PipelineError, match="no consumer side"):
        p.consumer_wait(make_pipeline_state(Consumer, 2))
    with pytest.raises(PipelineError, match="no consumer side"):
        p.make_participants()
    with pytest.raises(PipelineError, match="owns no mbarriers"):
        p.producer_get_barrier()


def test_multi_consumer_release_needs_op_type(k):
    p = PipelineTmaMultiConsumersAsync.create(
        num_stages=2, producer_group=T1, consumer_group_umma=T1,
        consumer_group_async=T32, tx_count=64)
    with pytest.raises(PipelineError, match="op_type must be"):
        p.consumer_release(make_pipeline_state(Consumer, 2))
    with pytest.raises(PipelineError, match="op_type must be"):
        p.consumer_release(make_pipeline_state(Consumer, 2), PipelineOp.TmaLoad)


def test_named_barrier_limits(k):
    with pytest.raises(PipelineError, match="barrier_id must be in 0..15"):
        NamedBarrier(16, 128)
    with pytest.raises(PipelineError, match="multiple of the warp size"):
        NamedBarrier(1, 100)


def test_order_group_id_range(k):
    with pytest.raises(PipelineError, match="group_id must be in 0..1"):
        PipelineOrder.create(None, depth=2, length=2, group_id=2,
                             producer_group=T32)


def test_scalar_has_no_truth_value(k):
    with pytest.raises(TypeError, match="branch with `with k.if_"):
        if k.warp_idx() == 0:
            pass


def test_token_must_be_i1(k):
    p = async_pipe()
    s = make_pipeline_state(Producer, 2)
    with pytest.raises(TypeError, match="try_acquire_token"):
        p.producer_acquire(s, try_acquire_token=s.index)


def test_misuse_leaves_module_valid(k):
    """A refused call emits nothing, so the module still verifies."""
    p = async_pipe()
    s = make_pipeline_state(Producer, 2)
    with pytest.raises(PipelineError):
        p.consumer_release(s)
    k.verify()
