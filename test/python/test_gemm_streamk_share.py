"""Stream-K's shared fix-up, deviceless (GemmConfig.sk_share,
``<tile>_streamk_share``; kernels/streamk_fixup.py): on launches whose runs
are one segment each, every contributor of a partial tile sums its share of
the tile's partials. The schedules are one segment and deadlock-free, the
shares cover a warp's slot region once, the variants build, pass the
protocol checker and the simulator and assemble without spills, a planted
early read is rejected, and the pick and host take the launch. The rest of
stream-K is test_gemm_streamk.py (its schedule cases and checks are shared
from there); the GPU checks are test/gpu/test_gpu_launch.py."""

import random
from dataclasses import replace

import pytest

from _ptxas import spill_bytes

from pipeline_mlir.kernel.tile_scheduler import StreamKSchedule
from pipeline_mlir.kernels import hopper_gemm as hg
from pipeline_mlir.kernels import streamk_fixup as skf
from pipeline_mlir.ops import gemm_configs
from test_gemm_streamk import (CASES, _check_cover, _poll_is_warp_uniform,
                               _wait_then_fence_then_loads)


def _one_segment_cases():
    """The schedule cases whose runs are one segment each (sk_ctas a
    multiple of the stream-K tiles), and the host's share launches of
    random shapes."""
    out = []
    for tiles, kb, grid, sk_ctas, rounds in CASES:
        s = StreamKSchedule(tiles, kb, grid, 0, sk_ctas, rounds)
        if s.sk_tiles and sk_ctas % s.sk_tiles == 0:
            out.append((tiles, kb, grid, sk_ctas, rounds))
    rng = random.Random(11)
    for _ in range(200):
        sms = rng.choice([132, 114, 66, 16, 7])
        tiles, kb = rng.randint(1, 3 * sms), rng.randint(1, 300)
        variant = rng.choice(gemm_configs.STREAM_K_TILES)
        grid, sk_ctas, rounds = gemm_configs.stream_k_launch(tiles, kb, sms, variant,
                                                             share=True)
        out.append((tiles, kb, grid, sk_ctas, rounds))
    return out


def _shared_fixup_runs(tiles, k_blocks, grid, sk_ctas, rounds, rng):
    """The shared fix-up's protocol on every stream-K tile, the CTAs'
    steps interleaved at random (the kernel's order per warp: store,
    arrive, wait for at least P arrivals, read the P slots, arrive again,
    reset if 2P - 1 came before): every contributor passes its wait (no
    deadlock: each arrives before it waits, and waits in its run's last
    unit), reads only after all P stores, and exactly one resets the
    counter, after every wait has passed. Returns the tiles checked."""
    per_tile = {}
    for c in range(grid):
        s = StreamKSchedule(tiles, k_blocks, grid, c, sk_ctas, rounds)
        partial = [i for i in range(s.units) if s.unit(i)[3]]
        # one segment: at most one partial unit, the CTA's last
        assert len(partial) <= 1 and all(i == s.units - 1 for i in partial)
        for i in partial:
            _, _, _, _, slot, sk_tile = s.unit(i)
            first, last = s.contributors(sk_tile)
            assert first <= c <= last and slot == 2 * c == s.slot_of(c, sk_tile)
            per_tile.setdefault(sk_tile, []).append(c)
    for sk_tile, ctas in per_tile.items():
        p = len(ctas)
        assert p == sk_ctas // (tiles - StreamKSchedule(tiles, k_blocks, grid, 0, sk_ctas,
                                                        rounds).dp_tiles)
        counter, stored, resets = 0, set(), 0
        step = {c: 0 for c in ctas}
        waiting = set(ctas)
        while any(v < 4 for v in step.values()):
            ready = [c for c in ctas if step[c] < 4 and not (step[c] == 2 and counter < p)]
            assert ready, "deadlock"
            c = rng.choice(ready)
            if step[c] == 0:
                stored.add(c)
            elif step[c] == 1:
                counter += 1
            elif step[c] == 2:
                assert stored == set(ctas)    # every partial is in before a read
                waiting.discard(c)
            else:
                before, counter = counter, counter + 1
                if before == 2 * p - 1:
                    assert not waiting        # nobody polls a counter reset
                    counter, resets = 0, resets + 1
            step[c] += 1
        assert counter == 0 and resets == 1
    return len(per_tile)


def test_shared_fixup_schedules_are_one_segment_and_deadlock_free():
    rng = random.Random(3)
    checked = 0
    for case in _one_segment_cases():
        _check_cover(*case)
        checked += _shared_fixup_runs(*case, rng)
    assert checked > 500


@pytest.mark.parametrize("contributors", [1, 2, 5, 13, 30, 33, 64, 200])
def test_share_ranges_cover_a_warps_slot_region_once(contributors):
    """Each contributor's share of a warp's 16-byte vectors (block_n / 8
    groups of 32): contiguous, in K order, all of them once; none empty
    while there are at least as many vectors as contributors."""
    for block_n in (128, 192, 256):
        vectors = block_n // 8 * 32
        ranges = [skf.share_range(j, contributors, vectors) for j in range(contributors)]
        assert ranges[0][0] == 0 and ranges[-1][1] == vectors
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        assert all(hi - lo >= (1 if vectors >= contributors else 0) for lo, hi in ranges)


def _share_ptx(variant="128x128_streamk_share", dtype="bf16"):
    cfg = replace(hg.GemmConfig(dtype=dtype), **gemm_configs.overrides(variant))
    k = hg.build(cfg)
    k.verify()
    return cfg, k, k.to_ptx()


@pytest.mark.parametrize("variant", sorted(gemm_configs.STREAM_K_SHARE_VARIANTS))
def test_shared_fixup_variant_builds_checks_and_assembles_without_spills(variant):
    """Checked (to_ptx runs the protocol checker), through ptxas -v with no
    spill; the stream-K parameters; two arrivals (each bar.warp.sync,
    membar.gl, atomic add, membar.gl), one wait (a relaxed poll, then
    membar.gl), the partial's 16-byte stores, SHARE_BATCH 16-byte loads in
    flight, the reads after the wait, C's column pairs stored from
    registers beside the reset."""
    cfg, k, ptx = _share_ptx(variant, "f16")
    assert cfg.name.endswith("_streamk_share") and cfg.sk_share
    assert [n for n, _ in k.params][-4:] == ["sk_workspace", "sk_counters", "sk_ctas",
                                             "sk_rounds"]
    assert ptx.count("atom.global.add.u32") == 2 and ptx.count("membar.gl") == 5
    assert ptx.count("ld.relaxed.gpu.global.b32") == 1
    assert ptx.count("st.global.v4.b32") == cfg.block_n // 8
    assert ptx.count("ld.global.v4.b32") == skf.SHARE_BATCH
    assert ptx.count("st.global.b32") == 3          # two column pairs, the reset
    assert _wait_then_fence_then_loads(ptx) and _poll_is_warp_uniform(ptx)
    assert spill_bytes(ptx) in (None, 0)            # None: no ptxas here


def test_shared_fixup_misuse_is_refused():
    with pytest.raises(ValueError, match="sk_share is a stream-K fix-up"):
        hg.build(hg.GemmConfig(sk_share=True))
    with pytest.raises(ValueError, match="sk_share is a stream-K fix-up"):
        hg.build(replace(hg.GemmConfig(), **gemm_configs.overrides("128x128_streamk_pf"),
                         sk_share=True))


@pytest.mark.parametrize("plant", ["no fence after the poll", "loads before the wait"])
def test_planted_early_share_read_is_rejected(plant, monkeypatch):
    """The shared fix-up's planted mistakes: the acquire fence after the
    poll dropped (the arrivals keep theirs), or the partial loads issued
    before the wait; the PTX-order check refuses both, the production
    kernel passes it (above)."""
    from mlir.dialects import nvvm

    from pipeline_mlir.kernel import arrival_counter

    if plant == "no fence after the poll":
        real_poll = arrival_counter._poll

        def poll(*a):
            monkeypatch.setattr(arrival_counter, "_fence_gpu", lambda: None)
            try:
                return real_poll(*a)
            finally:
                monkeypatch.setattr(arrival_counter, "_fence_gpu",
                                    lambda: nvvm.MembarOp(nvvm.MemScopeKind.GPU))
        monkeypatch.setattr(arrival_counter, "_poll", poll)
    else:
        real_wait, real_load = arrival_counter.wait_at_least, skf._load_vector
        pending = []
        monkeypatch.setattr(arrival_counter, "wait_at_least", lambda *a: pending.append(a))

        def load_then_wait(*a):
            frag = real_load(*a)
            while pending:
                real_wait(*pending.pop())
            return frag
        monkeypatch.setattr(skf, "_load_vector", load_then_wait)
    _, _, ptx = _share_ptx()
    assert "ld.global.v4.b32" in ptx and "ld.relaxed.gpu.global.b32" in ptx
    assert not _wait_then_fence_then_loads(ptx)


def test_simulator_runs_the_shared_fixup_variant():
    """pipeline-sim on the shared fix-up's kernel, one CTA of whole tiles
    (the partial path reads global counters, which it does not model)."""
    import os
    import tempfile

    from pipeline_mlir.sim.cli import main as sim_main

    _, k, _ = _share_ptx()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "share.mlir")
        with open(path, "w") as f:
            f.write(str(k))
        assert sim_main([path, "--arg", "4=384", "--arg", "5=256", "--arg", "6=640",
                         "--arg", "9=1", "--arg", "10=6", "--schedules", "2"]) == 0


def test_shared_fixup_launch_and_the_pick_rule():
    """The share launch is the leftover kind (every run one segment), its
    pieces by the share model (more than the last-contributor launch's on
    a long K: the reads per SM no longer grow with them); the pick takes
    the shared fix-up exactly where share_fixup holds over (tiles, SMs, K
    blocks): fewer tiles than the wave and at least SHARE_MIN_PIECES
    contributors a tile."""
    assert gemm_configs.stream_k_launch(4, 233, 132, "128x128", share=True) == (120, 120, 0)
    assert gemm_configs.stream_k_launch(4, 233, 132, "128x128")[1] < 120
    # a full wave: the leftover of 12 in pieces, never the spread kind
    assert gemm_configs.stream_k_launch(144, 122, 132, "128x256", spread=True,
                                        share=True) == (132, 132, 1)
    assert gemm_configs.stream_k_launch(144, 122, 132, "128x256", share=True)[2] == 1
    sf = gemm_configs.share_fixup
    assert sf(4, 233, 132) and sf(16, 233, 132) and not sf(17, 233, 132)
    assert not sf(12, 141, 66) and not sf(4, 7, 132) and not sf(132, 100, 132)
    seen = 0
    for m in (128, 224, 512, 1000, 2048):
        for n in (128, 168, 360, 1000, 4096):
            for k in (520, 4096, 14872):
                v = gemm_configs.choose(m, n, k, "bf16")
                if not gemm_configs.is_stream_k(v):
                    continue
                units, wave = gemm_configs.stream_k_units(gemm_configs.tile_variant(v), m, n,
                                                          132)
                # (with one arrival a warp: choose_share1)
                shared = v.endswith(("_share", "_share1"))
                assert shared == sf(units, -(-k // 64), wave), (m, n, k, v)
                seen += shared
    assert seen >= 3


def test_shared_fixup_host_launch(monkeypatch):
    """StreamKGemm of a share build (meta ``sk_share``) passes the share
    launch's (sk_ctas, rounds), and HopperGemm.grid launches its CTAs."""
    import types

    from pipeline_mlir.layout import OperandLayout
    from pipeline_mlir.ops import streamk_host
    from pipeline_mlir.ops.hopper_gemm_host import HopperGemm, meta_of

    cfg, k, _ = _share_ptx()
    meta = meta_of(cfg, k)
    assert meta["sk_share"] is True and meta["stream_k"] is True

    class Gemm:
        device = types.SimpleNamespace(ordinal=0, limits=types.SimpleNamespace(
            multiprocessors=132))

        def __init__(self, meta):
            self.meta = meta

        def stream_k_wave(self, sms):
            return sms

    g = streamk_host.StreamKGemm(Gemm(dict(meta)))
    assert g.share(224, 168, 14872) == gemm_configs.stream_k_launch(4, 233, 132, "128x128",
                                                                    share=True)[1:]
    plain = streamk_host.StreamKGemm(Gemm(dict(meta, sk_share=False)))
    assert plain.share(224, 168, 14872) == gemm_configs.stream_k_launch(4, 233, 132,
                                                                        "128x128")[1:]
    fake = types.SimpleNamespace(meta=dict(meta), persistent=True, _resident=None,
                                 layouts={"a": OperandLayout.one_box("bf16", "K", 128, 128)})
    fake.stream_k_wave = types.MethodType(HopperGemm.stream_k_wave, fake)
    assert HopperGemm.grid(fake, 224, 168, 132, 14872) == (120, 1, 1)
    del fake.meta["sk_share"]
    assert HopperGemm.grid(fake, 224, 168, 132, 14872)[0] < 120
