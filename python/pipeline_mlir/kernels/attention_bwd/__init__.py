"""Attention backward for Hopper, FlashAttention-3's structure, every barrier
a pipeline op or a NamedBarrier.

Given Q, K, V, dO and the forward's LSE, with S = Q K^T * scale and P =
exp(S - LSE):

    dP = dO V^T,   dS = P * (dP - dPsum),   dPsum = rowsum(dO * O)
    dV = P^T dO,   dK = scale * dS^T Q,     dQ = scale * dS K

Layouts as the forward's (``attention_fwd``): Q, dO (batch, seqlen_q, heads,
d), K, V (batch, seqlen_k, heads_kv, d), bf16; query head ``h`` reads K/V
head ``h // (heads / heads_kv)``; causal masking bottom-right aligned.

This kernel is the main pass. Before it, a preprocess (``attention_bwd_prep``)
computes dPsum and LSE * log2(e) (fully masked rows' -inf LSE becomes +inf,
so their P is 0) into fp32 buffers padded to whole query blocks (padding:
dPsum 0, LSE +inf) and the host clears the fp32 dQ accumulator; after it,
the accumulator (already scaled: each dQ tile is multiplied by the softmax
scale before its reduce-add) is rounded to bf16.

One CTA per (key block of 128 rows, K/V head, batch), 384 threads:

- warpgroup 0, the producer: its warp 0 loads the CTA's K and V once
  ('kv', one stage) and then, for every (query head of the group, query
  block of 64 rows) the block sees, Q, LSE, dO and dPsum, each through its
  own ``PipelineTmaAsync`` ring ('q', 'lse', 'do', 'dpsum'); Q and dO are
  3-D TMA boxes (rows past the sequence read zeros), LSE and dPsum bulk
  copies of 256 bytes;
- warpgroups 1 and 2, the consumers, own 64 key rows each. Per query block,
  with keys as rows (FlashAttention-3's "swap AB": P^T and dS^T come out of
  the GEMMs in the register layout that the dV and dK GEMMs take as their
  register A operand):

      S^T  = K_w Q^T          wgmma, A and B in shared memory
      dP^T = V_w dO^T         wgmma
      P^T  = exp2(S^T * scale * log2(e) - LSE * log2(e))     registers
      dS^T = P^T * (dP^T - dPsum)                            registers
      dV_w += P^T dO          wgmma, A = P^T (bf16) from registers
      dK_w += dS^T Q          wgmma, A = dS^T from registers
      dQ   = dS K_w           wgmma, A = dS^T written to shared memory
                              (read transposed), B = K_w read MN-major
      dQ -> shared memory (fp32) -> TMA reduce-add into the accumulator

  dK and dV stay in registers across every query block and every query
  head of the GQA group: their sums are deterministic. dQ sums over the key
  blocks of many CTAs through the TMA unit's fp32 add, which is not
  (addition order varies from run to run).

Head dim 256 (``column_parts`` = 2): one key block is 64 rows, both
consumer warpgroups compute its S^T and dP^T and each its 128 columns of
dV, dK and dQ (256 columns would not fit one warpgroup's registers);
with ``split_scores`` (the op's d 256 set) each computes S^T and dP^T of
half the queries only, and both read P^T and dS^T for dV and dK from two
shared tiles (double buffered, a named barrier over both).
``dq_split`` (d 128, off by default): each consumer computes dQ's 64
columns ``64 cw ..`` over all 128 keys from both warpgroups' dS^T tiles
(double buffered, a named barrier over both) and reduce-adds half a tile.
``dq_overlap`` (any head dim, off: measured no faster) keeps dQ's column
parts in flight together; ``dq_store_spread`` stores its fp32 tile without
bank conflicts (the op's configuration at d 128 and 256, where it measured
faster: ``attention_configs.BWD_DQ_STORE_SPREAD``). ``dq_deferred`` stores
and reduce-adds a step's last dQ part in the next step, under its S^T
GEMM; ``min_ctas`` declares one CTA per SM (ptxas honours ``setmaxnreg``
at d 64 only then); ``dq_double_buffer`` (d 64) gives each consumer two dQ
tiles used by turns. All three candidates, off (measured in
docs/attention.md). ``block_m`` 128 (d 64, FlashAttention-3's and FA4's
tile there) takes 128-query steps: S^T and dP^T m64n128, dQ split by
query rows between the consumers (each its 64 rows over all 128 keys,
from both consumers' dS^T tiles); ``dk_last`` issues dK's GEMM after
dQ's, so that dQ's stores and reduce-add overlap it (where dQ is one part
per step); ``pingpong`` (``Turns``) issues the consumers' S^T and dP^T
GEMMs in turn. All three candidates (measured in docs/attention.md).
``dq_reduce_warp`` hands each consumer's fp32 dQ tile to warp 1 of the
producer warpgroup, which issues the reduce-add (named barriers "dQ full"
and "dQ empty" per consumer, FA4's hand-off): the consumers never wait for
it. ``ds_one_barrier`` (with two dS^T buffers and the reduce warp) leaves
the warpgroup barrier before the dS^T stores out; ``stat_shuffle`` holds
LSE and dPsum in 8 lanes each and shuffles a value to the lane that uses
it (FA4's d 64 registers). ``dk_last`` with ``ds_one_barrier`` (FA4's
order) is the op's d 128 causal set, where it measured faster; the one
barrier is in d 64's sets too (docs/attention.md).
``stats_with_tiles`` (FA4's scheme) drops the 'lse' and 'dpsum' rings:
LSE's row is bulk-copied onto Q's stage and dPsum's onto dO's (each
stage's tx_count counts its row), into one row buffer per stage, and the
consumers read them under their Q and dO waits: two waits and two releases
fewer per step. The op's default at d 128, where it measured faster; off at
d 64, where it did not (docs/attention.md). ``dq_acc_order`` (with the
reduce warp, 64-column dQ tiles) writes the fp32 dQ tile in the wgmma
accumulator's order (16-byte stores), adds it with one 2-D TMA reduce-add
into a flat accumulator in that order, and a postprocess kernel
(``attention_bwd_dq_convert``) un-permutes it into bf16 dQ: the op's
default at d 128 full, where it measured faster; off causal and at d 64
(docs/attention.md). ``block_m`` 80 (d 128 with ``dq_split`` and the
reduce warp: FA4's d 128 step) takes 80-query steps: S^T and dP^T
m64n80, the dS^T tiles with the 32-byte swizzle, and dQ computed
transposed (``dq_transposed``: dQ^T = K^T dS^T, K an MN-major A, N = 80
queries), stored transposed into an 80 x 64 fp32 tile
(``dq_tile_store.store_fragment_f32_transposed``), or with
``dq_acc_order`` in the accumulator's transposed order
(``ACC_ORDER.for_block_m(80)``, its own postprocess): that, in FA4's
order, is the op's d 128 full default.

Release order (what pipeline-verify-protocol's async-read check proves): a
stage of 'do' goes back only after ``wait_group`` retired the dP GEMM and
the dV GEMM that read it, a stage of 'q' after the S and dK GEMMs; 'lse'
and 'dpsum' once their values are in registers. The epilogue writes dK and
dV over the K and V tiles, which both consumer warpgroups read until their
last GEMM: each releases 'kv' after its last wait, and a named barrier over
both lets neither write before the other released.

Stages (``build`` assembles them from ``STAGES``; a ``Stages`` with one
replaced builds a variant, which is how the tests plant mistakes), one
module each:

- ``config``: ``AttentionBwdConfig``, the tiles, layouts and shared-memory
  plan, the named barrier ids;
- ``rings``: ``Rings``, the shared memory and its pipelines (each a
  ``pipeline_mlir.kernel.Ring``);
- ``schedule``: ``KeyBlockSchedule``, a CTA's key block and its steps;
- ``producer``: the producer warp's loads;
- ``consumer``: a consumer warpgroup's stages put together;
- ``mainloop``: ``Mainloop``, one query block's order (every wait and
  release);
- ``turns``: ``Turns``, the consumers' score-GEMM turns (``pingpong``);
- ``score_gemms``: ``ScoreGemms`` (S^T, dP^T);
- ``softmax_grad``: ``SoftmaxGrad`` (P^T, the mask, dS^T);
- ``grad_gemms``: ``GradGemms`` (dV, dK, dQ), with ``dq_tile_store`` (the
  fp32 dQ tile's stores) and ``ds_tile_store`` (dS^T's stores from its
  register operand);
- ``dq_reduce``: ``DqReduce``, the TMA reduce-add of dQ;
- ``dq_reduce_warp``: ``DqHandOff`` and ``ReduceWarp``, dQ's reduce-adds
  issued by a warp of the producer warpgroup (``dq_reduce_warp``);
- ``dq_acc_order``: the dQ tile in the accumulator's order, its stores and
  its place in the flat accumulator (``dq_acc_order``);
- ``epilogue``: ``DkvEpilogue``;
- ``builder``: ``Stages``, ``STAGES``, ``build`` and the kernel cache's
  ``build_variant``.

Usage: python -m pipeline_mlir.kernels.attention_bwd [--d 64|128|256] [--causal]
(builds, checks and compiles; ``pipeline_mlir/ops/attention_bwd_host.py``
runs it).
"""

from .builder import STAGES, Stages, build, build_variant
from .config import BLOCK_M, CONSUMER_WARPGROUPS, DQ_CHUNK, HEAD_DIMS, AttentionBwdConfig
from .consumer import consumer
from .dq_reduce import DqReduce, dq_column, dq_row
from .dq_reduce_warp import DqHandOff, ReduceWarp
from .dq_tile_store import f32_pair_offset, store_fragment_f32
from .ds_tile_store import store_operand_a
from .epilogue import DkvEpilogue, dkv_column, dkv_row
from .grad_gemms import GradGemms
from .mainloop import Mainloop
from .producer import producer
from .rings import Rings
from .schedule import KeyBlockSchedule
from .score_gemms import ScoreGemms
from .softmax_grad import SoftmaxGrad, load_columns
from .turns import Turns

__all__ = [
    "AttentionBwdConfig", "BLOCK_M", "CONSUMER_WARPGROUPS", "DQ_CHUNK", "HEAD_DIMS",
    "Stages", "STAGES", "build", "build_variant",
    "Rings", "KeyBlockSchedule", "producer", "consumer", "Mainloop", "ScoreGemms",
    "SoftmaxGrad", "GradGemms", "DqReduce", "DqHandOff", "ReduceWarp", "DkvEpilogue", "Turns",
    "load_columns", "f32_pair_offset", "store_fragment_f32", "store_operand_a", "dq_column",
    "dq_row", "dkv_row",
    "dkv_column",
]
