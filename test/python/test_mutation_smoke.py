"""The mutation campaign's CI smoke run (scripts/mutation_campaign.py; the
whole campaign and its table are in docs/VerifyProtocol.md): a sample of
single mutations of two kernels, classified statically and by the
simulator. It fails on a false positive (an unmutated kernel rejected), on
a mutant that crashes or hangs the checker or the simulator, and when a
mutation every user makes (a dropped release, or a dropped commit of a
pipeline whose commit arrives: TMA commits emit nothing, a flipped start
phase, an arrival count off by one) gets past the checker."""

import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def campaign():
    spec = importlib.util.spec_from_file_location(
        "mutation_campaign", os.path.join(ROOT, "scripts", "mutation_campaign.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["mutation_campaign"] = mod     # its workers find classify() by name
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def result(campaign):
    # jobs=1: in this process. Forking this pytest process (which runs other
    # threads by now) hung its pool's workers on a copied lock.
    return campaign.run(["examples/copy_ring", "skeleton cute_hopper_gemm"], per_kernel=24,
                        seed=3, jobs=1, schedules=10, log=lambda *a: None)


def test_no_false_positive_and_no_crash(result):
    assert result["false_positives"] == []
    assert len(result["baselines"]) == 2
    broken = [r for r in result["records"] if r["outcome"] in
              ("sim-error", "sim-timeout", "static-timeout")]
    assert broken == [], broken


def test_the_common_slips_are_caught_statically(result):
    must = [r for r in result["records"]
            if (r["kind"] == "drop" and ("consumer.release" in r["what"]
                                         or ("producer.commit" in r["what"]
                                             and "<tma_" not in r["what"])))
            or r["kind"] in ("flip-phase", "count+1", "count-1", "drop-advance")]
    assert must, "the sample holds no such mutant"
    missed = [r for r in must if r["outcome"] != "static"]
    assert missed == [], missed


def test_mutants_are_real_programs_mostly(result, campaign):
    s = campaign.summarize(result["records"])["total"]
    assert s["breaking"] >= 20
    assert s["counts"].get("invalid", 0) <= len(result["records"]) // 2
    table = campaign.table(result)
    assert "| **total** |" in table and "static + sim %" in table


def test_mutation_operators_keep_programs_valid(campaign):
    text = """gpu.func @k(%arg0: i32) kernel {
  %0 = pipeline.state.make : <4, producer>
  %c0_i32 = arith.constant 0 : i32
  scf.for %i = %c0_i32 to %arg0 step %c1 : i32 {
    pipeline.producer.acquire %p, %s : <async, stages = 4, producer = <thread, 32>, consumer = <thread, 32>>, <4, producer>
    pipeline.producer.commit %p, %s : <async, stages = 4, producer = <thread, 32>, consumer = <thread, 32>>, <4, producer>
    %5 = pipeline.state.advance %s : <4, producer>
  }
}"""
    kinds = {}
    for kind, what, new in campaign.mutants(text):
        kinds.setdefault(kind, []).append(new)
    assert {"drop", "dup", "move-down", "move-up", "drop-advance", "dup-advance",
            "flip-phase", "count+1", "count-1", "stages+1", "stages-1", "trip-1"} <= set(kinds)
    flip = kinds["flip-phase"][0]
    assert "pipeline.state.make index %mut_zero_1 phase %mut_one_1 : <4, producer>" in flip
    assert "arith.constant 0 : i32" in flip
    assert all("<5, producer>" in t and "stages = 5" in t for t in kinds["stages+1"])
    moved = kinds["move-down"][0].split("\n")
    assert moved[4].strip().startswith("pipeline.producer.commit")
    assert moved[5].strip().startswith("pipeline.producer.acquire")


def test_swaps_and_ring_overflows_are_caught_statically(result):
    # The copy ring's slips that keep every count right: an acquire moved
    # below its commit, a release above its wait, one stage more than the
    # ring's buffers.
    must = [r for r in result["records"] if r["kernel"] == "examples/copy_ring" and (
        r["kind"] == "stages+1"
        or (r["kind"] == "move-down" and "producer.acquire" in r["what"])
        or (r["kind"] == "move-up" and "consumer.release" in r["what"]))]
    assert must, "the sample holds no such mutant"
    missed = [r for r in must if r["outcome"] != "static"]
    assert missed == [], missed


def test_harmless_rules(campaign):
    one_cta = "pipeline.create {defer_sync}\npipeline.init_arrive\npipeline.init_wait\n"
    assert campaign._harmless("drop", "line 2: pipeline.init_arrive", one_cta)
    cluster = one_cta.replace("init_arrive", "init_arrive {cluster_size = 2 : i64}")
    assert not campaign._harmless("drop", "line 2: pipeline.init_arrive", cluster)
    body = """gpu.func @k() kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
  scf.for %i = %a to %b step %c : i32 {
    pipeline.named_barrier.sync id = 1, threads = 128
    pipeline.named_barrier.sync id = 1, threads = 128
  }
}"""
    # every thread runs both syncs: one more full barrier
    assert campaign._harmless("dup", "line 3: pipeline.named_barrier.sync", body)
    role = """gpu.func @k() kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
  scf.if %w {
    pipeline.named_barrier.sync id = 1, threads = 128
  }
}"""
    # one role that only syncs on the id: each of its warps syncs twice
    assert campaign._harmless("dup", "line 3: pipeline.named_barrier.sync", role)
    handover = role.replace("  }\n}", """  }
  scf.if %v {
    pipeline.named_barrier.arrive id = 1, threads = 128
  }
}""")
    # a hand-over: the other role arrives once per sync
    assert not campaign._harmless("dup", "line 3: pipeline.named_barrier.sync", handover)


def test_mutants_that_change_nothing_are_marked(campaign):
    text = """gpu.func @k() kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
  scf.if %w {
    pipeline.named_barrier.sync id = 1, threads = 128
    pipeline.named_barrier.sync id = 1, threads = 128
  }
}"""
    got = {(kind, what) for kind, what, _ in campaign.mutants(text)}
    # swapping two identical lines is the same program
    assert ("move-down", "line 3: pipeline.named_barrier.sync past line 4 (no change)") in got
    # dropping one of two back-to-back syncs of one role
    drop = next(new for kind, what, new in campaign.mutants(text) if kind == "drop")
    assert campaign._harmless("drop", "line 3: pipeline.named_barrier.sync (next to its twin)",
                              drop)


def _mutant(campaign, text, kind, what_prefix):
    """(what, mutated text) of the one mutant of ``kind`` whose description
    starts with ``what_prefix``."""
    (found,) = [(what, new) for k, what, new in campaign.mutants(text)
                if k == kind and what.startswith(what_prefix)]
    return found


def test_fence_or_commit_moved_past_a_wait_is_harmless(campaign):
    text = """gpu.func @k() kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
  scf.if %w {
    nvvm.wgmma.fence.aligned
    %i = pipeline.state.index %s : <2, consumer>
    pipeline.consumer.wait %p, %s : <tma_async, stages = 2>, <2, consumer>
    %d = nvvm.wgmma.mma_async %a, %b, %c
    nvvm.wgmma.commit.group.sync.aligned
  }
}"""
    # only address arithmetic between the fence and the wait: the wait
    # touches no wgmma register
    what, new = _mutant(campaign, text, "move-down", "line 3: nvvm.wgmma.fence")
    assert campaign._harmless("move-down", what, new)
    # the twin: a commit moved up past the wait with the MMA in between is
    # not (the MMA changes groups)
    what, new = _mutant(campaign, text, "move-up", "line 7: nvvm.wgmma.commit")
    assert not campaign._harmless("move-up", what, new)


def test_two_syncs_the_other_role_only_arrives_on_may_swap(campaign):
    text = """gpu.func @k() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  scf.if %w0 {
    pipeline.named_barrier.sync id = 4, threads = 64 index %c0
    pipeline.named_barrier.sync id = 4, threads = 64 index %c1
  }
  scf.if %w1 {
    pipeline.named_barrier.arrive id = 4, threads = 64 index %s
  }
}"""
    what, new = _mutant(campaign, text, "move-down", "line 3: pipeline.named_barrier.sync")
    assert campaign._harmless("move-down", what, new)
    # the twin: the other role waits on those barriers too, the order matters
    synced = text.replace("named_barrier.arrive id = 4", "named_barrier.sync id = 4")
    what, new = _mutant(campaign, synced, "move-down", "line 3: pipeline.named_barrier.sync")
    assert not campaign._harmless("move-down", what, new)


def test_a_dropped_setmaxnreg_and_a_short_order_loop_are_harmless(campaign):
    assert campaign._harmless("drop", "line 9: nvvm.setmaxregister", "")
    order = """gpu.func @k(%n: i32) kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
  %c0 = arith.constant 0 : i32
  %r = scf.for %t = %c0 to %n step %c1 iter_args(%s = %o) -> (!pipeline.state<3, producer_consumer>)  : i32 {
    pipeline.order.wait %p, %s, %g : <order, stages = 3, producer = <thread, 32>, length = 3>, <3, producer_consumer>
    %a = pipeline.order.arrive %p, %s : <order, stages = 3, producer = <thread, 32>, length = 3>, <3, producer_consumer>
    scf.yield %a : !pipeline.state<3, producer_consumer>
  }
}"""
    # every group runs the loop: one turn fewer each
    what, new = _mutant(campaign, order, "trip-1", "line 3")
    assert campaign._harmless("trip-1", what, new)
    # the twin: the loop of one role only
    body = order.split("\n")
    role = "\n".join(body[:2] + ["  scf.if %w {"] + ["  " + x for x in body[2:-1]]
                     + ["  }", "}"])
    what, new = _mutant(campaign, role, "trip-1", "line 4")
    assert not campaign._harmless("trip-1", what, new)


def test_schedule_only_moves(campaign):
    text = """gpu.func @k() kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
  scf.if %c {
    pipeline.named_barrier.arrive id = 1, threads = 256 index %c0
  }
  scf.for %t = %a to %b step %c : i32 {
    pipeline.consumer.wait %q, %s : <tma_async, stages = 2>, <2, consumer>
    pipeline.consumer.wait %k, %s : <tma_async, stages = 2>, <2, consumer>
    pipeline.named_barrier.sync id = 1, threads = 256 index %mine
    nvvm.wgmma.fence.aligned
    %d = nvvm.wgmma.mma_async %a, %b, %c
    nvvm.wgmma.commit.group.sync.aligned
    pipeline.named_barrier.arrive id = 1, threads = 256 index %other
  }
}"""
    # a ping-pong turn (its first one handed over outside the loop) moved
    # past a wgmma commit: only when the other warpgroup issues changes
    what, new = _mutant(campaign, text, "move-up", "line 12: pipeline.named_barrier.arrive")
    assert campaign._schedule_only("move-up", what, new)
    assert not campaign._harmless("move-up", what, new)
    # two pipelines' waits in the other order
    what, new = _mutant(campaign, text, "move-up", "line 7: pipeline.consumer.wait")
    assert campaign._schedule_only("move-up", what, new)
    # the twin: a barrier with no start signal is a hand-over, not a turn
    handover = text.replace("arrive id = 1, threads = 256 index %c0", "sync id = 2, threads = 256")
    what, new = _mutant(campaign, handover, "move-up", "line 12: pipeline.named_barrier.arrive")
    assert not campaign._schedule_only("move-up", what, new)


def test_a_fence_moved_below_mmas_an_earlier_fence_orders(campaign):
    text = """gpu.func @k() kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
  scf.for %t = %a to %b step %c iter_args(%o = %z) -> (!acc) : i32 {
    nvvm.wgmma.fence.aligned
    %cst = arith.constant 0.000000e+00 : f32
    %u = llvm.mlir.undef : !acc
    %z0 = llvm.insertvalue %cst, %u[0] : !acc
    %s = nvvm.wgmma.mma_async %a, %b, %z0
    nvvm.wgmma.commit.group.sync.aligned
    nvvm.wgmma.fence.aligned
    %i = pipeline.state.index %st : <2, consumer>
    %d = nvvm.wgmma.mma_async %a, %i, %o
    nvvm.wgmma.commit.group.sync.aligned
    scf.yield %d : !acc
  }
}"""
    # the loop's first fence already orders the second MMA: between the two
    # fences only an MMA, a constant accumulator and index arithmetic
    what, new = _mutant(campaign, text, "move-down", "line 9: nvvm.wgmma.fence")
    assert campaign._harmless("move-down", what, new)
    # the twin: the first MMA's result is read (S's softmax) before the
    # second fence, which must then precede the second MMA
    read = text.replace("    nvvm.wgmma.fence.aligned\n    %i =",
                        "    %x = llvm.extractvalue %s[0] : !acc\n"
                        "    %e = math.exp %x : f32\n    nvvm.wgmma.fence.aligned\n    %i =")
    what, new = _mutant(campaign, read, "move-down", "line 11: nvvm.wgmma.fence")
    assert not campaign._harmless("move-down", what, new)


def test_the_second_samples_harmless_survivors(campaign):
    """Rules for survivors of the seed-2 sample, each with the twin it must
    refuse."""
    text = """gpu.func @k() kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
  pipeline.init_arrive
  pipeline.init_wait
  nvvm.tcgen05.fence <before>
  nvvm.tcgen05.commit %bar : !llvm.ptr<3>
}"""
    # a doubled tcgen05 fence orders what one does; a doubled commit arrives twice
    what, new = _mutant(campaign, text, "dup", "line 4: nvvm.tcgen05.fence")
    assert campaign._harmless("dup", what, new)
    what, new = _mutant(campaign, text, "dup", "line 5: nvvm.tcgen05.commit")
    assert not campaign._harmless("dup", what, new)
    # a one-CTA init_wait is bar.sync 0, which every thread passes twice
    what, new = _mutant(campaign, text, "dup", "line 3: pipeline.init_wait")
    assert campaign._harmless("dup", what, new)
    # the twins: a cluster's wait needs an arrive of its own; a wait in a branch
    cluster = text.replace("init_wait", "init_wait {cluster_size = 2 : i64}")
    what, new = _mutant(campaign, cluster, "dup", "line 3: pipeline.init_wait")
    assert not campaign._harmless("dup", what, new)
    branch = text.replace("  pipeline.init_wait\n", "  scf.if %w {\n    pipeline.init_wait\n  }\n")
    what, new = _mutant(campaign, branch, "dup", "line 4: pipeline.init_wait")
    assert not campaign._harmless("dup", what, new)


def test_a_sync_above_the_proxy_fence_is_the_fence_below_it(campaign):
    text = """gpu.func @k() kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
  llvm.store %v, %p : vector<4xi32>, !llvm.ptr<3>
  nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
  pipeline.named_barrier.sync id = 1, threads = 128
}"""
    what, new = _mutant(campaign, text, "move-up", "line 4: pipeline.named_barrier.sync")
    assert campaign._harmless("move-up", what, new)
    # the twin: a store between them, which the barrier would then precede
    stored = text.replace("  pipeline.named_barrier.sync",
                          "  llvm.store %v, %q : vector<4xi32>, !llvm.ptr<3>\n"
                          "  pipeline.named_barrier.sync")
    what, new = _mutant(campaign, stored, "move-up", "line 5: pipeline.named_barrier.sync")
    assert not campaign._harmless("move-up", what, new)


def test_a_commit_moved_past_register_arithmetic_and_a_wait(campaign):
    text = """gpu.func @k() kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
  scf.if %w {
    %s = nvvm.wgmma.mma_async %a, %b, %c
    nvvm.wgmma.commit.group.sync.aligned
    %x = llvm.extractvalue %o[0] : !acc
    %y = arith.mulf %x, %m : f32
    pipeline.consumer.wait %p, %st : <tma_async, stages = 2>, <2, consumer>
    nvvm.wgmma.fence.aligned
  }
}"""
    # O's rescale between the S group's commit and the wait for V: the
    # commit closes the same MMAs below it
    what, new = _mutant(campaign, text, "move-down", "line 4: nvvm.wgmma.commit")
    assert campaign._harmless("move-down", what, new)
    # the twin: an MMA between the two places joins the group
    mma = text.replace("    %y = arith.mulf", "    %t = nvvm.wgmma.mma_async %a, %b, %o\n"
                       "    %y = arith.mulf")
    what, new = _mutant(campaign, mma, "move-down", "line 4: nvvm.wgmma.commit")
    assert not campaign._harmless("move-down", what, new)


def test_a_state_no_verb_uses_may_start_at_either_phase(campaign):
    text = """gpu.func @k(%n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
  %a = pipeline.state.make : <6, consumer>
  %b = pipeline.state.make : <6, consumer>
  %r:2 = scf.for %t = %c0 to %n step %c1 iter_args(%arg1 = %a, %arg2 = %b) -> (!pipeline.state<6, consumer>, !pipeline.state<6, consumer>)  : i32 {
    pipeline.consumer.wait %p, %arg1 : <tma_async, stages = 6>, <6, consumer>
    pipeline.consumer.release %p, %arg1 : <tma_async, stages = 6>, <6, consumer>
    %s = pipeline.state.advance %arg1 : <6, consumer>
    scf.yield %s, %arg2 : !pipeline.state<6, consumer>, !pipeline.state<6, consumer>
  }
  scf.if %w {
    %u = scf.for %t = %c0 to %n step %c1 iter_args(%arg2 = %c0) -> (i32)  : i32 {
      pipeline.consumer.wait %p, %arg2 : <tma_async, stages = 6>, <6, consumer>
      scf.yield %arg2 : i32
    }
  }
}"""
    # %b is carried through the loop and yielded back, never waited on (a
    # loop elsewhere reuses the name %arg2 for something else)
    what, new = _mutant(campaign, text, "flip-phase", "line 3: %b")
    assert campaign._harmless("flip-phase", what, new)
    # the twin: %a is the state the loop waits on
    what, new = _mutant(campaign, text, "flip-phase", "line 2: %a")
    assert not campaign._harmless("flip-phase", what, new)


def test_the_after_fence_above_the_alloc_barrier(campaign):
    text = """gpu.func @k() kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
  nvvm.tcgen05.fence <before>
  pipeline.init_arrive
  pipeline.init_wait
  nvvm.tcgen05.fence <after>
}"""
    # the checker accepted it only if every user fences after the barrier
    what, new = _mutant(campaign, text, "move-down", "line 4: pipeline.init_wait")
    assert campaign._harmless("move-down", what, new)
    # the twin: the before-fence below the barrier
    bar0 = text.replace("  pipeline.init_arrive\n  pipeline.init_wait\n", "  nvvm.barrier0\n")
    what, new = _mutant(campaign, bar0, "move-down", "line 2: nvvm.tcgen05.fence")
    assert not campaign._harmless("move-down", what, new)
    what, new = _mutant(campaign, bar0, "move-down", "line 3: nvvm.barrier0")
    assert campaign._harmless("move-down", what, new)


def test_a_hand_over_later_or_a_stage_held_longer_is_schedule_only(campaign):
    text = """gpu.func @k() kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
  scf.if %w {
    pipeline.producer.commit %acc, %s : <umma_async, stages = 2>, <2, producer>
    %n = pipeline.state.advance %s : <2, producer>
    pipeline.consumer.wait %clc, %c : <clc_fetch_async, stages = 2>, <2, consumer>
    pipeline.consumer.release %k, %r : <tma_async, stages = 2>, <2, consumer>
    pipeline.consumer.wait %v, %r : <tma_async, stages = 2>, <2, consumer>
    pipeline.consumer.release %v, %r : <tma_async, stages = 2>, <2, consumer>
    pipeline.consumer.wait %v, %r2 : <tma_async, stages = 2>, <2, consumer>
  }
}"""
    # the accumulator's commit after the wait for the next CLC response
    what, new = _mutant(campaign, text, "move-down", "line 3: pipeline.producer.commit")
    assert campaign._schedule_only("move-down", what, new)
    # K's stage released after the wait for V
    what, new = _mutant(campaign, text, "move-up", "line 7: pipeline.consumer.wait")
    assert campaign._schedule_only("move-up", what, new)
    # the twins: a wait moved above the release of its own pipeline; the
    # wait moved below the release (waiting later is not holding longer)
    what, new = _mutant(campaign, text, "move-up", "line 9: pipeline.consumer.wait")
    assert not campaign._schedule_only("move-up", what, new)
    what, new = _mutant(campaign, text, "move-up", "line 6: pipeline.consumer.release")
    assert not campaign._schedule_only("move-up", what, new)


def test_a_move_past_a_one_cta_init_arrive_and_the_epilogues_short_loop(campaign):
    text = """gpu.func @k() kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
  nvvm.tcgen05.fence <before>
  pipeline.init_arrive
  pipeline.init_wait
}"""
    # the fence still precedes the barrier: init_arrive emits nothing
    what, new = _mutant(campaign, text, "move-down", "line 2: nvvm.tcgen05.fence")
    assert campaign._harmless("move-down", what, new)
    # the twin: a cluster's init_arrive is the cluster barrier's arrive
    cluster = text.replace("init_arrive", "init_arrive {cluster_size = 2 : i64}").replace(
        "init_wait", "init_wait {cluster_size = 2 : i64}")
    what, new = _mutant(campaign, cluster, "move-down", "line 2: nvvm.tcgen05.fence")
    assert not campaign._harmless("move-down", what, new)
    loop = """gpu.func @k() kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
  %c0 = arith.constant 0 : i32
  scf.if %epi {
    scf.for %i = %c0 to %c4 step %c1  : i32 {
      %v = nvvm.tcgen05.ld %t {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<64xi32>
      nvvm.tcgen05.wait <load>
      pipeline.producer.acquire %st, %s : <tma_store, stages = 2>, <2, producer>
      pipeline.named_barrier.sync id = 1, threads = 128
      pipeline.copy.tma_store %d[%c0, %i] from %b : !llvm.ptr, <3>
      pipeline.producer.commit %st, %s : <tma_store, stages = 2>, <2, producer>
    }
  }
}"""
    # one sub-tile of the accumulator fewer read and stored: data
    what, new = _mutant(campaign, loop, "trip-1", "line 4")
    assert campaign._harmless("trip-1", what, new)
    # the twin: the loop also releases the accumulator stage each trip
    released = loop.replace(
        "      pipeline.producer.commit %st",
        "      pipeline.consumer.release %acc, %r : <umma_async, stages = 2>, <2, consumer>\n"
        "      pipeline.producer.commit %st")
    what, new = _mutant(campaign, released, "trip-1", "line 4")
    assert not campaign._harmless("trip-1", what, new)
