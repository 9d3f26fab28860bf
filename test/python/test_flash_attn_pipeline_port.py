"""FlashAttention's pipeline extensions work on our classes.

FlashAttention subclasses the pipeline classes as frozen dataclasses with
mixins and re-classes what the base ``create`` returns; before, a frozen
subclass failed inside ``create`` with FrozenInstanceError. The port in
test/python/flash_attn_port (FlashAttention's definitions, imports changed)
builds a small attention-shaped kernel -- Q through a one-stage TMA
pipeline driven by ``*_w_index_phase``, K and V in one ring stage armed with
``extra_tx_count``, ring positions as ``PipelineStateSimple``, a handshake
``PipelineAsync`` with ``elect_one`` commits and releases -- that the
dialect, the protocol checker, the simulator and the lowering accept; and a
planted bug in the same kernel is still caught.
"""

import dataclasses
import re

import pytest

from _example_checks import protocol_warnings, simulate, verify_protocol
from flash_attn_port import pipeline as fa_pipeline
from flash_attn_port.cute_names import Int32

from pipeline_mlir.kernel import Int32 as Int32Param
from pipeline_mlir.kernel import Kernel, TmaDescriptor
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineError, PipelineState,
                                    PipelineTmaAsync, PipelineUserType)

Q_BYTES, K_BYTES, V_BYTES = 16384, 8192, 8192
KV_STAGES = 2
CONSUMER_WARPS = 4
N_BLOCKS = 3  # K/V blocks per tile (a constant: the simulator evaluates every state)


def build(elect_one=True, consumer_warps_counted=CONSUMER_WARPS):
    """Warp 0 loads; warps 4..7 (one warpgroup) consume and tell warp 0, per
    tile, that the tile's output is written (``done``)."""
    k = Kernel("fa_port", chip="sm_90a", block_dim=256,
               params={"q_desc": TmaDescriptor(), "k_desc": TmaDescriptor(),
                       "v_desc": TmaDescriptor(), "num_tiles": Int32Param()})
    with k:
        q_desc, k_desc, v_desc, num_tiles = k.args
        smem_q = k.smem_alloc(Q_BYTES, align=1024, name="Q")
        smem_k = k.smem_alloc(KV_STAGES * K_BYTES, align=1024, name="K")
        smem_v = k.smem_alloc(KV_STAGES * V_BYTES, align=1024, name="V")
        tma_thread = CooperativeGroup(Agent.Thread, 1)
        mma_warps = CooperativeGroup(Agent.Thread, consumer_warps_counted)
        pipeline_q = fa_pipeline.PipelineTmaAsync.create(
            barrier_storage=k.alloc_barriers(2), num_stages=1, producer_group=tma_thread,
            consumer_group=mma_warps, tx_count=Q_BYTES, name="q")
        # K and V of one block share a stage: tx_count is K's bytes, V's
        # arrive as extra_tx_count.
        pipeline_kv = fa_pipeline.PipelineTmaAsync.create(
            barrier_storage=k.alloc_barriers(2 * KV_STAGES), num_stages=KV_STAGES,
            producer_group=tma_thread, consumer_group=mma_warps, tx_count=K_BYTES, name="kv")
        pipeline_done = fa_pipeline.PipelineAsync.create(
            barrier_storage=k.alloc_barriers(2), num_stages=1,
            producer_group=CooperativeGroup(Agent.Thread, consumer_warps_counted),
            consumer_group=CooperativeGroup(Agent.Thread, 1),
            elect_one_commit=elect_one, elect_one_release=elect_one, name="done")

        warp = k.warp_idx()
        with k.if_(warp == 0):
            for tile in k.range(num_tiles):
                parity = tile & 1
                pipeline_q.producer_acquire_w_index_phase(0, parity ^ 1)
                with k.elect_one():
                    pipeline_q.tma_load(PipelineState(0, 0, 0, parity ^ 1), q_desc,
                                        [0, tile * 128], smem_q, Q_BYTES)
                pipeline_q.producer_commit_w_index(0)
                for nb in k.range(N_BLOCKS):
                    # The producer runs one lap ahead: phase_index starts at stages.
                    kv = fa_pipeline.PipelineStateSimple(KV_STAGES,
                                                         tile * N_BLOCKS + nb + KV_STAGES)
                    pipeline_kv.producer_acquire(kv, extra_tx_count=V_BYTES)
                    with k.elect_one():
                        pipeline_kv.tma_load(kv, k_desc, [0, nb * 64],
                                             smem_k.stage(kv.index, K_BYTES), K_BYTES)
                        pipeline_kv.tma_load(kv, v_desc, [0, nb * 64],
                                             smem_v.stage(kv.index, V_BYTES), V_BYTES)
                    pipeline_kv.producer_commit(kv)
                done = fa_pipeline.PipelineStateSimple(1, parity)
                pipeline_done.consumer_wait(done)
                pipeline_done.consumer_release(done)
            pipeline_q.producer_tail(fa_pipeline.PipelineStateSimple(1, (num_tiles & 1) ^ 1))
            pipeline_kv.producer_tail(
                fa_pipeline.PipelineStateSimple(KV_STAGES,
                                                num_tiles * N_BLOCKS + KV_STAGES))
        with k.if_(warp >= 4):
            for tile in k.range(num_tiles):
                parity = tile & 1
                pipeline_q.consumer_wait_w_index_phase(0, parity)
                for nb in k.range(N_BLOCKS):
                    kv = fa_pipeline.PipelineStateSimple(KV_STAGES, tile * N_BLOCKS + nb)
                    pipeline_kv.consumer_wait(kv)
                    pipeline_kv.consumer_release(kv)
                pipeline_q.consumer_release_w_index(0)
                done = fa_pipeline.PipelineStateSimple(1, parity ^ 1)
                pipeline_done.producer_acquire(done)
                pipeline_done.producer_commit(done)
            pipeline_done.producer_tail(fa_pipeline.PipelineStateSimple(1, (num_tiles & 1) ^ 1))
    return k


@pytest.fixture(scope="module")
def port_ir():
    k = build()
    k.verify()
    return str(k.module)


def test_create_re_classes_into_the_frozen_subclass():
    k = Kernel("classes", block_dim=128)
    with k:
        group = CooperativeGroup(Agent.Thread, 1)
        pipe = fa_pipeline.PipelineTmaAsync.create(
            barrier_storage=k.alloc_barriers(4), num_stages=2, producer_group=group,
            consumer_group=group, tx_count=1024)
        assert type(pipe) is fa_pipeline.PipelineTmaAsync
        assert isinstance(pipe, PipelineTmaAsync) and dataclasses.is_dataclass(pipe)
        assert pipe.num_stages == 2 and "tma_async, stages = 2" in str(pipe.type)
        with pytest.raises(dataclasses.FrozenInstanceError):
            pipe.num_stages = 3
        done = fa_pipeline.PipelineAsync.create(
            barrier_storage=k.alloc_barriers(2), num_stages=1, producer_group=group,
            consumer_group=group, elect_one_release=True, syncwarp_before_release=False)
        assert type(done) is fa_pipeline.PipelineAsync
        assert (done._elect_one_release, done._syncwarp_before_release) == (True, False)
        # The dataclass fields are FlashAttention's; the base class's own
        # elect_one stays off, so only the subclass's elect_one applies.
        assert done.elect_one_release is False


def test_inherited_create_builds_a_frozen_subclass():
    """The form that failed: ``create`` inherited, so the base builds the
    frozen subclass itself and sets its fields on it."""

    @dataclasses.dataclass(frozen=True)
    class Sub(PipelineTmaAsync):
        pass

    k = Kernel("inherited", block_dim=128, params={"desc": TmaDescriptor()})
    with k:
        group = CooperativeGroup(Agent.Thread, 1)
        pipe = Sub.create(barrier_storage=k.alloc_barriers(2), num_stages=1,
                          producer_group=group, consumer_group=group)
        assert type(pipe) is Sub
        st = fa_pipeline.make_pipeline_state(PipelineUserType.Producer, 1)
        pipe.producer_acquire(st)
        smem = k.smem_alloc(4096, align=1024)
        with k.elect_one():
            pipe.tma_load(st, k.args[0], [0], smem, 4096)
        pipe.producer_commit(st)
        st.advance()
        pipe.producer_tail(st)
    k.verify()
    # tx_count was left out: derived from the copy when compiled.
    assert re.search(r"mov\.\w+\s+%r\d+, 4096;", k.to_ptx())



def test_port_kernel_checks_clean(port_ir):
    assert verify_protocol(port_ir) == []
    assert protocol_warnings(port_ir) == []


def test_port_kernel_simulates_clean(port_ir):
    report = simulate(port_ir, schedules=6, args={3: 5})["fa_port"]  # num_tiles = 5
    assert report.ok and report.schedules == 6, report


def test_port_kernel_ir_is_what_the_extensions_say(port_ir):
    # extra_tx_count: V's bytes on top of K's tx_count.
    assert re.search(r"pipeline.producer.acquire %\d+, %\d+ extra_tx %c8192_i32 : "
                     r"<tma_async, stages = 2, .*tx_count = 8192>", port_ir)
    # elect_one commit and release: a warp sync, then the verb in one lane.
    for verb in ("producer.commit", "consumer.release"):
        assert re.search(r"nvvm.bar.warp.sync %c-1_i32\w* : i32\n\s+%(\d+) = nvvm.elect.sync"
                         r" -> i1\n\s+scf.if %\1 \{\n(?:[^\n}]*\n)*?\s+pipeline." +
                         re.escape(verb) + r" %\d+, %\d+ : <async", port_ir), verb
    # One state per (index, phase): the acquire, both copies and the commit
    # of a K/V stage use the same !pipeline.state value.
    acquire = re.search(r"pipeline.producer.acquire %\d+, (%\d+) extra_tx", port_ir).group(1)
    uses = re.findall(r"pipeline\.(?:copy\.tma_load|producer\.commit) %\d+, " + acquire + "[ ,]",
                      port_ir)
    assert len(uses) == 3, uses


def test_port_kernel_lowers_to_ptx():
    ptx = build().to_ptx()
    assert "mbarrier.arrive.expect_tx.shared.b64" in ptx
    assert ptx.count("elect.sync") >= 3


def test_a_planted_bug_in_the_port_is_caught():
    """The same kernel without elect_one: every thread of the consumer
    warpgroup arrives on the `done` barrier, whose groups count warps."""
    errors = verify_protocol(str(build(elect_one=False).module))
    assert len(errors) == 2, errors
    assert errors[0].startswith(
        "pipeline 'done': the consumer group #pipeline.group<thread, 1> expects 1 arrivals per "
        "phase, but the consumer role (one warp, whole-warp consumer.release) gives 32"), errors
    assert errors[1].startswith(
        "pipeline 'done': the producer group #pipeline.group<thread, 4> expects 4 arrivals per "
        "phase, but the producer role (4 warps, whole-warp producer.commit) gives 128"), errors


def test_raw_barrier_objects_are_refused_with_the_reason():
    k = Kernel("raw", block_dim=128)
    with k:
        group = CooperativeGroup(Agent.Thread, 1)
        pipe = fa_pipeline.PipelineTmaAsync.create(
            barrier_storage=k.alloc_barriers(2), num_stages=1, producer_group=group,
            consumer_group=group, tx_count=1024)
        with pytest.raises(PipelineError, match=r"PipelineTmaAsync.sync_object_full: the "
                                                r"barriers of a pipeline live behind "
                                                r"pipeline.create"):
            pipe.sync_object_full.arrive(0, None)


def test_an_index_phase_state_is_only_for_verbs():
    k = Kernel("stageless", block_dim=128)
    with k:
        st = PipelineState(stages=0, count=Int32(0), index=Int32(0), phase=Int32(1))
        assert st.stages == 0
        with pytest.raises(PipelineError, match=r"PipelineState.advance: this PipelineState was "
                                                r"made with stages=0"):
            st.advance()


def test_a_state_of_the_users_own_must_match_the_ring():
    k = Kernel("mismatch", block_dim=128)
    with k:
        group = CooperativeGroup(Agent.Thread, 1)
        pipe = fa_pipeline.PipelineTmaAsync.create(
            barrier_storage=k.alloc_barriers(4), num_stages=2, producer_group=group,
            consumer_group=group, tx_count=1024)
        with pytest.raises(PipelineError, match=r"PipelineTmaAsync.consumer_wait: the state "
                                                r"\(PipelineStateSimple\) has 3 stages but the "
                                                r"pipeline has 2"):
            pipe.consumer_wait(fa_pipeline.PipelineStateSimple(3, Int32(0)))
