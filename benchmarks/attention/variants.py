"""The attention variants a bundle carries: the chosen configuration of each
head dim, causal and not ("best"), the steps of the ladder
(docs/attention.md), and the candidates the choice was made from ("sweep")."""

from dataclasses import replace

# (step name, overrides): each step adds one ingredient to the one before.
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
    64: [dict(stages=3), dict(intra_overlap=False), dict(pingpong=False, stages=3)],
    128: [dict(intra_overlap=False), dict(pingpong=False), dict(pingpong=False,
                                                                 intra_overlap=False)],
    256: [dict(block_n=64), dict(pingpong=False), dict(intra_overlap=False)],
}
BEST = {64: dict(), 128: dict(), 256: dict()}


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
