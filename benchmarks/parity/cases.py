"""The parity table's cases, read by both sides (cute_side.py in .bench-venv,
ours_side.py in .venv) and by count.py: which kinds, on which chip, with
which verbs, and which warp runs each verb. Plain Python, no imports, so that
both environments can load it.

Every kernel: 64 threads, warp 0 runs the producer-side verbs, warp 1 the
consumer-side ones, the state built from the kernel parameters (index,
phase) so that nothing folds; "none" is the same kernel with no verb.
"""

S = 4            # stages
TX = 4096        # tx bytes per stage (TMA kinds)
CLC_TX = 16      # clusterlaunchcontrol response size

MBAR_VERBS = ("producer_acquire", "producer_commit", "consumer_wait",
              "consumer_release", "producer_tail")

# kind -> (chip, verbs)
KINDS = {
    "async": ("sm_90a", MBAR_VERBS),
    "cp_async": ("sm_90a", MBAR_VERBS),
    "tma_async": ("sm_90a", MBAR_VERBS),
    "tma_store": ("sm_90a", ("producer_acquire", "producer_commit", "producer_tail")),
    "order": ("sm_90a", ("wait", "arrive")),
    "named_barrier": ("sm_90a", ("arrive", "arrive_and_wait", "arrive_unaligned",
                                 "wait_unaligned")),
    "tma_umma": ("sm_100a", MBAR_VERBS),
    "async_umma": ("sm_100a", MBAR_VERBS),
    "umma_async": ("sm_100a", MBAR_VERBS),
    # consumer_release: the UMMA consumer's (tcgen05.commit);
    # consumer_release_async: the AsyncThread consumers' (mbarrier.arrive).
    "tma_multi_consumers_async": ("sm_100a", MBAR_VERBS + ("consumer_release_async",)),
    "clc_fetch_async": ("sm_100a", MBAR_VERBS),
}

# kind -> (producer threads, consumer threads); Agent.Thread groups. For
# tma_multi_consumers_async the consumer pair is (UMMA, AsyncThread); order's
# producer group is the one taking turns; named_barrier: (id, threads).
GROUPS = {
    "async": (32, 32), "cp_async": (32, 32), "tma_async": (1, 4),
    "tma_store": (32, None), "order": (32, None), "named_barrier": (1, 64),
    "tma_umma": (1, 1), "async_umma": (32, 1), "umma_async": (1, 32),
    "tma_multi_consumers_async": (1, (1, 32)), "clc_fetch_async": (1, 32),
}
ORDER_LENGTH = 2


def consumer_side(verb):
    """Warp 1 runs consumer verbs, warp 0 everything else."""
    return verb.startswith("consumer_")
