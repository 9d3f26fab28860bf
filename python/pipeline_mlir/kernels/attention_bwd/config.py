"""The backward's configuration (``AttentionBwdConfig``): its switches, the
tile shapes and operand layouts that follow from them, the shared-memory
plan, and the launch facts the host needs; with the kernel-wide constants
(tile rows, dQ chunk, named barrier ids).
"""

from dataclasses import dataclass

from pipeline_mlir.chip_limits import SMEM_PER_BLOCK, WGMMA_M
from pipeline_mlir.kernel.warpgroup import THREADS_PER_WARPGROUP
from pipeline_mlir.layout import OperandLayout
from pipeline_mlir.ops.attention_bwd_acc_order import TRANSPOSED_BLOCK_M


SWIZZLE = 128
CONSUMER_WARPGROUPS = 2
BLOCK_M = 64                                # query rows per step (``block_m``: 64, 80 or 128)
# FA4's d 128 step (``block_m`` 80): dQ computed transposed (``dq_transposed``).
BLOCK_M80 = TRANSPOSED_BLOCK_M
# The dS^T tiles' swizzle at 80 queries: rows of 160 bytes take 32-byte spans.
DS_SWIZZLE80 = 32
DQ_CHUNK = 64                               # dQ columns per GEMM (register budget)
ROW_BYTES = BLOCK_M * 4                     # one 64-row query block of LSE or dPsum
HEAD_DIMS = (64, 128, 256)
# Named barrier ids: per consumer warpgroup 1, 2 (its dS / dQ hand-over to
# its own TMA thread); 3: both consumer warpgroups before the epilogue; 4:
# both consumers' dS tiles written (``dq_split``); 5, 6: the consumers'
# score-GEMM turns (``pingpong``); 7, 8: per consumer warpgroup its dQ tile
# written ("dQ full"), 9, 10: that tile read by the reduce-add ("dQ
# empty"), both between the warpgroup and the reduce warp
# (``dq_reduce_warp``).
WG_BARRIER = 1
EPILOGUE_BARRIER = 3
DS_BARRIER = 4
PINGPONG_BARRIER = 5
DQ_FULL_BARRIER = 7
DQ_EMPTY_BARRIER = 9
# The producer warpgroup's warp that issues dQ's reduce-adds
# (``dq_reduce_warp``; warp 0 loads).
REDUCE_WARP = 1


@dataclass(frozen=True)
class AttentionBwdConfig:
    """One variant of the backward's main kernel."""
    head_dim: int = 128
    causal: bool = False
    stages: int = 2
    producer_registers: int = 24
    consumer_registers: int = 240
    # dQ = dS K split by columns between the consumer warpgroups: each
    # computes its d/2 columns over all 128 keys of the CTA from both
    # warpgroups' dS^T tiles (double buffered; one named barrier over both
    # per step) and reduce-adds a 64 x d/2 tile, rather than each all d
    # columns over its own 64 keys (two reduce-adds of a whole 64 x d tile
    # per step: twice the traffic). Head dim 128 only: at 64 a part would be
    # 32 columns, not whole 128-byte atoms of K. Off until measured.
    dq_split: bool = False
    # dQ's column chunks (``DQ_CHUNK`` wide) kept in flight: each chunk's
    # GEMM is issued before the wait for the one before it, whose fp32
    # stores then overlap it, and the first wait (``wait_group(1)``) needs
    # only dV and dK retired, so Q and dO go back while dQ still runs. The
    # default waits for everything after each chunk and stores it with the
    # tensor core idle for this warpgroup. Measured no faster on an H200
    # (0.97-1.03x the default's time): off.
    dq_overlap: bool = False
    # The fp32 dQ tile's 8-byte stores without bank conflicts: rows 2i and
    # 2i + 1 of the 128-byte swizzle put a column pair in the same two
    # 16-byte chunks, so each half-warp (4 rows) filled only 4 of a row's
    # 8 chunks, twice (4 wavefronts per store where 2 carry the bytes;
    # Nsight Compute on the d 128 kernel). With this, odd rows store their
    # pair 64 bytes over (pair j ^ 2, chosen by a select), and each half
    # fills every chunk once. The op turns it on where it measured faster
    # (attention_configs.BWD_DQ_STORE_SPREAD: d 128 and 256).
    dq_store_spread: bool = False
    # The last dQ part's fp32 store and reduce-add deferred to the next
    # step: its values stay in registers (retired) until that step's S^T
    # and dP^T are issued, and are stored while those GEMMs run; the
    # parts before it are stored while the next part's GEMM runs. The
    # default stores every part and issues the reduce-add before the next
    # step's GEMMs, so each warpgroup's tensor work stops for its dQ
    # epilogue (Nsight Compute: the tensor pipe idles 48% of the d 128
    # kernel, much of it in that epilogue's waits, fences and barriers).
    # Measured on an H200: 5-24% slower at d 128 and 256 (the carried part
    # spills there); 6% faster at d 64 with dq_double_buffer, the spread
    # stores and min_ctas, and 0.5-7% at d 128 with those and dq_split
    # (one 64-column part to carry; docs/attention.md). Off.
    dq_deferred: bool = False
    # ``.minnctapersm 1`` on the kernel: without it ptxas may not know the
    # register count at entry and then ignores every ``setmaxnreg`` (its
    # C7508 note; seen at d 64): the consumers get the flat 168 registers
    # of 65536 / 384 threads instead of 240, and spill. Measured alone on
    # an H200: -2..+4% at d 64, 1-8% slower at d 128 and 256. Off.
    min_ctas: bool = False
    # Two fp32 dQ tiles per consumer warpgroup, used by turns (step ``it``
    # writes tile ``it % 2``): a step's dQ stores wait only for the
    # reduce-add of two steps before to have read its tile, not the one
    # just issued (the leader's ``cp.async.bulk.wait_group.read 1``; the
    # default waits for every reduce-add, then the warpgroup's barrier
    # before the dS^T stores waits for the leader). Shared memory allows
    # it at d 64 (another 32 KiB) and at d 128 with ``dq_split`` (its
    # 64-column tiles: 226.7 KiB); otherwise d 128 and 256 would pass
    # 227 KiB.
    # The tiles are plain shared memory: the checker and the simulator do
    # not model which one a reduce-add still reads (the wait's count is the
    # argument; the GPU tests compare with fp32). Off.
    dq_double_buffer: bool = False
    # Query rows per step: 64, or 128 at head dim 64 (FlashAttention-3's
    # and FA4's d 64 tile). With 128 the K and V tiles each CTA keeps are
    # read by half as many steps (half the fixed cost per step: waits,
    # barriers, LSE / dPsum loads, dQ epilogues), S^T and dP^T are m64n128
    # GEMMs and dV, dK walk 128 queries of K; dQ is split by rows
    # (``dq_rows``): consumer ``cw`` computes query rows ``64 cw ..`` over
    # all 128 keys from both consumers' dS^T tiles (double buffered, one
    # barrier over both, as ``dq_split``) and reduce-adds one 64 x d tile,
    # so a CTA's dQ traffic per query row halves too. Not at d 128 and 256
    # (S^T and dP^T of 128 queries next to dK and dV would not fit the
    # registers), nor with ``dq_split`` or ``dq_double_buffer`` (another
    # 32 KiB: 227 KiB would be passed). Measured on an H200: 6.7-7.7% less
    # backward time on the full d 64 row, 9-15% more on the causal one: a
    # candidate (docs/attention.md).
    # 80 (``BLOCK_M80``, FA4's d 128 step) at head dim 128 with dq_split:
    # S^T and dP^T are m64n80, dV and dK walk 80 queries (5 k slices), the
    # dS^T tiles take the 32-byte swizzle (160-byte rows), and dQ, whose 80
    # rows are no wgmma M, is computed transposed (``dq_transposed``):
    # dQ^T = K^T dS^T, consumer ``cw``'s 64 head-dim columns as M (K an
    # MN-major A), N = 80 queries, over all 128 keys of both consumers'
    # dS^T tiles; the m64n80 accumulator is stored transposed into an
    # 80 x 64 fp32 tile (``dq_tile_store.store_fragment_f32_transposed``)
    # that the reduce warp adds as the plain tiles; with dq_acc_order in
    # the accumulator's transposed order (``ACC_ORDER.for_block_m(80)``: 10
    # 16-byte stores a thread, one 20 KiB reduce-add a tile, the postprocess
    # un-permutes it). Not with
    # dq_deferred, dq_overlap, dq_double_buffer (shared memory: 226.3 KiB
    # without) or stat_shuffle; dq_store_spread has nothing to spread (the
    # op's d 128 sets carry it; ignored). Measured on an H200 (two passes,
    # the d 128 full set without dq_acc_order): 1.19-1.23x the full
    # default's backward time (ptxas serializes its wgmma instructions for
    # want of registers, C7512); in FA4's order (dk_last, ds_one_barrier)
    # 1.013-1.020x on the 4096 row, 0.976-0.995x on the 8192 row: not faster
    # on both. With dq_acc_order (FA4's order) 0.960-0.981x on both full
    # rows in two passes: the op's d 128 full default since
    # (attention_configs.BWD_FULL_OPTIONS; docs/attention.md). Off here.
    block_m: int = BLOCK_M
    # dK's GEMM issued after dQ's (FlashAttention-3's order: dV, then the
    # dS^T hand-over, dQ, dK), and dQ waited for with dK still running, so
    # the dQ tile's stores and reduce-add overlap it; Q and dO go back once
    # dK retired. The default issues dV and dK as one group before the dS^T
    # hand-over and waits for all before the stores. Needs one dQ part per
    # step (d 64, or ``dq_split``), without ``dq_deferred`` or
    # ``dq_overlap``. Measured on an H200: 3-10% slower on every row but the
    # d 64 causal one with 128-query steps (even once, 6% slower once): off.
    # With the reduce warp, ``ds_one_barrier`` and the rows on the tiles'
    # stages (FA4's order) 2.1-3.4% faster on both d 128 causal rows in two
    # passes: the op's d 128 causal set (attention_configs.
    # BWD_CAUSAL_OPTIONS); not full (0.984-1.001x).
    dk_last: bool = False
    # The consumers issue their S^T and dP^T GEMMs in turn (``Turns``,
    # FlashAttention-3's ping-pong): one's softmax gradient then runs
    # under the other's score GEMMs. Not with ``shared_ds`` (its barrier
    # over both consumers per step keeps them in step anyway). Measured
    # 2-11% slower at every head dim: off.
    pingpong: bool = False
    # dQ's reduce-adds issued by a warp of the producer warpgroup (warp
    # ``REDUCE_WARP``; FA4's dQ hand-off) rather than each consumer's
    # leader after a barrier over its warpgroup: a consumer writes its fp32
    # dQ tile, fences it for TMA's proxy and arrives on its "dQ full"
    # barrier, never waiting for the reduce-add; the reduce warp waits
    # there, issues the reduce-add, waits until TMA read the tile and
    # arrives on "dQ empty", which the consumer waits on just before it
    # writes the tile again (a step later, long after). One tile per
    # consumer (not with ``dq_double_buffer``); with ``dq_deferred`` only
    # where dQ is one part per step (d 64, or ``dq_split``).
    dq_reduce_warp: bool = False
    # With ``shared_ds`` and ``dq_reduce_warp``: the dS^T hand-over takes
    # only its barrier over both consumers, without the barrier over this
    # warpgroup before the stores (FA4's order with two dS buffers). That
    # barrier said the tile was free: the step's buffer was last read by
    # the dQ GEMMs of two steps before, which every warp of both consumers
    # waited for before arriving at the previous step's barrier over both;
    # and it passed the leader's wait for the last reduce-add on to the
    # warpgroup, which the reduce warp's "dQ empty" does instead. One
    # 128-thread barrier less per step. Measured on an H200: 1-2.6% slower
    # alone at d 128, -1.7..+3.3% with dk_last (docs/attention.md); with
    # dk_last on the d 128 causal set with the rows on the tiles' stages
    # 2.1-3.4% faster (its default since), and in d 64's 128-query sets.
    ds_one_barrier: bool = False
    # LSE and dPsum of a step held by 8 lanes each and shuffled to the lane
    # that uses a value right before its use (FA4's d 64 tile, "shuffle
    # LSE"): a thread holds n / 32 of each (128-query steps: 4, not 32), so
    # the registers of S^T, dP^T, dK and dV fit without spilling. One
    # ``shfl.sync.idx`` per value a thread uses. Spills drop (d 128 to
    # 4-20 bytes, 128-query steps to 52-72), but on an H200 it is 0.5-6.6%
    # slower at d 128 (the shuffles sit between S^T's wait and the
    # exponentials) and 3 points faster than without at 128-query steps,
    # still not faster than the d 64 default (docs/attention.md): off.
    stat_shuffle: bool = False
    # With ``stat_shuffle``: each shuffle's source lane an immediate. The
    # source of value ``k`` is lane ``lane % 4 + 4 (k // 2 // g)``; with
    # ``shfl.sync.idx``'s segment mask set to 3 (``c`` = 0x31f) the lane's
    # own two low bits are kept and ``b`` supplies only ``4 (k // 2 // g)``,
    # a constant (``ShuffledColumns.immediates``). The 8 source lanes of a
    # 128-query step no longer take registers: on FA4's d 64 tile they were
    # what ptxas spilled around dP^T's wait. Measured on an H200 (four
    # passes): d 64 full's set with it and dq_acc_order (0 bytes of spills)
    # 0.94-0.95x its backward time, d 64 causal's set with stat_shuffle and
    # it 0.975-0.986x: both d 64 sets take it (attention_configs); off
    # otherwise (docs/attention.md).
    shuffle_imm: bool = False
    # LSE's row of a step carried on Q's stage and dPsum's on dO's (FA4's
    # scheme): the producer's bulk copy of each row lands on the tile
    # stage's full barrier (its bytes in that stage's tx_count), into a
    # buffer of one row per stage indexed by the tile's state, and the
    # consumers read the rows between their waits on Q and dO and the
    # release of those stages. No 'lse' and 'dpsum' pipelines: per step two
    # waits and two releases fewer for each consumer warpgroup, two
    # acquires fewer for the producer warp, and four mbarriers fewer per
    # stage (the rows are held as long as their tiles; one row buffer less
    # each). Measured on an H200 (two passes): 0.965-0.981x the backward
    # time of the d 128 default on all four rows, so the op's d 128 default
    # takes it (attention_configs.BWD_DEFAULT_OPTIONS); 1.011-1.032x at d 64
    # on 64-query steps. On FA4's d 64 tile (block_m 128 with the reduce
    # warp, ds_one_barrier and stat_shuffle) 0.919-0.925x the d 64 set's
    # time on the full row, 1.036-1.049x causal (two passes): d 64 full's
    # set (attention_configs.BWD_FULL_OPTIONS; docs/attention.md).
    stats_with_tiles: bool = False
    # P^T packed to bf16 (dV's register A) as soon as it is masked, before
    # the wait for dP^T, and dS^T = P^T (dP^T - dPsum) computed from those
    # bf16 values widened back: P^T's 64 fp32 registers of a 128-query step
    # (block_m 128) die before dP^T's accumulator is read, so the step's
    # peak is S^T/P^T 32 + dP^T 64 + dK, dV 64 rather than 64 + 64 + 64.
    # dV is bit for bit the same; dS^T takes P^T rounded to bf16 (it is
    # rounded to bf16 itself next). Measured on an H200 (two passes): on
    # FA4's d 64 tile 1.03-1.04x the time of the same set without it on the
    # full row (the widening sits on dS^T's chain), 0.95-0.96x causal; at
    # d 128 1.02-1.07x the default's; dQ and dK errors against fp32 up to
    # 1.7x the default's (docs/attention.md). With the rows on the tiles'
    # stages and lpt_order (no stat_shuffle), 0.971-0.973x the d 64 set's
    # time causal: the op's d 64 causal set (attention_configs.
    # BWD_CAUSAL_OPTIONS); off otherwise.
    p_packed: bool = False
    # The grid's block indices take the key blocks longest first within
    # groups of ``schedule.LPT_PAIRS`` (batch, K/V head) pairs: key block 0
    # of each pair of a group, then key block 1, ... (``schedule.
    # key_block_of``). Causal, a key block's steps fall with its index, so
    # a group's longest CTAs start first and the grid ends on its shortest;
    # by default the last pair's longest CTA starts among the grid's last
    # and runs alone at the end (a list-scheduling model of 132 SMs puts
    # that tail at 3-7% of the causal rows at d 64 and 128, 13% at d 256).
    # Full attention: every key block the same work, only the order of the
    # heads in flight changes. Measured on an H200 (two passes): causal
    # 0.962-0.979x the backward time at d 128, 0.978-0.994x at d 256,
    # 0.992-1.018x on the d 64 set; full 1.002-1.022x. In the op's causal
    # sets (attention_configs.BWD_CAUSAL_OPTIONS: d 128, d 256, and d 64's
    # with FA4's tile); off otherwise.
    lpt_order: bool = False
    # With ``stats_with_tiles``: the producer issues a step's LSE (dPsum)
    # row copy before Q's (dO's) boxes under the same acquire, rather than
    # after them. The row is 256-512 bytes from another buffer and the
    # stage's barrier completes only when it lands too; issued first, it is
    # no longer the copy the consumers' wait ends on (at d 64 on 64-query
    # steps the rows on the tiles' stages measured 1.1-3.2% slower, read as
    # S^T and dP^T waiting for the rows). Off until measured.
    rows_first: bool = False
    # dQ in the accumulator's order (FA4's dQ scheme, ``dq_acc_order``):
    # each consumer writes its fp32 dQ fragment into its tile in the wgmma
    # accumulator's own order (8 unswizzled 16-byte stores a thread, no bank
    # conflict), the reduce warp adds the tile's 16 KiB with one TMA tensor
    # reduce-add over a 2-D view of the flat accumulator (contiguous bytes,
    # as a 1-D bulk reduce-add), and the host un-permutes the accumulator
    # while converting it to bf16. Needs the reduce warp and 64-column dQ
    # tiles (d 64, or d 128 with dq_split); dq_store_spread has nothing to
    # spread then (the op's d 128 sets carry it; ignored). ptxas spills
    # less (d 64 56 -> 12-20 bytes, d 128 causal 44 -> 12). With torch's
    # un-permuting copy (142 us against the plain conversion's 50) it took
    # 1.007-1.098x the defaults' backward time on an H200; with the
    # postprocess kernel (kernels/attention_bwd_dq_convert.py, 52.5 us)
    # 0.978-0.990x at d 128 full (the op's default there since),
    # 1.015-1.024x d 128 causal, 0.990-1.008x d 64 (docs/attention.md).
    # Off here (a switch of the config; the op's sets turn it on).
    dq_acc_order: bool = False
    # d 256: each consumer computes S^T and dP^T of half the step's queries
    # (its 32, m64n32) rather than both the same 64 (two column parts
    # otherwise compute the same S^T, dP^T, P^T and dS^T twice: 7 GEMM
    # units of work a step where 5 are needed, and the exponentials
    # twice), writes its halves of P^T and dS^T (bf16) into tiles both
    # share, and after one barrier over both consumers issues dV and dK
    # over all 64 queries with A from those tiles (FA4's d 256 reads dK's
    # and dV's operands from shared memory too). The tiles alternate
    # between two buffers by step, so a step's writes follow the other
    # consumer's arrival at the step before's barrier, after its GEMMs of
    # two steps before (the buffer's last readers) retired. Head dim 256
    # only (two column parts), not with the options that reorder or carry
    # the gradient GEMMs (dq_deferred, dk_last, pingpong, p_packed,
    # stat_shuffle) nor dq_double_buffer. ptxas spills nothing (the plain
    # d 256 kernel 76 bytes). Measured on an H200 (three passes) with
    # dq_reduce_warp and stats_with_tiles: 0.853-0.892x the plain kernel's
    # backward time full, 0.846-0.860x causal (with lpt_order): the op's
    # d 256 set (attention_configs.BWD_DEFAULT_OPTIONS; docs/attention.md).
    # Off here (a switch of the config; the op's sets turn it on).
    split_scores: bool = False
    # With ``split_scores`` (registers to spare: S^T and dP^T of 32
    # queries, no register A): dQ's 128 columns as one m64n128 GEMM
    # rather than two of ``DQ_CHUNK``: one wait and one read of dS^T a
    # step instead of two (ptxas: 0 / 8 bytes spilled full / causal).
    # Measured on an H200 on the op's d 256 set (two passes): 1.081-1.108x
    # its backward time full, 1.041-1.043x causal (not profiled). Off.
    dq_one_part: bool = False

    def __post_init__(self):
        if self.head_dim not in HEAD_DIMS:
            raise ValueError(f"AttentionBwdConfig: head_dim must be one of {HEAD_DIMS}, "
                             f"got {self.head_dim!r}")
        if self.stages not in (1, 2, 3):
            raise ValueError("AttentionBwdConfig: stages must be 1, 2 or 3")
        if self.dq_deferred and self.dq_overlap:
            raise ValueError("AttentionBwdConfig: dq_deferred orders the dQ parts itself "
                             "(each stored while the next one's GEMM runs); not with "
                             "dq_overlap")
        if self.dq_double_buffer and self.smem_bytes() > SMEM_PER_BLOCK:
            raise ValueError(f"AttentionBwdConfig: dq_double_buffer at head_dim "
                             f"{self.head_dim} needs {self.smem_bytes()} bytes of shared "
                             f"memory, over {SMEM_PER_BLOCK} (it fits at 64 with 64-query steps)")
        if self.block_m not in (BLOCK_M, BLOCK_M80, 2 * BLOCK_M):
            raise ValueError(f"AttentionBwdConfig: block_m must be {BLOCK_M}, {BLOCK_M80} or "
                             f"{2 * BLOCK_M}, got {self.block_m!r}")
        if self.block_m == BLOCK_M80 and (
                self.head_dim != 128 or not self.dq_split or not self.dq_reduce_warp
                or self.dq_deferred or self.dq_overlap
                or self.dq_double_buffer or self.stat_shuffle):
            raise ValueError("AttentionBwdConfig: block_m 80 needs head_dim 128 with dq_split "
                             "and dq_reduce_warp (dQ^T's tile to the reduce warp), without "
                             "dq_deferred, dq_overlap, dq_double_buffer or stat_shuffle")
        if self.block_m == 2 * BLOCK_M and (self.head_dim != 64 or self.dq_split):
            raise ValueError("AttentionBwdConfig: block_m 128 needs head_dim 64 (S^T and "
                             "dP^T of 128 queries next to dK and dV fit the registers there "
                             "only), without dq_split (its dQ is split by rows)")
        if self.dk_last and (self.dq_cols > DQ_CHUNK or self.column_parts > 1
                             or self.dq_deferred or self.dq_overlap):
            raise ValueError("AttentionBwdConfig: dk_last needs one dQ part per step "
                             "(head_dim 64, or dq_split), without dq_deferred or dq_overlap")
        if self.pingpong and self.shared_ds:
            raise ValueError("AttentionBwdConfig: pingpong needs each consumer's dQ from "
                             "its own dS^T tile (not with dq_split or block_m 128)")
        if self.dq_reduce_warp and (self.dq_double_buffer or (
                self.dq_deferred and (self.dq_cols > DQ_CHUNK or self.column_parts > 1))):
            raise ValueError("AttentionBwdConfig: dq_reduce_warp hands one dQ tile per "
                             "consumer to the reduce warp (not with dq_double_buffer), "
                             "written whole in one step (with dq_deferred: one dQ part "
                             "per step, head_dim 64 or dq_split)")
        if self.ds_one_barrier and not (self.shared_ds and self.dq_reduce_warp):
            raise ValueError("AttentionBwdConfig: ds_one_barrier needs two dS^T buffers "
                             "handed over by the barrier over both consumers (dq_split or "
                             "block_m 128) and the dQ tile claimed from the reduce warp "
                             "(dq_reduce_warp)")
        if self.shuffle_imm and not self.stat_shuffle:
            raise ValueError("AttentionBwdConfig: shuffle_imm sets the source lanes of "
                             "stat_shuffle's shuffles (needs stat_shuffle)")
        if self.rows_first and not self.stats_with_tiles:
            raise ValueError("AttentionBwdConfig: rows_first orders the LSE and dPsum row "
                             "copies on Q's and dO's stages (stats_with_tiles)")
        if self.dq_acc_order and not (self.dq_reduce_warp and self.dq_cols == DQ_CHUNK
                                      and self.column_parts == 1):
            raise ValueError("AttentionBwdConfig: dq_acc_order needs dq_reduce_warp and "
                             "64-column dQ tiles (head_dim 64, or 128 with dq_split)")
        if self.split_scores and (self.column_parts != 2 or self.dq_deferred or self.dk_last
                                  or self.pingpong or self.p_packed or self.stat_shuffle
                                  or self.dq_double_buffer):
            raise ValueError("AttentionBwdConfig: split_scores needs head_dim 256 (two "
                             "column parts), without dq_deferred, dk_last, pingpong, "
                             "p_packed, stat_shuffle or dq_double_buffer")
        if self.dq_one_part and not self.split_scores:
            raise ValueError("AttentionBwdConfig: dq_one_part needs split_scores (the "
                             "registers of a 128-column dQ part)")
        if self.dq_split and self.head_dim != 128:
            raise ValueError("AttentionBwdConfig: dq_split needs head_dim 128 (each "
                             "warpgroup's dQ columns whole 128-byte atoms of K; d 256 "
                             "splits every gradient by columns already)")

    @property
    def dq_rows(self):
        """dQ split by query rows between the consumer warpgroups (with
        ``block_m`` 128): consumer ``cw`` computes rows ``64 cw ..`` of the
        step's dQ, over all the CTA's keys."""
        return self.block_m == 2 * BLOCK_M

    @property
    def dq_transposed(self):
        """dQ computed transposed, dQ^T = K^T dS^T (``block_m`` 80: 80 query
        rows are no wgmma M): M = this consumer's 64 dQ columns, N = the
        step's queries."""
        return self.block_m == BLOCK_M80

    @property
    def ds_swizzle(self):
        """The dS^T tiles' swizzle: 128 bytes, or 32 at 80 queries (rows of
        160 bytes)."""
        return DS_SWIZZLE80 if self.block_m == BLOCK_M80 else SWIZZLE

    @property
    def score_n(self):
        """Queries of one consumer's S^T and dP^T: the step's, or with
        ``split_scores`` its half (queries ``score_n * cw ..``)."""
        return self.block_m // 2 if self.split_scores else self.block_m

    @property
    def shared_ds(self):
        """Each consumer's dQ GEMM reads both consumers' dS^T tiles
        (``dq_split``, ``dq_rows``): the tiles are double buffered and a
        barrier over both consumers hands them over."""
        return self.dq_split or self.dq_rows

    @property
    def row_stages(self):
        """Buffers of LSE rows (and of dPsum rows): with
        ``stats_with_tiles`` one per stage of Q (dO), else a ring of their
        own one stage deeper than Q's (``Rings``)."""
        return self.stages if self.stats_with_tiles else self.stages + 1

    @property
    def row_bytes(self):
        """One query block of LSE or dPsum (fp32)."""
        return self.block_m * 4

    @property
    def column_parts(self):
        """Consumer warpgroups that share one group of 64 keys, each owning
        ``part_cols`` columns of their dK, dV and dQ. 1 up to d = 128 (each
        warpgroup its own 64 keys, all d columns); 2 at d = 256, where one
        warpgroup's dK and dV accumulators over all 256 columns would take
        256 registers a thread: there both compute the keys' S^T and dP^T
        (the same values) and each its 128 columns of the gradients."""
        return 2 if self.head_dim == 256 else 1

    @property
    def part_cols(self):
        """dK, dV and dQ columns one consumer warpgroup computes."""
        return self.head_dim // self.column_parts

    @property
    def dq_cols(self):
        """dQ columns one consumer warpgroup computes and reduce-adds."""
        return self.head_dim // CONSUMER_WARPGROUPS if self.dq_split else self.part_cols

    @property
    def ds_buffers(self):
        """Buffers of the dS^T tiles (each all consumers' tiles): two with
        ``shared_ds``, so that a step's writes need not wait for the other
        warpgroup's dQ GEMM of the step before. With ``split_scores`` a
        buffer's two tiles are the shared P^T and dS^T."""
        return 2 if self.shared_ds or self.split_scores else 1

    @property
    def dq_buffers(self):
        """fp32 dQ tiles per consumer warpgroup (``dq_double_buffer``)."""
        return 2 if self.dq_double_buffer else 1

    @property
    def block_n(self):
        """Key rows per CTA: 64 per group of keys."""
        return WGMMA_M * CONSUMER_WARPGROUPS // self.column_parts

    @property
    def threads(self):
        return THREADS_PER_WARPGROUP * (1 + CONSUMER_WARPGROUPS)

    @property
    def name(self):
        return (f"attn_bwd_d{self.head_dim}{'_causal' if self.causal else ''}"
                f"_{self.block_n}x{self.block_m}_s{self.stages}{'_dqs' if self.dq_split else ''}"
                f"{'_dqo' if self.dq_overlap else ''}{'_dqw' if self.dq_store_spread else ''}"
                f"{'_dqd' if self.dq_deferred else ''}{'_mc' if self.min_ctas else ''}"
                f"{'_dqb' if self.dq_double_buffer else ''}{'_dkl' if self.dk_last else ''}"
                f"{'_pp' if self.pingpong else ''}{'_dqr' if self.dq_reduce_warp else ''}"
                f"{'_ds1' if self.ds_one_barrier else ''}{'_ssh' if self.stat_shuffle else ''}"
                f"{'_swt' if self.stats_with_tiles else ''}{'_pk' if self.p_packed else ''}"
                f"{'_lpt' if self.lpt_order else ''}{'_rf' if self.rows_first else ''}"
                f"{'_dqa' if self.dq_acc_order else ''}{'_sps' if self.split_scores else ''}"
                f"{'_dq1' if self.dq_one_part else ''}{'_shi' if self.shuffle_imm else ''}")

    # The operand layouts. Q and dO are read as the B operand of S^T / dP^T
    # (N x K: d contiguous) and, the same bytes, as the MN-major B of dK /
    # dV (K x N: query rows are that GEMM's K). K and V likewise: the A of
    # S^T / dP^T, and K the MN-major B of dQ.
    def q_layout(self):
        return OperandLayout("bf16", "K", SWIZZLE, self.block_m, self.head_dim)

    def q_mn_layout(self):
        return OperandLayout("bf16", "MN", SWIZZLE, self.block_m, self.head_dim)

    def kv_layout(self):
        return OperandLayout("bf16", "K", SWIZZLE, self.block_n, self.head_dim)

    def k_mn_layout(self):
        return OperandLayout("bf16", "MN", SWIZZLE, self.block_n, self.head_dim)

    def ds_layout(self):
        """One consumer's dS^T tile (its 64 keys x ``block_m`` queries,
        queries contiguous) as it writes it: a 64-row C tile."""
        return OperandLayout("bf16", "K", self.ds_swizzle, WGMMA_M, self.block_m)

    def ds_set_layout(self):
        """One buffer of the dS^T tiles: both consumers' keys as rows
        (consumer ``cw``'s 64 from row ``64 cw``), queries contiguous, in
        boxes of 64 queries. A consumer writes its ``ds_layout`` tile's box
        ``j`` at row ``64 cw`` of box ``j`` here (with 64 queries: the
        tiles one after the other)."""
        return OperandLayout("bf16", "K", self.ds_swizzle, CONSUMER_WARPGROUPS * WGMMA_M,
                             self.block_m)

    def ds_mn_layout(self):
        """The same bytes as the A operand of dQ = dS K: M (queries)
        contiguous, rows are K (keys): MN-major. With ``shared_ds`` one
        buffer's ``ds_set_layout`` whole, all 128 keys (consumer 1's keys
        from K slice 4; with ``dq_rows`` consumer ``cw`` reads the box of
        its 64 queries, ``mn_offset(64 cw)``). With ``dq_transposed`` the
        same bytes are dQ^T's B (K = keys, N = queries contiguous): MN-major
        too."""
        if self.shared_ds:
            return OperandLayout("bf16", "MN", self.ds_swizzle, self.block_n, self.block_m)
        return OperandLayout("bf16", "MN", SWIZZLE, WGMMA_M, self.block_m)

    def dq_layout(self):
        """One consumer's fp32 dQ tile (its ``dq_cols`` columns), the source
        of the TMA reduce-add: 64 query rows, or with ``dq_transposed``
        the step's (dQ^T stored transposed)."""
        rows = self.block_m if self.dq_transposed else WGMMA_M
        return OperandLayout("f32", "K", SWIZZLE, rows, self.dq_cols)

    def dkv_layout(self):
        """One consumer's 64 rows x ``part_cols`` columns of dK or dV
        (bf16), written over its part of the K or V tile and stored with
        TMA. (With two column parts a part's bytes are the K tile's boxes
        of its columns: the same 64-row, 128-byte-row boxes.)"""
        return OperandLayout("bf16", "K", SWIZZLE, WGMMA_M, self.part_cols)

    def smem_bytes(self):
        """Dynamic shared memory ``Rings`` allocates: K and V, the Q / dO and
        LSE / dPsum rings, per consumer a dS^T and a dQ tile, the barriers,
        and the arena's 1024-byte alignment slack."""
        kv = 2 * self.kv_layout().bytes
        rings = (self.stages * 2 * self.q_layout().bytes
                 + self.row_stages * 2 * self.row_bytes)
        per_consumer = CONSUMER_WARPGROUPS * (self.ds_buffers * self.ds_layout().bytes
                                              + self.dq_buffers * self.dq_layout().bytes)
        row_pipes = 0 if self.stats_with_tiles else 2 * self.stages + 2
        barriers = 8 * 2 * (1 + 2 * self.stages + row_pipes)
        return kv + rings + per_consumer + barriers + 1024

    def meta(self, kernel):
        """What the host launcher needs (ops/attention_bwd_host.py)."""
        return {"signature": [p.kind for _, p in kernel.params],
                "params": [name for name, _ in kernel.params],
                "smem": kernel.smem_bytes, "name": self.name, "head_dim": self.head_dim,
                "causal": self.causal, "block_m": self.block_m, "block_n": self.block_n,
                "threads": self.threads,
                **({"dq_acc_order": True} if self.dq_acc_order else {}),
                "layouts": {"q": self.q_layout().to_meta(), "kv": self.kv_layout().to_meta(),
                            "dq": self.dq_layout().to_meta(),
                            "dkv": self.dkv_layout().to_meta()}}
