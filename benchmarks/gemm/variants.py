"""The GEMM variants that the benchmark builds: the step-by-step ladder of
docs/gemm.md (each row adds one ingredient to the row above; bf16 only) and
the candidates for "ours" in the main table (bf16 and fp16; the fastest is
reported, each checked). Shared by build_bundle.py (here) and run_gemm.py
(on the GPU); needs no MLIR."""

# (step, GemmConfig overrides, persistent launch, what the step adds)
LADDER = [
    ("1-one-consumer-wg", dict(consumer_warpgroups=1, epilogue_passes=1, setmaxnreg=False,
                               tma_store_epilogue=False), False,
     "warp-specialized: a TMA producer warp + one consumer warpgroup (64x256 tile), "
     "epilogue stores from registers, one CTA per tile"),
    ("2-two-consumer-wgs", dict(setmaxnreg=False, tma_store_epilogue=False), False,
     "+ a second consumer warpgroup (128x256 tile)"),
    ("3-setmaxnreg", dict(tma_store_epilogue=False), False,
     "+ setmaxnreg (producer 40, consumers 232 registers)"),
    ("4-persistent", dict(tma_store_epilogue=False), True,
     "+ persistent grid (one CTA per SM), grouped tile order"),
    ("5-tma-store", dict(epilogue_passes=1), True,
     "+ epilogue through swizzled shared memory and TMA stores, overlapped with the next "
     "tile (the whole C tile buffered: 3 operand stages fit)"),
    ("6-four-stages", dict(epilogue_passes=2), True,
     "+ the epilogue in two passes through half the buffer: 4 operand stages"),
    ("7-cluster2-multicast", dict(cluster_m=2, epilogue_passes=2), True,
     "+ 2-CTA cluster along M, B multicast to both CTAs"),
]
CANDIDATES = ("5-tma-store", "6-four-stages", "7-cluster2-multicast")
