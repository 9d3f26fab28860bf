"""The attention variants a bundle carries: the fastest configuration of each
head dim, causal and not, and the steps of the ladder (docs/attention.md)."""

from dataclasses import replace

# (step name, overrides): each step adds one ingredient to the one before.
LADDER = [
    ("1 consumer warpgroup", dict(consumer_warpgroups=1, pingpong=False)),
    ("2 consumer warpgroups", dict(pingpong=False)),
    ("+ ping-pong", dict()),
]


def variants(quick=False):
    """[(tag, AttentionConfig)]; needs MLIR (imports the kernel)."""
    from attention_fwd import AttentionConfig

    out = []
    for d in (64, 128, 256):
        for causal in (False, True):
            out.append((f"best d{d}{' causal' if causal else ''}",
                        AttentionConfig(head_dim=d, causal=causal)))
    if not quick:
        for step, overrides in LADDER[:-1]:
            out.append((f"ladder {step}", replace(AttentionConfig(), **overrides)))
    return out
