"""The attention variants a bundle carries: the chosen configuration of each
head dim, causal and not ("best"), the steps of the ladder
(docs/attention.md), and the candidates the choice was made from ("sweep")."""

from dataclasses import replace

from pipeline_mlir.ops.attention_configs import BEST

# (step name, overrides, persistent): each step adds one ingredient.
LADDER = [
    ("1 consumer warpgroup", dict(consumer_warpgroups=1, pingpong=False,
                                  intra_overlap=False), False),
    ("2 consumer warpgroups", dict(pingpong=False, intra_overlap=False), False),
    ("+ ping-pong", dict(intra_overlap=False), False),
    ("+ intra-warpgroup overlap", dict(), False),
    ("+ persistent", dict(), True),
]

# Candidate overrides per head dim (the "best" rows use BEST).
SWEEP = {
    64: [dict(consumer_warpgroups=3, consumer_registers=160), dict()],
    128: [dict(l2_sections=True), dict(q_stages=1), dict(tma_store=True)],
    256: [dict(l2_sections=True)],
}
# The "best" rows: the chosen configuration of each head dim, the library
# op's table (pipeline_mlir/ops/attention_configs.py says why each).


def variants(quick=False, sweep=False):
    """[(tag, AttentionConfig, persistent)]; needs MLIR (imports the kernel)."""
    from attention_fwd import AttentionConfig

    out = []
    for d in (64, 128, 256):
        for causal in (False, True):
            base = AttentionConfig(head_dim=d, causal=causal)
            out.append((f"best d{d}{' causal' if causal else ''}",
                        replace(base, **BEST[d])))
            if sweep:
                for i, o in enumerate(SWEEP[d]):
                    out.append((f"sweep{i} d{d}{' causal' if causal else ''}",
                                replace(base, **o)))
    if not quick:
        for step, overrides, persistent in LADDER[:-1]:
            out.append((f"ladder {step}", replace(AttentionConfig(), **overrides),
                        persistent))
    return [o if len(o) == 3 else (*o, True) for o in out]


# Beside the pick's configurations (``VARIANTS``), candidates the grid also
# times on its rows: two CTAs per SM of one consumer warpgroup and 64-row
# tiles ("short", d 64 and 128, packed or not; 64-key blocks at d 128 for
# the shared memory of half an SM), 128-row tiles at d 64 and 64-key blocks
# at d 128 for full attention too (the pick takes them for causal rows), and
# those causal ones GQA-packed.
SHORT = {64: dict(consumer_warpgroups=1, pingpong=False, consumer_registers=232,
                  ctas_per_sm=2),
         128: dict(consumer_warpgroups=1, pingpong=False, consumer_registers=232,
                   ctas_per_sm=2, block_n=64)}


def grid_extra():
    """{name: AttentionConfig overrides} of the extra candidates."""
    from pipeline_mlir.ops.attention_configs import GROUPS

    out = {}
    for d, over in SHORT.items():
        for causal in (False, True):
            for g in (0,) + GROUPS:
                name = f"d{d}{'c' if causal else ''}{f'_gqa{g}' if g else ''}_short"
                out[name] = dict(over, head_dim=d, causal=causal,
                                 **({"pack_gqa": g} if g else {}))
    out["d64_m128"] = dict(head_dim=64, consumer_warpgroups=2)
    out["d128_bn64"] = dict(head_dim=128, block_n=64)
    # The shape rules' tiles packed too (not measured yet: the pick packs
    # with the head dim's own tiles).
    for g in GROUPS:
        out[f"d64c_m128_gqa{g}"] = dict(head_dim=64, causal=True, consumer_warpgroups=2,
                                        pack_gqa=g)
        out[f"d128c_bn64_gqa{g}"] = dict(head_dim=128, causal=True, block_n=64, pack_gqa=g)
    return out


def grid_variants():
    """[(tag, AttentionConfig, persistent)]: every configuration
    ``attention_configs.pick`` can return (``VARIANTS``), tagged ``cfg
    <name>``, and the extra candidates (``grid_extra``), tagged ``cand
    <name>``: what run_attention_grid.py checks and times."""
    from attention_fwd import AttentionConfig

    from pipeline_mlir.ops.attention_configs import VARIANTS

    out = [(f"cfg {name}", AttentionConfig(**over), True) for name, over in VARIANTS.items()]
    out += [(f"cand {name}", AttentionConfig(**over), True)
            for name, over in grid_extra().items()]
    return out


# FP8 candidates beside the op's configurations (attention_fp8_configs),
# per head dim, timed on run_attention_fp8.py's rows (a candidate equal to
# the op's configuration is left out): P V's retirement held after the
# softmax or not (``hold_pv_wait``), P converted before that wait into
# other registers (``double_p``, with the hold), and part of the softmax's
# exponentials on the FMA pipe (``exp2_poly``: of every 16 values, this many
# by the polynomial), alone and with the others (the ``double_p`` ones were
# timed in run 7 of docs/attention.md's "FP8 forward": none faster on every
# row of a head dim and mode). The tile and stage candidates the
# op's were chosen over (d 128: 128-key blocks with two and three stages,
# 192-key blocks with two; d 256: two stages with two Q buffers) were timed
# in run 2 of docs/attention.md's "FP8 forward"; 256-key blocks and three
# consumer warpgroups at d 128 spill registers.
# (The candidates before run 8 spell out no rescale threshold, NO_RS, so that
# they stay what they were where the op's configuration takes one.)
NO_RS = dict(rescale_threshold=0.0)
# (Likewise the d 128 candidates before run 9 spell out the FMA pipe's row
# sum, the degree-3 polynomial and the PRMT packing, NO_RSM: the op's d 128
# full configuration takes degree 2 and the packing as halves since, so
# ``px5rs8`` is that configuration before run 9.)
NO_RSM = dict(row_sum_mma=False, exp2_poly_degree=3, p_pack_merge=False)
# (And every candidate of FP8_CANDIDATES that does not name it is built
# without the polynomial on f16 pairs, NO_PH: the d 128 LSE configurations
# take it since run 15, and those candidates were measured without it.)
NO_PH = dict(exp2_poly_half=False)
FP8_CANDIDATES = {128: {"plain": dict(hold_pv_wait=False, exp2_poly=0, **NO_RS, **NO_RSM),
                        "px3": dict(hold_pv_wait=False, exp2_poly=3, **NO_RS, **NO_RSM),
                        "hw": dict(hold_pv_wait=True, exp2_poly=0, **NO_RS, **NO_RSM),
                        "px4hw": dict(hold_pv_wait=True, exp2_poly=4, **NO_RS, **NO_RSM),
                        "hwdb": dict(hold_pv_wait=True, double_p=True, exp2_poly=0, **NO_RS,
                                     **NO_RSM),
                        "px3hwdb": dict(hold_pv_wait=True, double_p=True, exp2_poly=3, **NO_RS,
                                        **NO_RSM),
                        "px4hwdb": dict(hold_pv_wait=True, double_p=True, exp2_poly=4, **NO_RS,
                                        **NO_RSM),
                        # O rescaled only where a row max grows past 2^8
                        # (rescale_threshold), on the mode's share of the
                        # polynomial, with 5 of 16, and with px4hwdb.
                        "rs8": dict(rescale_threshold=8.0, **NO_RSM),
                        "px4rs8": dict(exp2_poly=4, rescale_threshold=8.0, **NO_RSM),
                        "px4": dict(exp2_poly=4, **NO_RS, **NO_RSM),
                        "px5": dict(exp2_poly=5, **NO_RS, **NO_RSM),
                        "px5rs8": dict(exp2_poly=5, rescale_threshold=8.0, **NO_RSM),
                        "px6rs8": dict(exp2_poly=6, rescale_threshold=8.0, **NO_RSM),
                        "px4hwdbrs8": dict(hold_pv_wait=True, double_p=True, exp2_poly=4,
                                           rescale_threshold=8.0, **NO_RSM),
                        "px5hwdbrs8": dict(hold_pv_wait=True, double_p=True, exp2_poly=5,
                                           rescale_threshold=8.0, **NO_RSM),
                        # Fewer instructions per value of S (run 9): the row
                        # sum on the tensor pipe (row_sum_mma), the degree-2
                        # polynomial (exp2_poly_degree=2), P's e4m3 packing
                        # without the PRMT (p_pack_merge): alone, and
                        # together on 4, 5 and 6 of 16 (the op's share: 5
                        # full, 3 causal).
                        "rsm": dict(row_sum_mma=True),
                        "pd2": dict(exp2_poly_degree=2),
                        "pm": dict(p_pack_merge=True),
                        "pd2pm": dict(exp2_poly_degree=2, p_pack_merge=True),
                        "rsmpd2": dict(row_sum_mma=True, exp2_poly_degree=2),
                        "px4rsmpd2": dict(exp2_poly=4, row_sum_mma=True, exp2_poly_degree=2),
                        "px6rsmpd2": dict(exp2_poly=6, row_sum_mma=True, exp2_poly_degree=2),
                        "px4rsmpd2pm": dict(exp2_poly=4, row_sum_mma=True, exp2_poly_degree=2,
                                            p_pack_merge=True),
                        "px5rsmpd2pm": dict(exp2_poly=5, row_sum_mma=True, exp2_poly_degree=2,
                                            p_pack_merge=True),
                        "px6rsmpd2pm": dict(exp2_poly=6, row_sum_mma=True, exp2_poly_degree=2,
                                            p_pack_merge=True),
                        # Where the caller takes no LSE (run 10; the op's
                        # ``fp8nolse`` configurations): the row sum on the
                        # tensor pipe with the degree-2 polynomial, 3, 4 or
                        # 5 of 16 by it, with and without the packing as
                        # halves (on the mode's rescale threshold).
                        **{f"rsmpx{n}{'pm' if pm else ''}": dict(
                            exp2_poly=n, row_sum_mma=True, exp2_poly_degree=2, p_pack_merge=pm)
                           for n in (2, 3, 4, 5, 6) for pm in (False, True)},
                        # Run 11, on the no-LSE configurations (full: 5 of
                        # 16 with the threshold; causal: 3 of 16 with the
                        # packing as halves): four stages with one Q buffer
                        # (st4), the threshold off (nors) or on causally
                        # (rs8), P converted before P V's wait (db; the wait held
                        # after it too, on an OR of P's e4m3 registers, made
                        # ptxas serialize the wgmmas, C7513: not built).
                        **{f"rsmpx{n}{'pm' if pm else ''}{sfx}": dict(
                            exp2_poly=n, row_sum_mma=True, exp2_poly_degree=2, p_pack_merge=pm,
                            **over)
                           for n, pm in ((5, False), (3, True))
                           for sfx, over in (("st4", dict(stages=4, q_stages=1)),
                                             ("nors", NO_RS),
                                             ("rs8", dict(rescale_threshold=8.0)),
                                             ("db", dict(double_p=True)))},
                        # Then P converted before P V's wait (db) with 2-5
                        # of 16, the packing as halves or not, and with the
                        # threshold (rs8db; in full attention the same
                        # kernel as db).
                        **{f"rsmpx{n}{'pm' if pm else ''}{sfx}": dict(
                            exp2_poly=n, row_sum_mma=True, exp2_poly_degree=2, p_pack_merge=pm,
                            double_p=True, **over)
                           for n in (2, 3, 4, 5) for pm in (False, True)
                           for sfx, over in (("db", {}),
                                             ("rs8db", dict(rescale_threshold=8.0)))},
                        # Run 12, on the no-LSE configurations (full: 5 of
                        # 16, causal: 3 of 16 with the packing as halves;
                        # both with the threshold): the row sum folded into
                        # P V (``rsf``: the ones as 8 more rows of V^T's
                        # stages, P V m64n136k32), alone, on 4 or 6 of 16,
                        # with the first 3 of P's 6 k-slices converted
                        # before P V's wait (pe3) or all of them (db); and
                        # causal's heads in L2-sized sections (l2: the no-LSE
                        # configuration with ``l2_sections``).
                        **{f"rsfpx{n}{'pm' if pm else ''}{sfx}": dict(
                            exp2_poly=n, row_sum_mma=True, row_sum_fold=True,
                            exp2_poly_degree=2, p_pack_merge=pm, rescale_threshold=8.0,
                            **over)
                           for n, pm in ((4, False), (5, False), (6, False), (3, True),
                                         (4, True))
                           for sfx, over in (("", {}), ("pe3", dict(p_early=3)),
                                             ("db", dict(double_p=True)))},
                        "nolsel2": dict(exp2_poly=3, row_sum_mma=True, exp2_poly_degree=2,
                                        p_pack_merge=True, rescale_threshold=8.0,
                                        l2_sections=True),
                        # Run 15, on the LSE configurations: 4, 6 or 8 of
                        # 16 by the polynomial on f16 pairs (exp2_poly_half,
                        # with the packing as halves it converts from), the
                        # FMA pipe's row sum adding the pairs on f16x2
                        # (exponentials.half_row_sums): the LSE checked
                        # within its 0.01.
                        **{f"lph{n}": dict(exp2_poly=n, p_pack_merge=True, exp2_poly_half=True)
                           for n in (4, 6, 8)},
                        # Full attention took lph8, causal lph4: their
                        # configurations before run 15 are lpx5 (full: 5 of
                        # 16 in f32) and px3 (causal) above.
                        "lpx5": dict(exp2_poly=5),
                        # Run 16: P V's retirement held after the softmax
                        # (hold_pv_wait, on the FMA pipe's row sum) on the
                        # LSE configurations of today (each mode's share on
                        # f16 pairs): ptxas otherwise waits for P V before
                        # the row max.
                        "lhw": dict(hold_pv_wait=True, exp2_poly_half=True),
                        # Run 17: the wait held on P's e4m3 registers,
                        # converted before it (hold_pv_on_e4m3, double_p).
                        "lhp8": dict(hold_pv_on_e4m3=True, double_p=True,
                                     exp2_poly_half=True),
                        # Run 20: the no-LSE kernels' hold (P's first 3
                        # k-slices converted before P V's wait, the wait
                        # held on their e4m3 registers) on the LSE
                        # configurations, with 4 or 6 of 16 on f16 pairs
                        # (the LSE's row sum stays on the FMA pipe).
                        **{f"lhp8e3p{n}": dict(hold_pv_on_e4m3=True, p_early=3, exp2_poly=n,
                                               p_pack_merge=True, exp2_poly_half=True)
                           for n in (4, 6)}},
                  256: {"plain": dict(hold_pv_wait=False, exp2_poly=0, **NO_RS),
                        "hw": dict(hold_pv_wait=True, exp2_poly=0, **NO_RS),
                        "hwdb": dict(hold_pv_wait=True, double_p=True, exp2_poly=0, **NO_RS),
                        "px2hwdb": dict(hold_pv_wait=True, double_p=True, exp2_poly=2, **NO_RS),
                        "rs8": dict(rescale_threshold=8.0),
                        # the op's d 256 configurations without it
                        "nors": NO_RS,
                        # Run 12, causal: heads in L2-sized sections (the K
                        # and V of a section's heads, 4 MiB a head at 8192
                        # keys in e4m3, held in 24 MiB of L2), alone and
                        # with 2 of 16 exponentials by the polynomial.
                        "l2": dict(l2_sections=True),
                        "px2l2": dict(l2_sections=True, exp2_poly=2),
                        # two Q buffers with two K/V stages (run 2's q2 s2,
                        # on today's configurations; causal's since run
                        # 12): the next tile's Q loaded under this one's
                        # last blocks.
                        "q2s2": dict(q_stages=2, stages=2),
                        # and causal's configuration before it (full's now)
                        "q1s3": dict(q_stages=1, stages=3),
                        # Run 16: 2, 4 or 6 of 16 by the polynomial on f16
                        # pairs (exp2_poly_half, with the packing as halves
                        # it converts from; the FMA pipe's row sum adds the
                        # pairs on f16x2), on each mode's configuration.
                        **{f"ph{n}": dict(exp2_poly=n, p_pack_merge=True, exp2_poly_half=True)
                           for n in (2, 4, 6)},
                        # and causal's configuration with P V's retirement
                        # held after the softmax (full holds it already:
                        # equal to its configuration, so not built there).
                        # Full took ph2 and causal ph4 (so not built in
                        # those modes); their configurations before:
                        # r15 (full: 2 of 16 in f32), r15c (causal: none).
                        "chw": dict(hold_pv_wait=True),
                        "r15": dict(exp2_poly=2, p_pack_merge=False),
                        "r15c": dict(exp2_poly=0, p_pack_merge=False)}}
# FP8 candidates on top of the op's no-LSE configurations (``fp8nolse``,
# tagged ``fp8cand d<d>[ causal] <name>`` like the others; each mode on its
# own configuration, so one name serves both), timed in run 13 of
# docs/attention.md's "FP8 forward" (none faster on every row): four K/V
# stages with one Q buffer (nst4), two stages (ns2), the warpgroups' GEMMs
# not taking turns (nnopp), 128-key blocks with four stages (nbn128s4); and
# three consumer warpgroups (192-query tiles, 160 registers each) with
# 64-key blocks, with and without the turns (w3n64, w3n64np). With 128 or 192
# keys three warpgroups spill (S, O and P_{j-1} live at once). Then the
# polynomial on f16 pairs (nph4, nph6, nph8), built after run 13, timed in run 14;
# nph5 and nph7 (odd counts) timed in run 15; the wait held after the
# exponentials (nhp) in run 16; in run 17 that hold on the first 2, 3 or 4
# k-slices' exponentials of 6 (nhpp2..4), and on P's e4m3 registers
# converted before the wait, all of them (nhp8, with double_p) or the first
# 3 k-slices' (nhp8e3, p_early); in run 18 those held on one register
# (nhp8l1, and nhp8e2l1..nhp8e4l1 on the first 2-4 k-slices); in run 19
# on the last 4 registers, on 4 k-slices, and on 4 or 5 of 16 on pairs;
# in run 20 on 2 or 3 of 16, and on 4 k-slices with 3 of 16.
W3 = dict(consumer_warpgroups=3, consumer_registers=160)
# Where P V's wait and P's conversions sit: a no-LSE candidate that sets
# any of these replaces the mode's own (d 128 causal's since run 18, full's
# since run 19), so
# each hold is timed instead of it, not beside it (refused); so does one
# the mode's own does not fit (w3n64's 64-key blocks, p_early's 3 slices).
HOLDS = dict(hold_pv_on_p=False, hold_pv_part=0, hold_pv_on_e4m3=False, hold_pv_last=0,
             double_p=False, p_early=0)


def on_nolse(nolse, over):
    """The no-LSE candidate ``over`` on the mode's configuration
    ``nolse``: with ``HOLDS`` first where it sets one of them or where
    ``AttentionConfig`` refuses it on the mode's own."""
    from dataclasses import replace

    if not HOLDS.keys() & over.keys():
        try:
            return replace(nolse, **over)
        except ValueError:
            pass
    return replace(nolse, **{**HOLDS, **over})


FP8_NOLSE_CANDIDATES = {128: {"nst4": dict(stages=4, q_stages=1),
                              "ns2": dict(stages=2),
                              "nnopp": dict(pingpong=False),
                              "nbn128s4": dict(block_n=128, stages=4),
                              "w3n64": dict(W3, block_n=64, stages=6),
                              "w3n64np": dict(W3, block_n=64, stages=6, pingpong=False),
                              # 4 to 8 of 16 by the polynomial on f16
                              # pairs (exp2_poly_half, with the packing as
                              # halves it converts from; the odd counts,
                              # pairs spread over 32 values, since run 15).
                              # Run 14: full attention took 6 of 16 (nph6 is
                              # its configuration now, so not tagged there).
                              **{f"nph{n}": dict(exp2_poly=n, p_pack_merge=True,
                                                 exp2_poly_half=True) for n in range(4, 9)},
                              # Run 16: P V's retirement held after every
                              # exponential (hold_pv_on_p: these kernels have
                              # no FMA-pipe row sum for hold_pv_wait), on the
                              # mode's share and on 7 of 16.
                              "nhp": dict(hold_pv_on_p=True),
                              "nhp7": dict(hold_pv_on_p=True, exp2_poly=7),
                              # Run 17: the hold on part of the exponentials
                              # (hold_pv_part k-slices of 6), and on P's e4m3
                              # registers converted before the wait
                              # (hold_pv_on_e4m3: all of P with double_p,
                              # the first 3 k-slices with p_early).
                              **{f"nhpp{n}": dict(hold_pv_on_p=True, hold_pv_part=n)
                                 for n in (2, 3, 4)},
                              "nhp8": dict(hold_pv_on_e4m3=True, double_p=True),
                              "nhp8e3": dict(hold_pv_on_e4m3=True, p_early=3),
                              # Run 18: those held on the last register
                              # converted before the wait alone (p_early:
                              # the first 2, 3 or 4 k-slices converted so)
                              # (hold_pv_last=1: no OR, the trap's test).
                              "nhp8l1": dict(hold_pv_on_e4m3=True, double_p=True,
                                             hold_pv_last=1),
                              **{f"nhp8e{n}l1": dict(hold_pv_on_e4m3=True, p_early=n,
                                                     hold_pv_last=1) for n in (2, 3, 4)},
                              # Since run 18 causal holds on p_early's 3
                              # k-slices (nhp8e3); its configuration before
                              # (on its 5 of 16: causal's run 17 kernel).
                              "r17c": dict(HOLDS, exp2_poly=5),
                              # Since run 19 both modes hold so on 4 of 16
                              # (nhp8e3p4; full on 2 of 16 since run 20,
                              # nhp8e3p2, so nhp8e3p4 is full's kernel
                              # before); run 19's kernels before: r18 full's
                              # (no hold, 6 of 16), r18c causal's (5 of 16).
                              "r18": dict(HOLDS, exp2_poly=6),
                              "r18c": dict(exp2_poly=5),
                              # Run 19: the hold on the last 4 registers of
                              # the first 3 or 4 k-slices (nhp8e3l4,
                              # nhp8e4l4: the conversions placed about as
                              # nhp8e3's without its copy's moves), on all
                              # 16 of 4 k-slices (nhp8e4), and nhp8e3 on 4
                              # or 5 of 16 on f16 pairs (nhp8e3p4, nhp8e3p5:
                              # the hold moves the MUFU / FMA balance).
                              **{f"nhp8e{n}l4": dict(hold_pv_on_e4m3=True, p_early=n,
                                                     hold_pv_last=4) for n in (3, 4)},
                              "nhp8e4": dict(hold_pv_on_e4m3=True, p_early=4),
                              **{f"nhp8e3p{n}": dict(hold_pv_on_e4m3=True, p_early=3,
                                                     exp2_poly=n) for n in (4, 5)},
                              # Run 20: the op's hold on 3 or 2 of 16
                              # (nhp8e3p3, nhp8e3p2), and the hold on 4
                              # k-slices on 3 of 16 (nhp8e4p3; nhp8e4 is
                              # on the mode's share: timed in run 20 on 4
                              # of 16 in both modes, full's before it took
                              # 2).
                              **{f"nhp8e3p{n}": dict(hold_pv_on_e4m3=True, p_early=3,
                                                     exp2_poly=n) for n in (2, 3)},
                              "nhp8e4p3": dict(hold_pv_on_e4m3=True, p_early=4, exp2_poly=3)}}
# bf16 candidates timed beside the 'best' ones on the same rows (tagged
# ``bf16cand d<d>[ causal] <name>``).
BF16_CANDIDATES = {"hw": dict(hold_pv_wait=True)}


def fp8_variants():
    """[(tag, AttentionConfig, persistent)]: the FP8 forward's
    configurations (``fp8 d<d>[ causal]``; ``fp8nolse d<d>[ causal]`` the
    op's where the caller takes no LSE, for the head dims that have one),
    its candidates (``fp8cand d<d>[ causal] <name>``, on top of the LSE
    configuration, or of the no-LSE one for ``FP8_NOLSE_CANDIDATES``,
    ``on_nolse``; none equal to either), the bf16 'best' ones of head dims
    128 and 256, the peer of run_attention_fp8.py, and their candidates
    (``bf16cand ...``)."""
    from dataclasses import replace

    from attention_fwd import AttentionConfig

    from pipeline_mlir.ops.attention_fp8_configs import HEAD_DIMS, variant

    out = []
    for d in HEAD_DIMS:
        for causal in (False, True):
            c = " causal" if causal else ""
            cfg = AttentionConfig(**variant(d, causal)[1], dtype="e4m3")
            nolse = AttentionConfig(**variant(d, causal, lse=False)[1], dtype="e4m3")
            out.append((f"fp8 d{d}{c}", cfg, True))
            if nolse != cfg:
                out.append((f"fp8nolse d{d}{c}", nolse, True))
            cands = {n: {**NO_PH, **o} for n, o in FP8_CANDIDATES[d].items()}
            out += [(f"fp8cand d{d}{c} {n}", replace(cfg, **o), True)
                    for n, o in cands.items() if replace(cfg, **o) not in (cfg, nolse)]
            if nolse != cfg:
                out += [(f"fp8cand d{d}{c} {n}", on_nolse(nolse, o), True)
                        for n, o in FP8_NOLSE_CANDIDATES.get(d, {}).items()
                        if on_nolse(nolse, o) not in (cfg, nolse)]
    for tag, cfg, p in variants(quick=True):
        if cfg.head_dim in (128, 256):
            out.append((tag, cfg, p))
            c = " causal" if cfg.causal else ""
            out += [(f"bf16cand d{cfg.head_dim}{c} {n}", replace(cfg, **o), p)
                    for n, o in BF16_CANDIDATES.items()]
    return out
