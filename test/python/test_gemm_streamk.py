"""Stream-K, deviceless: the schedule (whole-tile rounds, then equal runs
of K blocks), folded from the kernel's own IR, equals the Python model, and
the model covers every (tile, K block) once with consistent workspace slots
and contributors; the stream-K variants build, pass the protocol checker,
assemble without spills and carry the arrival counter's instructions; the
pick takes stream-K where the plain pick leaves the last wave part-empty,
never for a fused epilogue, and keeps the shapes of whole waves; the host
passes the workspace and counters of the call's stream. The GPU checks
(against torch in fp32, bitwise equal over runs, counters back at zero) are
test/gpu/test_gpu_launch.py::test_stream_k_* and ::test_gemm_picks_stream_k_*."""

import random
import re
import shutil
from dataclasses import replace

import pytest
from mlir import passmanager as pm
from mlir.dialects import arith

from _gemm_pick_rules import before_cluster_n_any  # noqa: F401 (autouse)
from _ptxas import spill_bytes

from pipeline_mlir.kernel import GlobalPtr, Kernel, Scalar, store
from pipeline_mlir.kernel.tile_scheduler import StreamKSchedule
from pipeline_mlir.kernel.values import i32
from pipeline_mlir.kernels import hopper_gemm as hg
from pipeline_mlir.kernels import streamk_fixup as skf
from pipeline_mlir.ops import gemm_configs, gemm_stream_k

ASSEMBLER = "ptxas" if shutil.which("ptxas") else "nvjitlink"


# --- the schedule ------------------------------------------------------------------

def _model(tiles, k_blocks, grid, sk_ctas, rounds=None):
    """An independent statement of the schedule: per CTA, its whole tiles
    (c, c + grid, ... for ``rounds`` waves, by default every full one),
    then, for the first sk_ctas CTAs, its run [c I / S, (c + 1) I / S) of
    the remaining tiles' K blocks laid end to end, cut at tile boundaries,
    the later piece first."""
    if rounds is None:
        rounds = tiles // grid
    rest = tiles - rounds * grid
    iters = rest * k_blocks
    out = []
    for c in range(grid):
        units = [(c + r * grid, 0, k_blocks) for r in range(rounds)]
        pieces = []
        if c < sk_ctas:
            x, end = c * iters // sk_ctas, (c + 1) * iters // sk_ctas
            while x < end:
                t = x // k_blocks
                stop = min(end, (t + 1) * k_blocks)
                pieces.append((rounds * grid + t, x - t * k_blocks, stop - x))
                x = stop
        out.append(units + pieces[::-1])
    return out


# (tiles, K blocks, grid, CTAs sharing the stream-K run, whole-tile rounds:
# None every full wave, fewer the spread launch's runs of one to two tiles)
CASES = [(144, 122, 132, 132, None), (144, 122, 132, 120, None), (65, 195, 130, 130, None),
         (18, 39, 126, 126, None), (264, 10, 132, 1, None), (1, 200, 132, 132, None),
         (133, 1, 132, 1, None), (300, 3, 132, 108, None), (5, 40, 7, 7, None),
         (12, 7, 5, 4, None), (20, 9, 6, 6, None), (7, 3, 7, 1, None),
         (144, 122, 132, 132, 0), (234, 179, 132, 132, 0), (344, 64, 132, 132, 1),
         (72, 122, 66, 66, 0), (13, 5, 7, 7, 0), (11, 3, 6, 6, 0), (19, 4, 5, 5, 2)]


@pytest.mark.parametrize("tiles, k_blocks, grid, sk_ctas, rounds", CASES)
def test_schedule_equals_the_model(tiles, k_blocks, grid, sk_ctas, rounds):
    want = _model(tiles, k_blocks, grid, sk_ctas, rounds)
    for c in range(grid):
        s = StreamKSchedule(tiles, k_blocks, grid, c, sk_ctas, rounds)
        assert [s.unit(i)[:3] for i in range(s.units)] == want[c]


def test_runs_start_on_two_bands_of_k():
    """The later piece first: every stream-K CTA starts at K block 0 of a
    tile or, when its run lies inside one tile, where the run begins; its
    second piece, if any, starts a tile's length minus a run's after its
    first started (so all CTAs walk two bands of K at one pace)."""
    tiles, kb, grid, sk_ctas = 144, 122, 132, 132
    run = (tiles % grid) * kb // sk_ctas
    for c in range(grid):
        s = StreamKSchedule(tiles, kb, grid, c, sk_ctas)
        units = [s.unit(i) for i in range(s.rounds, s.units)]
        if len(units) == 2:
            (_, b0, n0, *_), (_, b1, n1, *_) = units
            assert b0 == 0 and b1 + n1 == kb and n0 + n1 in (run, run + 1)


def _check_cover(tiles, k_blocks, grid, sk_ctas, rounds=None):
    """Every (tile, K block) once; a CTA's partial segments take distinct
    slots (two at most); each stream-K tile's partials were written by
    exactly ``contributors`` (in K order), at ``slot_of``'s slots, all but
    the last, which waits for them (the one ending the tile); and that
    wait is safe: a waiting unit is the last of its CTA, and no unit whose
    partial a wait needs comes after a waiting unit in its CTA (the waits
    form no cycle)."""
    seen, written = {}, {}
    for c in range(grid):
        s = StreamKSchedule(tiles, k_blocks, grid, c, sk_ctas, rounds)
        slots, waited = [], False
        for i in range(s.units):
            t, begin, count, partial, slot, sk_tile = s.unit(i)
            assert count >= 1
            for kb in range(begin, begin + count):
                assert (t, kb) not in seen
                seen[t, kb] = c
            if partial:
                ends = begin + count == k_blocks
                assert not waited         # nothing after a wait
                waited = ends
                assert not ends or i == s.units - 1
                slots.append(slot)
                written.setdefault(sk_tile, []).append((begin, c, slot, ends))
        assert len(slots) == len(set(slots)) <= 2
        assert all(2 * c <= x <= 2 * c + 1 for x in slots)
    assert len(seen) == tiles * k_blocks
    s = StreamKSchedule(tiles, k_blocks, grid, 0, sk_ctas, rounds)
    for sk_tile, parts in written.items():
        first, last = s.contributors(sk_tile)
        parts = sorted(parts)
        assert [c for _, c, _, _ in parts] == list(range(first, last + 1))
        assert all(s.slot_of(c, sk_tile) == slot for _, c, slot, _ in parts)
        assert [e for *_, e in parts] == [False] * (last - first) + [True]


@pytest.mark.parametrize("tiles, k_blocks, grid, sk_ctas, rounds", CASES)
def test_every_k_block_once_and_the_fixup_finds_every_partial(tiles, k_blocks, grid, sk_ctas,
                                                              rounds):
    _check_cover(tiles, k_blocks, grid, sk_ctas, rounds)


def test_random_schedules_through_the_host_launch():
    """Shapes drawn at random, on the launch the host makes
    (gemm_configs.stream_k_launch, each kind and the model's choice): every
    stream-K CTA's run non-empty and at most one tile long (leftover) or
    two (spread: fewer than two waves' tiles over the whole wave), the
    cover and the fixup's bookkeeping as above (at most two slots a CTA),
    the host's plan equal to the kernel's."""
    rng = random.Random(7)
    for _ in range(300):
        sms = rng.choice([132, 114, 16, 7])
        tiles, kb = rng.randint(1, 3 * sms), rng.randint(1, 200)
        variant = rng.choice(gemm_configs.STREAM_K_TILES)
        spread = rng.choice([None, True, False, "even"])
        grid, sk_ctas, rounds = gemm_configs.stream_k_launch(tiles, kb, sms, variant, spread)
        assert 1 <= sk_ctas <= grid <= sms and (tiles < sms or grid == sms)
        s = StreamKSchedule(tiles, kb, grid, 0, sk_ctas, rounds)
        long = 2 if rounds < tiles // grid else 1
        assert s.sk_tiles == 0 or s.sk_tiles <= long * sk_ctas <= long * s.iters
        assert spread is None or tiles < sms or tiles % sms == 0 \
            or (rounds < tiles // grid) == (spread is True)
        if spread == "even" and tiles % sms:     # every CTA of the wave shares the leftover
            assert rounds == tiles // sms and sk_ctas == min(sms, (tiles - rounds * sms) * kb)
        assert gemm_configs.stream_k_plan(tiles, kb, sms, variant, spread) == (
            s.rounds, s.sk_tiles, sk_ctas)
        _check_cover(tiles, kb, grid, sk_ctas, rounds)


def _const(v):
    return Scalar(arith.constant(i32(), v))


def _folded(tiles, k_blocks, grid, cta, sk_ctas, units):
    """StreamKSchedule as the kernel emits it (i32 Scalars, i64 where
    products may pass 2^31), folded for constant inputs by canonicalize:
    per unit its six fields, then the contributors and slots of its tile."""
    k = Kernel("streamk_map", block_dim=32, params={"out": GlobalPtr()})
    per = 9
    with k:
        (out,) = k.args
        s = StreamKSchedule(_const(tiles), _const(k_blocks), _const(grid), _const(cta),
                            _const(sk_ctas))
        store(s.units, out, 0)
        for i in range(units):
            t, begin, count, partial, slot, sk_tile = s.unit(_const(i))
            first, last = s.contributors(sk_tile)
            vals = [t, begin, count, partial.select(1, 0), slot, sk_tile, first, last,
                    s.slot_of(first, sk_tile)]
            for j, v in enumerate(vals):
                store(v, out, 1 + per * i + j)
    pm.PassManager.parse("builtin.module(gpu.module(gpu.func(canonicalize)))",
                         k.context).run(k.module.operation)
    text = str(k.module)
    stored = re.findall(r"llvm\.store %(c[-\w]*)", text)
    consts = dict(re.findall(r"%(c[-\w]*) = arith\.constant (-?\d+) : i32", text))
    consts.update({"true": "1", "false": "0"})
    values = [int(consts[name]) for name in stored]
    assert len(values) == 1 + per * units, text
    return values[0], [tuple(values[1 + per * i:1 + per * (i + 1)]) for i in range(units)]


@pytest.mark.parametrize("tiles, k_blocks, grid, sk_ctas, cta", [
    (144, 122, 132, 132, 0), (144, 122, 132, 132, 77), (144, 122, 132, 120, 131),
    (65, 195, 130, 130, 64), (300, 3, 132, 108, 5), (12, 7, 5, 4, 3)])
def test_unit_map_in_the_kernel_equals_the_model(tiles, k_blocks, grid, sk_ctas, cta):
    model = StreamKSchedule(tiles, k_blocks, grid, cta, sk_ctas)
    units, got = _folded(tiles, k_blocks, grid, cta, sk_ctas, model.units)
    assert units == model.units
    want = []
    for i in range(model.units):
        t, begin, count, partial, slot, sk_tile = model.unit(i)
        first, last = model.contributors(sk_tile)
        want.append((t, begin, count, int(partial), slot, sk_tile, first, last,
                     model.slot_of(first, sk_tile)))
    for g, w, (t, begin, count, partial, *_rest) in zip(got, want, want):
        if partial:
            assert g == w
        else:   # a whole tile: the fixup's fields are never read
            assert g[:4] == w[:4]


# --- the kernels -------------------------------------------------------------------

@pytest.mark.parametrize("variant", sorted(gemm_configs.STREAM_K_VARIANTS))
def test_stream_k_variant_builds_checks_and_assembles(variant):
    """Verified, through the protocol checker (to_ptx runs it), assembled;
    the plain kernel's wgmma and TMA store, the four extra parameters (no
    timeline's), one arrival per partial (bar.warp.sync, membar.gl around
    a global atomic add), one wait (a relaxed gpu-scope poll, then
    membar.gl), 16-byte partial stores and loads, no time stamps."""
    cfg = replace(hg.GemmConfig(dtype="f16"), **gemm_configs.overrides(variant))
    k = hg.build(cfg)
    k.verify()
    ptx = k.to_ptx()
    assert cfg.name.endswith("_streamk")
    assert [n for n, _ in k.params] == ["a", "b", "c", "c_ptr", "m", "n", "k",
                                        "sk_workspace", "sk_counters", "sk_ctas",
                                        "sk_rounds"]
    assert ptx.count("membar.gl") == 3 and ptx.count("atom.global.add.u32") == 1
    assert ptx.count("ld.relaxed.gpu.global.b32") == 1
    assert "bar.warp.sync" in ptx and "cp.async.bulk.tensor.2d.global.shared::cta" in ptx
    assert ptx.count("st.global.v4.b32") == cfg.block_n // 8
    assert ptx.count("ld.global.v4.b32") == cfg.block_n // 8
    assert "globaltimer" not in ptx and "clock64" not in ptx
    assert "cp.async.bulk.prefetch" not in ptx
    assert _wait_then_fence_then_loads(ptx)
    assert _poll_is_warp_uniform(ptx)
    k.compile(assembler=ASSEMBLER)


def _poll_is_warp_uniform(ptx):
    """The wait's loop exits on a warp vote (every lane polls; no lane-0
    branch around the loop): between the relaxed load and the loop's
    branch, a ``vote.sync.any.pred``. With lane 0 polling alone, ptxas
    kept every mainloop's wgmma descriptors in per-thread registers (16
    R2UR a K block) and the stream-K kernels' whole tiles ran 7% slower
    than the plain kernel's (docs/gemm.md, "Run10")."""
    body = ptx[ptx.index(".entry"):]
    poll = body.find("ld.relaxed.gpu.global.b32")
    branch = body.find("bra", poll)
    return poll >= 0 and "vote.sync.any.pred" in body[poll:branch]


def test_a_lane_0_poll_is_not_warp_uniform(monkeypatch):
    """The check above refuses the wait as it was (lane 0 polls inside an
    ``if lane == 0``, then bar.warp.sync)."""
    import mlir.ir as ir
    from mlir.dialects import arith, llvm, nvvm, scf

    from pipeline_mlir.kernel import arrival_counter as ac
    from pipeline_mlir.kernel.values import i32, to_value

    def lane0_poll(counters, index, count, lane, predicate):
        branch = scf.IfOp(to_value(lane == 0, what="lane 0"), [], has_else=False)
        with ir.InsertionPoint(branch.then_block):
            loop = scf.WhileOp([], [])
            before, after = loop.before.blocks.append(), loop.after.blocks.append()
            with ir.InsertionPoint(before):
                seen = llvm.load(i32(), ac._counter_ptr(counters, index), alignment=4,
                                 ordering=llvm.AtomicOrdering.monotonic, syncscope="device")
                scf.ConditionOp(arith.cmpi(predicate, seen, to_value(count, i32())), [])
            with ir.InsertionPoint(after):
                scf.YieldOp([])
            scf.YieldOp([])
        nvvm.bar_warp_sync(to_value(-1, i32()))
        ac._fence_gpu()

    monkeypatch.setattr(ac, "_poll", lane0_poll)
    cfg = replace(hg.GemmConfig(), **gemm_configs.overrides("128x128_streamk"))
    ptx = hg.build(cfg).to_ptx()
    assert _wait_then_fence_then_loads(ptx) and not _poll_is_warp_uniform(ptx)


def _wait_then_fence_then_loads(ptx):
    """The tile's last contributor reads the others' partials only after
    its poll saw their arrivals and a gpu-scope fence followed: in the
    PTX, the poll (the one relaxed load), then a membar.gl, then the
    first 16-byte partial load, and no partial load before the poll."""
    body = ptx[ptx.index(".entry"):]
    poll = body.find("ld.relaxed.gpu.global.b32")
    first_load = body.find("ld.global.v4.b32")
    if poll < 0 or first_load < poll:
        return False
    return "membar.gl" in body[poll:first_load]


@pytest.mark.parametrize("plant", ["no fence after the poll", "loads before the wait"])
def test_planted_early_partial_read_is_rejected(plant, monkeypatch):
    """A planted mistake on the fix-up path: the last contributor reads
    the partials without the acquire fence after its poll, or before it
    waits at all. The protocol checker does not see these global-memory
    counters (kernel/arrival_counter.py), so the check here is the
    instruction order above; the production kernel passes it (the
    simulator's view of the same mistakes: test_sim_streamk_fixup.py)."""
    from pipeline_mlir.kernel import arrival_counter
    from mlir.dialects import nvvm

    real_wait = arrival_counter.wait_count
    if plant == "no fence after the poll":
        monkeypatch.setattr(arrival_counter, "_fence_gpu", lambda: None)
        # warp_arrive keeps its fences: only the wait's is dropped
        real_arrive = arrival_counter.warp_arrive

        def arrive(*a):
            monkeypatch.setattr(arrival_counter, "_fence_gpu",
                                lambda: nvvm.MembarOp(nvvm.MemScopeKind.GPU))
            try:
                return real_arrive(*a)
            finally:
                monkeypatch.setattr(arrival_counter, "_fence_gpu", lambda: None)
        monkeypatch.setattr(arrival_counter, "warp_arrive", arrive)
    else:
        real_load = skf.load_partial_slot
        pending = []

        def early_load(*a):
            frag = real_load(*a)
            return frag

        def wait_later(*a):
            pending.append(a)      # the wait moved after the loads below

        def load_then_wait(*a):
            frag = early_load(*a)
            while pending:
                real_wait(*pending.pop())
            return frag
        monkeypatch.setattr(arrival_counter, "wait_count", wait_later)
        monkeypatch.setattr(skf, "load_partial_slot", load_then_wait)
    cfg = replace(hg.GemmConfig(), **gemm_configs.overrides("128x128_streamk"))
    ptx = hg.build(cfg).to_ptx()
    assert "ld.global.v4.b32" in ptx and "ld.relaxed.gpu.global.b32" in ptx
    assert not _wait_then_fence_then_loads(ptx)


@pytest.mark.parametrize("variant", sorted(gemm_configs.STREAM_K_EXPERIMENTS))
def test_prefetch_experiment_builds_checks_and_assembles(variant):
    """``<tile>_streamk_pf``: the stream-K kernel plus one L2 bulk prefetch
    (in a loop over the other contributors) by the producer; checked,
    no spills, never picked."""
    assert variant not in gemm_configs.STREAM_K_VARIANTS and gemm_configs.is_stream_k(variant)
    cfg = replace(hg.GemmConfig(), **gemm_configs.overrides(variant))
    k = hg.build(cfg)
    ptx = k.to_ptx()
    assert cfg.name.endswith("_streamk_pf") and ptx.count("cp.async.bulk.prefetch.L2") == 1
    assert _wait_then_fence_then_loads(ptx)
    k.compile(assembler=ASSEMBLER)
    with pytest.raises(ValueError, match="sk_prefetch prefetches stream-K partials"):
        replace(hg.GemmConfig(), sk_prefetch=True).check()


def test_timeline_build_stamps_each_phase():
    """The profiling build (``<tile>_streamk_timeline``): a fifth stream-K
    parameter, %globaltimer and %clock64 read at every stamp, through
    ptxas without spills; never picked, not in the stream-K table; its
    layout as benchmarks/gemm/streamk_timeline.py decodes it."""
    import importlib.util
    import os

    from pipeline_mlir.kernels import streamk_timeline as tl

    name = "128x256c2_streamk_timeline"
    assert name in gemm_configs.TIMELINE_VARIANTS and name not in gemm_configs.STREAM_K_VARIANTS
    assert gemm_configs.tile_variant(name) == "128x256c2" and gemm_configs.is_stream_k(name)
    cfg = replace(hg.GemmConfig(), **gemm_configs.overrides(name))
    k = hg.build(cfg)
    assert cfg.name.endswith("_streamk_timeline")
    assert [n for n, _ in k.params][-1] == "sk_timeline"
    ptx = k.to_ptx()
    assert "%globaltimer" in ptx and "%clock64" in ptx
    k.compile(assembler=ASSEMBLER)
    with pytest.raises(ValueError, match="timeline stamps the stream-K phases"):
        replace(hg.GemmConfig(), timeline=True).check()
    path = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "gemm",
                        "streamk_timeline.py")
    spec = importlib.util.spec_from_file_location("streamk_timeline_script", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert (script.EVENTS, script.UNITS, script.SLOTS, script.MAX_WARPGROUPS) == \
        (tl.EVENTS, tl.UNITS, tl.SLOTS, tl.MAX_WARPGROUPS)
    assert tl.buffer_bytes(3) == 3 * tl.MAX_WARPGROUPS * tl.SLOTS * len(tl.EVENTS) * 16


@pytest.mark.skipif(not shutil.which("ptxas"), reason="ptxas -v counts the spills")
@pytest.mark.parametrize("variant", ["128x256_streamk", "128x192_streamk", "192x192_streamk",
                                     "192x128_streamk"])
def test_stream_k_variant_does_not_spill(variant):
    ptx = hg.build(replace(hg.GemmConfig(), **gemm_configs.overrides(variant))).to_ptx()
    assert spill_bytes(ptx) == 0


def test_simulator_runs_the_whole_tile_path():
    """pipeline-sim on one CTA (its grid): every tile whole, no stream-K
    run (the fix-up on several CTAs: test_sim_streamk_fixup.py)."""
    import os
    import tempfile

    from pipeline_mlir.sim.cli import main as sim_main

    k = hg.build(replace(hg.GemmConfig(), **gemm_configs.overrides("128x128_streamk")))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "streamk.mlir")
        with open(path, "w") as f:
            f.write(str(k))
        # 6 tiles on a grid of one: six whole-tile rounds (sk_rounds), no run
        assert sim_main([path, "--arg", "4=384", "--arg", "5=256", "--arg", "6=640",
                         "--arg", "9=1", "--arg", "10=6", "--schedules", "2"]) == 0


def test_plain_variants_carry_nothing_of_stream_k():
    """stream_k=False is the default and emits nothing of it (the
    byte-for-byte comparison of every table variant's str(module) before
    and after stream-K was run by hand: docs/gemm.md); misuse is refused."""
    for over in gemm_configs.VARIANTS.values():
        cfg = replace(hg.GemmConfig(), **over)
        assert not cfg.stream_k and "_streamk" not in cfg.name
    text = str(hg.build(replace(hg.GemmConfig(), **gemm_configs.VARIANTS["128x128"])).module)
    assert "atomicrmw" not in text and "nvvm.membar" not in text
    from pipeline_mlir.ops.epilogues import Epilogue

    with pytest.raises(ValueError, match="stream_k and split_k are two ways to cut K"):
        hg.build(hg.GemmConfig(stream_k=True, split_k=2))
    with pytest.raises(ValueError, match="a fused call keeps its plain variant"):
        hg.build(hg.GemmConfig(stream_k=True, epilogue=Epilogue(activation="relu")))
    with pytest.raises(ValueError, match="is a stream-K variant"):
        gemm_configs.fused("128x256_streamk", Epilogue(activation="relu"))


# --- the pick ----------------------------------------------------------------------

# Measured (h200-random-sweep-run2.log) faster with a stream-K variant than
# with any plain one, or within 1% of the best: a part-empty last wave, or
# too few tiles for the SMs and a long K.
RAGGED = [(4544, 1008, 7784), (2040, 2752, 6744), (512, 360, 9920), (336, 320, 12864),
          (1496, 456, 9000), (224, 168, 14872), (432, 568, 7312), (152, 144, 5648)]
# Whole waves, or one wave nearly full: the plain pick stays.
WHOLE = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 2048, 2048), (3072, 3072, 3072),
         (4096, 14336, 4096), (8192, 12288, 4096), (2048, 28672, 4096), (4096, 4096, 14336),
         (16384, 1024, 4096), (8192, 8192, 1024), (1024, 1024, 1024)]


def table_plain(m, n, k, dtype):
    """The plain pick a stream-K one is weighed against: the table's (a tile
    cut to the shape, gemm_configs.choose_cut, comes after stream-K)."""
    saved = gemm_configs.AUTO_CUT
    gemm_configs.AUTO_CUT = False
    try:
        return gemm_configs.choose(m, n, k, dtype, stream_k=False)
    finally:
        gemm_configs.AUTO_CUT = saved


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_pick_takes_stream_k_where_the_last_wave_is_part_empty(dtype):
    for m, n, k in RAGGED:
        v = gemm_configs.choose(m, n, k, dtype)
        assert gemm_configs.is_stream_k(v), (m, n, k, v)
        plain = table_plain(m, n, k, dtype)
        assert not gemm_configs.is_stream_k(plain)
        assert gemm_configs.estimate_time_stream_k(gemm_configs.tile_variant(v), m, n, k, 132) \
            < gemm_configs.estimate(plain, m, n, 132, k)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_pick_keeps_whole_waves_plain(dtype):
    for m, n, k in WHOLE:
        assert not gemm_configs.is_stream_k(gemm_configs.choose(m, n, k, dtype)), (m, n, k)


def test_pick_on_a_grid_of_shapes():
    """Over a grid of shapes: a stream-K pick is one of the table's, its
    modelled time beats the plain pick's by the margin (the even launch's
    where its launch is the even kind); a shape whose
    128x256 tiles fill whole waves exactly keeps them (stream-K may still
    replace a smaller plain tile that fills its waves: 200 x 4104 is 132
    tiles of 64x128, whose one consumer warpgroup per SM runs slower than
    stream-K's 128x256); a fused call's pick (stream_k=False) never does."""
    sizes = [128, 200, 512, 1000, 1544, 2048, 3000, 4104, 6000, 9000, 16384]
    seen = evens = 0
    for m in sizes:
        for n in sizes:
            for k in (64, 520, 4096, 12000):
                v = gemm_configs.choose(m, n, k, "bf16")
                assert not gemm_configs.is_stream_k(
                    gemm_configs.choose(m, n, k, "bf16", stream_k=False))
                if not gemm_configs.is_stream_k(v):
                    continue
                seen += 1
                assert v in gemm_configs.STREAM_K_VARIANTS or \
                    v in gemm_configs.STREAM_K_SHARE_VARIANTS or v in gemm_configs.SHARE1_PICKS
                plain = table_plain(m, n, k, "bf16")
                assert plain != "128x256" or gemm_configs.units_of(plain, m, n) % 132, (m, n, k)
                t = gemm_configs.tile_variant(v)
                (bm, bn), cl = gemm_configs.tile(t), gemm_configs.cluster_of(t)
                even = gemm_configs.is_even_launch(-(-m // (bm * cl)) * -(-n // bn),
                                                   -(-k // 64), 132 // cl, t)
                evens += even
                margin = gemm_configs.STREAM_K_MARGIN_EVEN if even else \
                    gemm_configs.STREAM_K_MARGIN
                assert max(gemm_configs.estimate_time_stream_k(t, m, n, k, 132),
                           gemm_configs.FLOOR_S) < \
                    margin * max(gemm_configs.estimate(plain, m, n, 132, k), gemm_configs.FLOOR_S)
    assert seen > 20 and evens >= 1


# The small-output, long-K shapes of the random sweep (docs/gemm.md, "The
# last contributor adds the partials"), measured on an H200 beside the
# stream-K candidates: the 128x128 stream-K tile for the tiles far fewer
# than the SMs, with the shared fix-up (14-17 us a kernel in a CUDA graph
# against 19-22 with the last contributor's: "The shared fix-up"), the 2-CTA 128x256 stream-K tile for 1496 x 456 x 9000 and
# (spread) 4544 x 1008 x 7784, and the plain 128x128 tile for 5648 x 216
# x 8832, where the stream-K tiles ran 0.77-0.84x cuBLAS against its
# 0.89-0.90x (each CTA's run reads a K band of A that the tile's other
# column is not reading then: L2 keeps less of A). The shared fix-up with
# one arrival a warp since (gemm_configs.choose_share1).
NAMED = {(224, 168, 14872): ("128x128_streamk_share1", 0),
         (336, 320, 12864): ("128x128_streamk_share1", 0),
         (512, 360, 9920): ("128x128_streamk_share1", 0),
         (5648, 216, 8832): ("128x128", None),
         (1496, 456, 9000): ("128x256c2_streamk", 0),
         (4544, 1008, 7784): ("128x256c2_streamk", "spread")}


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("shape", sorted(NAMED))
def test_pick_on_the_small_output_long_k_shapes(shape, dtype):
    want, kind = NAMED[shape]
    v = gemm_configs.choose(*shape, dtype)
    assert v == want
    if kind is not None:
        m, n, k = shape
        bm, bn = gemm_configs.tile(gemm_configs.tile_variant(v))
        cl = gemm_configs.cluster_of(gemm_configs.tile_variant(v))
        units = -(-m // (bm * cl)) * -(-n // bn)
        grid, sk_ctas, rounds = gemm_configs.stream_k_launch(
            units, -(-k // 64), 132 // cl, gemm_configs.tile_variant(v),
            share=gemm_configs.overrides(v).get("sk_share", False))
        if kind == "spread":     # the last full wave joins the leftover
            assert (sk_ctas, rounds) == (132 // cl, units // (132 // cl) - 1)
        else:                    # fewer tiles than SMs: pieces of each tile
            assert rounds == 0 and sk_ctas % units == 0 and sk_ctas > units


def test_auto_stream_k_off_keeps_the_plain_pick(monkeypatch):
    monkeypatch.setattr(gemm_configs, "AUTO_STREAM_K", False)
    assert not gemm_configs.is_stream_k(gemm_configs.choose(4544, 1008, 7784, "bf16"))


def test_stream_k_launch():
    """One CTA per SM for the full waves; the leftover tiles cut into equal
    pieces, more of them the longer the K (a piece's K blocks against the
    partials the last arrival reads), one piece when K is a block."""
    grid, sk_ctas, rounds = gemm_configs.stream_k_launch(144, 122, 132, spread=False)
    assert grid == 132 and rounds == 1 and sk_ctas % 12 == 0 and 12 < sk_ctas <= 132
    grid, sk_ctas, rounds = gemm_configs.stream_k_launch(65, 195, 132)
    assert grid == sk_ctas == 130 and rounds == 0          # 65 tiles in halves
    assert gemm_configs.stream_k_launch(4, 1, 132) == (4, 4, 0)
    assert gemm_configs.stream_k_launch(264, 10, 132) == (132, 1, 2)   # whole waves
    short = gemm_configs.stream_k_launch(12, 8, 132)[1] // 12
    long = gemm_configs.stream_k_launch(12, 800, 132)[1] // 12
    assert 1 <= short < long <= 11


def test_stream_k_spreads_a_small_leftover_over_the_last_wave():
    """12 tiles left over by a wave of 132 with a long K: cut into pieces,
    each tile's last arrival would read up to eleven partials; the spread
    launch hands the last full wave to the stream-K run (no whole-tile
    round), every CTA 1.09 tiles' K blocks, at most two contributors a
    tile: modelled faster. 80 left over by two waves of a short K: one
    round, then 212 tiles over the 132 CTAs if asked (runs of 1.6 tiles,
    measured slower: not the model's choice for a leftover over a quarter
    of the wave); 102 left over of 234 likewise. Those two leftovers, over
    half the wave, would be one whole piece a tile in the leftover kind:
    the model takes the even kind there (every CTA 80 / 132 or 102 / 132
    of a tile after the full waves), and the leftover kind when asked."""
    assert gemm_configs.stream_k_launch(144, 122, 132) == (132, 132, 0)
    assert gemm_configs.stream_k_launch(344, 64, 132, spread=True) == (132, 132, 1)
    assert gemm_configs.stream_k_launch(344, 64, 132) == (132, 132, 2)
    assert gemm_configs.stream_k_launch(344, 64, 132, spread=False) == (132, 80, 2)
    assert gemm_configs.stream_k_launch(234, 179, 132, spread=True) == (132, 132, 0)
    assert gemm_configs.stream_k_launch(234, 179, 132) == (132, 132, 1)
    assert gemm_configs.stream_k_launch(234, 179, 132, spread=False) == (132, 102, 1)
    # no full wave: the leftover kind whatever is asked
    assert gemm_configs.stream_k_launch(12, 141, 66, spread=True) == \
        gemm_configs.stream_k_launch(12, 141, 66, spread=False)


# --- the host side, without a GPU --------------------------------------------------

class _Tensor:
    _next = 0x7000_0000

    def __init__(self, shape, dtype="bf16"):
        self.shape, self.dtype, self.device = tuple(shape), dtype, "cuda:0"
        self.base = _Tensor._next
        _Tensor._next += 1 << 24

    def get_device(self):
        return 0

    def data_ptr(self):
        return self.base


def test_stream_k_host_passes_the_stream_s_workspace_and_counters(monkeypatch):
    """One launch of the GEMM with (workspace, counters)'s addresses as
    its extra arguments and sk_ctas: 2 x SMs fp32 tiles, SMs x warps zeroed counters,
    kept per (device, stream, tile), so a repeat on a stream reuses them
    and another stream gets its own; a fused call's arguments are refused
    (a fused call picks a plain variant)."""
    import sys
    import types

    from pipeline_mlir.ops import streamk_host

    torch = types.ModuleType("torch")
    torch.float32, torch.int32 = "f32", "i32"
    made = []

    def alloc(kind):
        def f(n, device=None, dtype=None):
            made.append((kind, n, dtype))
            return _Tensor((n,), dtype)
        return f

    torch.empty, torch.zeros = alloc("empty"), alloc("zeros")
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(streamk_host, "_buffers", {})
    log = []

    class Gemm:
        meta = {"name": "gemm_streamk", "block_m": 128, "block_n": 256, "cluster_m": 1}
        device = types.SimpleNamespace(ordinal=0, limits=types.SimpleNamespace(
            multiprocessors=132))

        def stream_k_wave(self, sms):
            return sms

        def launch(self, a, b, c, extra, stream, sync):
            log.append((a, b, c, extra, stream))
            return c

    g = streamk_host.StreamKGemm(Gemm())
    a, b, c = _Tensor((4544, 7784)), _Tensor((1008, 7784)), _Tensor((4544, 1008))
    assert g.launch(a, b, c, (), 7, False) is c
    (ga, gb, gc, (ws, counters, share, rounds), s), = log
    assert (ga, gb, gc, s) == (a, b, c, 7)
    assert made == [("empty", 2 * 132 * 128 * 256, "f32"), ("zeros", 2 * 132 * 8, "i32")]
    # the launch takes the set's addresses (the set holds the tensors)
    assert (ws, counters) == tuple(t.data_ptr() for t in streamk_host.buffers(a, Gemm.meta,
                                                                                132, 7))
    assert (share, rounds) == gemm_configs.stream_k_launch(36 * 4, 122, 132)[1:]
    g.launch(a, b, c, (), 7, False)
    assert log[-1][3] == (ws, counters, share, rounds) and len(made) == 2
    leftover = streamk_host.StreamKGemm(Gemm(), spread=False)
    leftover.launch(a, b, c, (), 7, False)
    assert log[-1][3][2:] == gemm_configs.stream_k_launch(36 * 4, 122, 132, spread=False)[1:]
    g.launch(a, b, c, (), 9, False)
    assert log[-1][3][0] != ws and len(made) == 4
    with pytest.raises(ValueError, match="takes no epilogue arguments"):
        g.launch(a, b, c, {"alpha": 0.5}, 7, False)
    # a timeline build: its stamp buffer after the four, refused when unset
    timed = Gemm()
    timed.extra_names = ("sk_workspace", "sk_counters", "sk_ctas", "sk_rounds", "sk_timeline")
    t = streamk_host.StreamKGemm(timed)
    with pytest.raises(ValueError, match="set .timeline"):
        t.launch(a, b, c, (), 7, False)
    t.timeline = stamps = object()
    t.launch(a, b, c, (), 7, False)
    assert log[-1][3][:4] == (ws, counters, share, rounds) and log[-1][3][4] is stamps


def test_the_model_takes_the_even_launch_only_after_a_full_wave(monkeypatch):
    """The even kind (gemm_configs.AUTO_EVEN): 1416 x 7160 x 7256 on the
    2-CTA 128x256 tile is 168 pairs on 66 clusters, two rounds and 36
    left over (one whole piece each in the leftover kind): all 66 share
    them, 0.55 of a pair each, at most two contributors a pair (measured
    0.89x the leftover kind's time). 90 tiles of 128x128 on 132 SMs
    (5648 x 216 x 8832, no full wave) stay whole tiles (the even launch
    measured 1.16x); a leftover of at most half the wave keeps its whole
    pieces. Off, the model's launch is the leftover kind's."""
    assert gemm_configs.stream_k_launch(168, 114, 66, "128x256c2") == (66, 66, 2)
    assert gemm_configs.stream_k_plan(168, 114, 66, "128x256c2") == (2, 36, 66)
    _check_cover(168, 114, 66, 66, 2)
    assert gemm_configs.stream_k_launch(90, 138, 132, "128x128") == (90, 90, 0)
    grid, sk_ctas, rounds = gemm_configs.stream_k_launch(132 + 60, 138, 132, "128x256")
    assert rounds == 1 and sk_ctas % 60 == 0 and sk_ctas > 60
    # stream_k_launch reads the switch in ops/gemm_stream_k.py (gemm_configs
    # re-exports a copy of it)
    monkeypatch.setattr(gemm_stream_k, "AUTO_EVEN", False)
    assert gemm_configs.stream_k_launch(168, 114, 66, "128x256c2") == (66, 36, 2)


def test_a_launch_kind_s_grid_is_its_own():
    """A StreamKGemm of a given kind (random_sweep.py's ``@even``) launches
    that kind's grid, not the model's: 45 tiles of 128x256 with 138 K
    blocks (5648 x 216 x 8832) run 90 CTAs of two pieces a tile in the
    model's leftover kind, 132 CTAs of a third of a tile each in the even
    kind; the view keeps its own per-shape plans."""
    import types

    from pipeline_mlir.ops import streamk_host

    class Gemm:
        meta = {"name": "gemm_streamk", "block_m": 128, "block_n": 256, "cluster_m": 1}
        _shapes = {}

        def stream_k_wave(self, sms):
            return sms

        def grid(self, m, n, sms, k=None):
            return (gemm_configs.stream_k_grid(-(-m // 128) * -(-n // 256), -(-k // 64), sms),
                    1, 1)

    base = Gemm()
    base.device = types.SimpleNamespace(ordinal=0, limits=types.SimpleNamespace(
        multiprocessors=132))
    even = streamk_host.StreamKGemm(base, spread="even")
    assert base.grid(5648, 216, 132, 8832) == (90, 1, 1)
    assert gemm_configs.stream_k_launch(45, 138, 132) == (90, 90, 0)
    assert even.gemm.grid(5648, 216, 132, 8832) == (132, 1, 1)
    assert even.share(5648, 216, 8832) == (132, 0)
    assert even.gemm._shapes is not base._shapes
    # a full wave and more: every kind's grid is the wave
    assert even.gemm.grid(1048, 6504, 132, 11408) == (132, 1, 1)
    assert even.share(1048, 6504, 11408) == (132, 1)


def test_stream_k_grid_of_the_launcher():
    """HopperGemm.grid of a stream-K meta: gemm_configs.stream_k_launch's
    over its tiles and K blocks; a plain meta as before."""
    import types

    from pipeline_mlir.layout import OperandLayout
    from pipeline_mlir.ops.hopper_gemm_host import HopperGemm

    fake = types.SimpleNamespace(
        meta={"block_m": 128, "block_n": 256, "cluster_m": 1, "stream_k": True},
        persistent=True, _resident=None,
        layouts={"a": OperandLayout.one_box("bf16", "K", 128, 128)})
    fake.stream_k_wave = types.MethodType(HopperGemm.stream_k_wave, fake)
    assert HopperGemm.grid(fake, 4544, 1008, 132, 7784) == (132, 1, 1)
    assert HopperGemm.grid(fake, 256, 256, 132, 640) == (
        gemm_configs.stream_k_launch(2, 10, 132)[0], 1, 1)
    del fake.meta["stream_k"]
    assert HopperGemm.grid(fake, 256, 256, 132, 640) == (2, 1, 1)
    assert HopperGemm.grid(fake, 4544, 1008, 132, 7784) == (132, 1, 1)
    # a 2-CTA cluster: units are tile pairs, a wave the resident clusters
    # (here 60 of the 66 pairs of SMs), the grid in CTAs
    fake.meta.update(stream_k=True, cluster_m=2)
    fake._resident = 60
    grid, _, _ = gemm_configs.stream_k_launch(18 * 4, 122, 60, "128x256c2")
    assert grid == 60 and HopperGemm.grid(fake, 4544, 1008, 132, 7784) == (120, 1, 1)


def test_arrival_counter_orders_release_atomic_acquire():
    """kernel/arrival_counter.py in PTX: the warp's barrier, a gpu-scope
    fence, the atomic add by lane 0, the broadcast of the old count, a
    gpu-scope fence again (so the last warp's loads come after every
    earlier arrival's stores), and the reset a plain store of 0."""
    from pipeline_mlir.kernel import arrival_counter

    k = Kernel("arrive", block_dim=32, params={"counters": GlobalPtr(align=4),
                                               "out": GlobalPtr()})
    with k:
        counters, out = k.args
        lane = k.lane_idx()
        before = arrival_counter.warp_arrive(counters, 5, lane)
        store(before, out, lane)
        arrival_counter.reset(counters, 5, lane)
    ptx = k.to_ptx()
    body = ptx[ptx.index("bar.warp.sync"):]
    order = [body.index(x) for x in ("bar.warp.sync", "membar.gl", "atom.global.add.u32",
                                     "shfl.sync.idx.b32")]
    assert order == sorted(order)
    assert "membar.gl" in body[order[3]:]
    assert re.search(r"st\.global\.b32\s+\[%rd\d+\+20\], 0;", ptx)   # counters[5] = 0
    assert re.search(r"atom\.global\.add\.u32\s+%r\d+, \[%rd\d+\+20\], 1;", ptx)
