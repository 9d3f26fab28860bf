"""The simulator initializes every barrier with the count the lowering gives
``mbarrier.init``, for every pipeline kind x cluster layout x cta_group; and
the Python view of the dialect's table of kinds (``kind_traits``,
``PipelineType.barrier_plan``, KindTraits.h) says what the lowering emits.

Each combination the type verifier accepts is lowered with
``convert-pipeline-to-nvvm`` (+ canonicalize, which folds the 2-CTA scaling
to a constant); the constants of its ``nvvm.mbarrier.init`` ops, in barrier
order (full barriers [0, S), empty barriers [S, 2S); every barrier of an
order pipeline counts the producer group), must equal
``pipeline_mlir.sim.verbs.init_counts`` on the simulator's spec of the same
type. Groups are counted in threads and warps, whose counts are static
(threadblock / cluster groups scale with the launch).
"""

import itertools

import mlir.ir as ir
import mlir.passmanager as passmanager
import pytest

import pipeline_mlir
from pipeline_mlir.dialects import pipeline as pl
from pipeline_mlir.sim.frontend import pipeline_spec
from pipeline_mlir.sim.verbs import init_counts

STAGES = 2
BLOCK_THREADS = 256  # irrelevant for thread/warp groups; fixed for the spec

# Producer and consumer groups per kind: one elected issuer where the hardware
# arrives once (TMA, tcgen05, CLC), thread and warp groups for AsyncThread
# sides.
_ONE = "#pipeline.group<thread, 1>"
_ASYNC_GROUPS = ["#pipeline.group<thread, 64>", "#pipeline.group<warp, 3>"]
KIND_GROUPS = {
    "async": (_ASYNC_GROUPS, _ASYNC_GROUPS),
    "cp_async": (_ASYNC_GROUPS, _ASYNC_GROUPS),
    "tma_async": ([_ONE], ["#pipeline.group<thread, 8>"]),
    "tma_umma": ([_ONE], [_ONE, "#pipeline.group<thread, 3>"]),
    "async_umma": (_ASYNC_GROUPS, [_ONE]),
    "umma_async": ([_ONE], _ASYNC_GROUPS),
    "tma_multi_consumers_async": ([_ONE], ["#pipeline.group<thread, 5>"]),
    "clc_fetch_async": ([_ONE], ["#pipeline.group<thread, 128>"]),
    "order": (["#pipeline.group<thread, 128>"], [None]),
    "tma_store": ([None], [None]),
}
TX_KINDS = {"tma_async", "tma_umma", "tma_multi_consumers_async", "clc_fetch_async"}
CLUSTERS = [None, (1, 2, 1, 1), (1, 1, 2, 1), (1, 2, 2, 1), (2, 1, 1, 1), (2, 2, 1, 1),
            (2, 1, 2, 1)]
CTA_GROUPS = [1, 2]


def type_text(kind, producer, consumer, cluster, cta_group):
    parts = [kind, f"stages = {STAGES}"]
    if producer:
        parts.append(f"producer = {producer}")
    if consumer:
        parts.append(f"consumer = {consumer}")
    if kind in TX_KINDS:
        parts.append("tx_count = 1024")
    if kind == "order":
        parts.append("length = 2")
    if cluster:
        parts.append("cluster = #pipeline.cluster<{}, {}, {}, {}>".format(*cluster))
    if cta_group != 1:
        parts.append(f"cta_group = {cta_group}")
    return "!pipeline.pipeline<" + ", ".join(parts) + ">"


def combinations():
    for kind, (producers, consumers) in KIND_GROUPS.items():
        for producer, consumer, cluster, cta_group in itertools.product(
                producers, consumers, CLUSTERS, CTA_GROUPS):
            yield kind, producer, consumer, cluster, cta_group


def _lowered_init_counts(ctx, t):
    module = ir.Module.parse(f"""
      gpu.module @m {{
        gpu.func @k() kernel {{
          %p = pipeline.create {{defer_sync}} : {t}
          gpu.return
        }}
      }}""")
    passmanager.PassManager.parse(
        "builtin.module(convert-pipeline-to-nvvm{chip=sm_100a}, canonicalize)").run(
            module.operation)
    counts = []

    def visit(op):
        if op.name == "nvvm.mbarrier.init":
            count = op.operands[1].owner
            assert count.name == "arith.constant", f"{t}: count is not static: {count}"
            counts.append(ir.IntegerAttr(count.attributes["value"]).value)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return counts


def _verified_type(t):
    """The parsed type, or None when the type verifier rejects it."""
    try:
        return ir.Type.parse(t)
    except ir.MLIRError:
        return None


def test_simulator_init_counts_equal_the_lowering():
    checked = set()
    doubled = []
    with pipeline_mlir.make_context() as ctx, ir.Location.unknown():
        for kind, producer, consumer, cluster, cta_group in combinations():
            t = type_text(kind, producer, consumer, cluster, cta_group)
            parsed = _verified_type(t)
            if parsed is None:
                continue
            lowered = _lowered_init_counts(ctx, t)
            spec = pipeline_spec(parsed, "p")
            if kind == "tma_store":
                assert lowered == [], t
            else:
                full, empty = init_counts(spec, BLOCK_THREADS, spec.cluster_size)
                want = ([full] * (STAGES * spec.length) if kind == "order"
                        else [full] * STAGES + [empty] * STAGES)
                assert lowered == want, f"{t}: lowering {lowered}, simulator {want}"
                single = (spec.producer.arrive_count(BLOCK_THREADS, spec.cluster_size),
                          spec.consumer.arrive_count(BLOCK_THREADS, spec.cluster_size)
                          if spec.consumer else None)
                if (full, empty) != single:
                    doubled.append((kind, cluster))
            checked.add((kind, cluster, cta_group))
    # Every kind was checked, with and without a cluster, and the 2-CTA
    # doublings were among the combinations.
    assert {k for k, _, _ in checked} == set(KIND_GROUPS)
    for kind in KIND_GROUPS:
        assert any(c is not None for k, c, _ in checked if k == kind), kind
    assert {k for k, _ in doubled} == {"async_umma", "umma_async"}
    assert ("tma_umma", (2, 1, 1, 1), 2) in checked


def _lower(body, t, state_role="producer"):
    """The names of the ops that a kernel holding `body` (verbs on %p, %s of
    type `t`) lowers to. pipeline.create {defer_sync} itself emits no arrive
    and no mapa, so those come from the verbs."""
    st = f"!pipeline.state<{STAGES}, {state_role}>"
    verbs = body.replace("{T}", t).replace("{S}", st)
    module = ir.Module.parse(f"""
      gpu.module @m {{
        gpu.func @k() kernel {{
          %p = pipeline.create {{defer_sync}} : {t}
          %s = pipeline.state.make : {st}
          {verbs}
          gpu.return
        }}
      }}""")
    passmanager.PassManager.parse(
        "builtin.module(convert-pipeline-to-nvvm{chip=sm_100a})").run(module.operation)
    names = []

    def visit(op):
        names.append(op.name)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return names


ARRIVE = {"async_thread": "nvvm.mbarrier.arrive", "cp_async": "nvvm.cp.async.mbarrier.arrive",
          "tcgen05_mma": "nvvm.tcgen05.commit"}
SIGNALS = set(ARRIVE.values()) | {"nvvm.mbarrier.arrive.expect_tx"}
# Targets that reach another CTA's barrier (through mapa) once the layout
# has more than one CTA.
REMOTE = {"pair_leader", "cluster_cta0", "signalling_lanes"}


def test_kind_table_says_what_the_lowering_emits():
    """For every kind x cluster layout x cta_group the verifier accepts: the
    plan's init counts are the lowered mbarrier.init constants, and the
    table's mechanisms and arrive targets are the signals the lowering emits
    for producer.acquire (expect_tx where the full barrier counts bytes),
    producer.commit and consumer.release (mapa where the target is another
    CTA)."""
    seen_targets = set()
    with pipeline_mlir.make_context(), ir.Location.unknown():
        for kind, producer, consumer, cluster, cta_group in combinations():
            t = type_text(kind, producer, consumer, cluster, cta_group)
            parsed = _verified_type(t)
            if parsed is None:
                continue
            ptype = pl.PipelineType(parsed)
            traits = pl.kind_traits(kind)
            plan = ptype.barrier_plan(BLOCK_THREADS)
            lowered = _lowered_init_counts(None, t)
            want = ([plan["full_count"]] * plan["num_full"]
                    + [plan["empty_count"]] * plan["num_empty"])
            assert lowered == want, f"{t}: lowering {lowered}, table {plan}"
            assert plan["num_barriers"] == len(lowered), t
            if not traits["has_barriers"] or not traits["has_consumer_group"]:
                continue  # tma_store / order: verbs of their own

            acquire = _lower("pipeline.producer.acquire %p, %s : {T}, {S}", t)
            assert ("nvvm.mbarrier.arrive.expect_tx" in acquire) == traits["tx_bytes"], t
            remote_arm = plan["arm"] == "every_cluster_cta" and plan["cluster_size"] > 1
            assert ("nvvm.mapa" in acquire) == remote_arm, (t, acquire)

            commit = _lower("pipeline.producer.commit %p, %s : {T}, {S}", t)
            signals = [n for n in commit if n in SIGNALS]
            expected = ARRIVE.get(traits["producer_op_name"])
            assert signals == ([expected] if expected else []), (t, commit)
            if expected is None:
                assert plan["commit"] == "none", t
            assert ("nvvm.mapa" in commit) == (plan["commit"] in REMOTE), (t, commit)
            seen_targets.add(plan["commit"])

            sides = ([pl.OpType.TCGen05Mma, pl.OpType.AsyncThread]
                     if traits["consumer_op_per_release"] else [None])
            for side in sides:
                attr = "" if side is None else f" {{op_type = #pipeline.op_type<{side}>}}"
                release = _lower("pipeline.consumer.release %p, %s" + attr + " : {T}, {S}", t,
                                 state_role="consumer")
                op_name = str(side) if side is not None else traits["consumer_op_name"]
                target = "multicast_mask" if op_name == "tcgen05_mma" else plan["release"]
                signals = {n for n in release if n in SIGNALS}
                assert signals == {ARRIVE[op_name]}, (t, side, release)
                remote = target in REMOTE and plan["cluster_size"] > 1
                assert ("nvvm.mapa" in release) == remote, (t, side, release)
                seen_targets.add(target)
    assert seen_targets >= {"local", "pair_leader", "cluster_cta0", "signalling_lanes",
                            "multicast_mask", "none"}


def test_kind_table_rows():
    """The rows the builders and the simulator read: one per kind, named as
    the dialect spells it, with the CuTe DSL class."""
    for kind in pl.PipelineKind:
        t = pl.kind_traits(kind)
        assert t["kind"] == int(kind) and t["kind_name"] == str(kind)
        assert pl.kind_traits(str(kind)) is t
        assert t["cute_class"].startswith("Pipeline")
    with pytest.raises(ValueError):
        pl.kind_traits("no_such_kind")
    with pytest.raises(ValueError):
        pl.kind_traits(99)
