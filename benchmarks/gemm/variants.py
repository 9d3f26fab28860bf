"""The GEMM variants that the benchmark builds: the fastest configuration per
dtype, and the step-by-step ladder of docs/gemm.md (each row adds one
ingredient to the row above). Shared by build_bundle.py (here) and the
report; needs no MLIR."""

# name -> (GemmConfig overrides, persistent launch, what the step adds)
LADDER = [
    ("1-one-consumer-wg", dict(consumer_warpgroups=1, setmaxnreg=False,
                               tma_store_epilogue=False), False,
     "warp-specialized: a TMA producer warp + one consumer warpgroup (64x256 tile), "
     "epilogue stores from registers, one CTA per tile"),
    ("2-two-consumer-wgs", dict(setmaxnreg=False, tma_store_epilogue=False), False,
     "+ a second consumer warpgroup (128x256 tile)"),
    ("3-setmaxnreg", dict(tma_store_epilogue=False), False,
     "+ setmaxnreg (producer 40, consumers 232 registers)"),
    ("4-persistent", dict(tma_store_epilogue=False), True,
     "+ persistent grid (one CTA per SM), grouped tile order"),
    ("5-tma-store", dict(), True,
     "+ epilogue through swizzled shared memory and TMA stores"),
    ("6-cluster2-multicast", dict(cluster_m=2), True,
     "+ 2-CTA cluster, B multicast to both CTAs"),
]
BEST = {"bf16": ("5-tma-store", "6-cluster2-multicast"),
        "f16": ("5-tma-store", "6-cluster2-multicast")}
