"""The GEMM variants that the benchmark builds: the fastest configuration per
dtype, and the step-by-step ladder of docs/gemm.md (each row adds one
ingredient to the row above). Shared by build_bundle.py (here) and the
report; needs no MLIR."""

# name -> (GemmConfig overrides, persistent launch, what the step adds)
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
     "+ epilogue through swizzled shared memory and TMA stores (3 stages fit)"),
    ("6-cluster2-multicast", dict(cluster_m=2, epilogue_passes=1), True,
     "+ 2-CTA cluster, B multicast to both CTAs"),
]
# Candidates for "ours" in the main table (not ladder steps): the fastest of
# them is reported, each checked.
EXTRA = [
    ("5b-tma-store-4stages", dict(epilogue_passes=2), True,
     "TMA-store epilogue in two passes through half the buffer: 4 operand stages"),
    ("6b-cluster2-4stages", dict(cluster_m=2, epilogue_passes=2), True,
     "2-CTA multicast with the two-pass epilogue: 4 operand stages"),
]
CANDIDATES = ("5-tma-store", "6-cluster2-multicast", "5b-tma-store-4stages",
              "6b-cluster2-4stages")
