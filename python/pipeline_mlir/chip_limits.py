"""The hardware facts the kernels, their variant tables and the runtime
share, for the chips this project targets (sm_90a Hopper, sm_100a
Blackwell), in one place. Pure Python: the GPU host's runtime and the ops'
variant tables read it without MLIR.

The C++ side has the same shared-memory limit as
``kMaxSharedMemoryBytes`` (include/pipeline-mlir/Dialect/Pipeline/IR/
PipelineDialect.h, the verifier's stage limit), and the same register
file as pipeline-verify-protocol's ``register-file`` default (Passes.td);
test_chip_limits.py keeps each pair equal. A real device's limits (``runtime.Device.limits``) come from
the driver; these are the defaults and what code builds for.
"""

# Dynamic shared memory one CTA may opt into: 227 KiB (228 KiB per SM, 1 KiB
# reserved by the system), on sm_90 and sm_100 alike.
SMEM_PER_BLOCK = 227 * 1024
# Shared memory of one SM; each resident CTA reserves 1 KiB of it (two
# CTAs on one SM: (SMEM_PER_SM // 2) - 1024 each).
SMEM_PER_SM = 228 * 1024
# CTAs of one cluster: 8 portably, 16 with the non-portable cluster size
# attribute (sm_90 and sm_100 alike).
MAX_CLUSTER_SIZE_PORTABLE = 8
MAX_CLUSTER_SIZE_NONPORTABLE = 16
# 32-bit registers per SM (and the most one CTA can hold).
REGISTER_FILE = 65536
THREADS_PER_WARP = 32
WARPS_PER_WARPGROUP = 4
THREADS_PER_WARPGROUP = THREADS_PER_WARP * WARPS_PER_WARPGROUP
# Rows of one warpgroup's wgmma tile (m64nNkK): a tile of M rows needs
# M / 64 consumer warpgroups.
WGMMA_M = 64
# The widest wgmma (m64nNk*: N a multiple of 8 up to 256).
WGMMA_N_MAX = 256
# SMs of the data-center parts (H100 SXM / H200; B200), what variant tables
# assume when no device is at hand.
MULTIPROCESSORS = {"sm_90a": 132, "sm_100a": 148}
