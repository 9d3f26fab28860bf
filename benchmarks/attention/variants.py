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
