"""Attention forward for Hopper, FlashAttention-3's structure, every barrier
a pipeline op or a NamedBarrier.

    O = softmax(Q K^T * scale [+ causal mask]) V,   LSE = log-sum-exp per row

Q is (batch, seqlen_q, heads, d), K and V (batch, seqlen_k, heads_kv, d), all
bf16 and contiguous; ``heads`` is a multiple of ``heads_kv`` (GQA / MQA: query
head ``h`` reads K/V head ``h // (heads / heads_kv)``). O is like Q; LSE is
fp32 (batch, heads, seqlen_q), natural log. Causal masking is aligned to the
bottom right (key ``c`` is visible to query ``r`` when ``c <= r + seqlen_k -
seqlen_q``), as in FlashAttention.

Roles (one CTA of 384 threads, persistent over (tile of 128 query rows, head,
batch) work units; causal runs the longest tiles first):

- warpgroup 0, the producer: lowers its registers; its warp 0 loads, per
  tile, Q into a one-stage ``PipelineTmaAsync`` ('q') and then K and V block
  by block into their own rings ('k', 'v'); every load is a 3-D TMA box
  (d-columns, rows, batch), so rows past the sequence end read zeros;
  with ``pack_gqa`` = g, Q is a 4-D box (d-columns, the g query heads of
  one K/V group, block_m / g positions, batch) and a tile's rows are
  (position, head) pairs, so each K/V block serves the whole group;
- warpgroups 1 and 2, the consumers: raise their registers; each owns 64
  query rows of the tile. Per key block j:

      S_j = Q K_j^T             wgmma, A and B from shared memory
      P_j = exp2(S_j * scale * log2(e) - m_j)     online softmax, registers
      O  += P_{j-1} V_{j-1}     wgmma, A (= P, bf16) from registers,
                                V MN-major from shared memory

  issued so that the softmax of S_j overlaps P_{j-1} V_{j-1} (intra-warpgroup
  overlap), and the two warpgroups take turns issuing their GEMMs (ping-pong,
  two named barriers), so one's softmax runs under the other's GEMMs.

Release order (what pipeline-verify-protocol's async-read check proves): a
stage of 'k' is released only after ``wgmma.wait_group`` retired the group
of the S GEMM that reads it, and a stage of 'v' after the group of the P V
GEMM; Q is released after the tile's last S GEMM retired. Releasing any
earlier lets TMA overwrite operands an in-flight wgmma still reads.

Stages (``build`` assembles them from ``STAGES``; a ``Stages`` with one
replaced builds a variant, which is how the tests plant mistakes), one
module each:

- ``config``: ``AttentionConfig``, the tiles, layouts and shared-memory
  plan, the named barrier ids;
- ``rings``: ``Rings``, the shared memory and its pipelines (each a
  ``pipeline_mlir.kernel.Ring``);
- ``schedule``: ``WorkSchedule``, the persistent work units;
- ``producer``: the producer warp's loads;
- ``consumer``: the consumer warpgroups' loop over their tiles, and the
  ``Scales`` they apply;
- ``pingpong``: ``PingPong``, the consumers' GEMM turns;
- ``mainloop``: ``Mainloop``, the GEMMs and every release;
- ``softmax``: ``OnlineSoftmax``, softmax and mask, with ``exponentials``
  (MUFU's ex2 or the polynomial ``exp2_poly``);
- ``epilogue``: ``OutputEpilogue``;
- ``builder``: ``Stages``, ``STAGES``, ``build`` and the kernel cache's
  ``build_variant``.

FP8 (``dtype='e4m3'``): Q, K and V in e4m3 with per-tensor descales (three
one-element fp32 device tensors, parameters ``q_descale``, ``k_descale``,
``v_descale``), O bf16, LSE fp32. S = Q K^T is an 8-bit wgmma (k32; Q and K
K-major as before, d contiguous); q and k's descales fold into the softmax's
``scale_log2``, V's into O's 1 / row sum. P, converted to e4m3 in registers,
is the A operand of P V: an 8-bit wgmma reads B K-major only (no
transposed form), and P V's K is the keys, so V arrives as V^T (batch,
kv_heads, d, keys): keys contiguous, one ring stage = d rows x the key
block (128 keys: one 128-byte swizzled box; 192: three 64-byte ones). The
host makes it (``fp8_v_operand`` in
ops/attention_fwd_host.py: a transpose, not an in-kernel one, so the
producer stays one TMA warp and the consumers' shared memory is read as
TMA wrote it).

Why V's keys are also permuted: P is the f32 accumulator of S, whose
thread ``t`` (lane % 4) holds, in each row and each 32-key slice, columns
``8c + 2t, 8c + 2t + 1`` for c = 0..3 (``Fragment``). The k32 register A
operand of an 8-bit wgmma wants that thread to hold k indices ``4t .. 4t +
3`` (register 0: row g, 1: row g + 8) and ``16 + 4t .. 16 + 4t + 3``
(registers 2, 3). Converting in place (``to_operand_a('e4m3',
in_place=True)``: two ``cvt.rn.satfinite.e4m3x2.f32`` per register, bytes
in value order, no shuffle) therefore gives k index ``kappa = 16 h + 4 t +
j`` the accumulator column ``ORDER[kappa] = 16 h + 8 (j // 2) + 2 t + j %
2`` (``layout.fp8_register_a_key_order``). The product P V stays right if
B's K index ``kappa`` (V^T's column ``kappa`` in each 32: the K-major
descriptor's K order is the row's byte order) holds key ``ORDER[kappa]``;
the host's gather does exactly that (``fp8_v_source_keys``), and
test/python/test_attention_fp8.py checks it element by element against the
PTX ISA's fragment layouts (test/gpu/ptx_layouts.py). Keys past the
sequence's end are padding zeros (V^T is padded to whole 32-key blocks),
and P is 0 there anyway (masked). FlashAttention-3 gets the same effect by
permuting V's columns as it transposes V in the kernel.

``ctas_per_sm=2`` sizes a configuration (one consumer warpgroup, 64-row
tiles) for two CTAs per SM: ``.minnctapersm 2`` caps the entry registers,
the register budget and the shared memory are checked against half an SM.

Usage: python examples/attention_fwd.py [--d 64|128|256] [--causal] [--pack-gqa 2|4|8]
[--fp8] [--print-ir] [--out DIR]
(builds, checks and compiles; ``pipeline_mlir/ops/attention_fwd_host.py`` runs it).

``--out DIR``: where the cubin and its launch metadata go (by default a
folder in the system's temporary directory, not the source tree:
examples/_common.py).
"""

from .builder import STAGES, Stages, build, build_variant
from .config import SMEM_PER_SM, AttentionConfig
from .consumer import Scales, consumer
from .epilogue import OutputEpilogue
from .exponentials import EXP2_ROUND_MAGIC, exp2_poly, poly_slots
from .mainloop import Mainloop, TileAccumulators
from .pingpong import PingPong
from .producer import producer
from .rings import Rings
from .schedule import WorkSchedule
from .softmax import OnlineSoftmax

__all__ = [
    "AttentionConfig", "SMEM_PER_SM", "Stages", "STAGES", "build", "build_variant",
    "Rings", "WorkSchedule", "producer", "consumer", "Scales", "PingPong", "Mainloop",
    "TileAccumulators", "OnlineSoftmax", "OutputEpilogue",
    "exp2_poly", "poly_slots", "EXP2_ROUND_MAGIC",
]
