"""The FP8 attention forward's configurations: what
``pipeline_mlir.attention_fp8`` runs per head dim and causality
(``variant``), and every one of them (``VARIANTS``, what the kernel cache
builds in family ``attention_fwd``, dtype ``e4m3``). Pure Python: the
benchmarks' bundle builder reads it where torch is not installed.

Each is the bf16 forward's structure (two ping-pong consumer warpgroups of
64 query rows, intra-warpgroup overlap) on e4m3 operands, with more K/V
stages than bf16 fits (the operands take half the bytes):

- d 128: 192-key blocks (V^T in three 64-byte swizzled boxes), three stages
  (176 KiB). On an H200 (run 2 of docs/attention.md, "FP8 forward"), same
  process, alternating rounds, against 128-key blocks with three stages:
  +3% to +13% on the 4 rows (b 2-4, s 8192-16384, full and causal); 256-key
  blocks and three consumer warpgroups spill registers. Some softmax
  exponentials by the polynomial on the FMA pipe (``exp2_poly``: MUFU's ex2
  bounds this head dim), 4 of every 16 in full attention (5 with the
  rescale threshold since run 8, below), 3 causal: on an
  H200, runs 3 to 6, each faster than all on MUFU on every row (+1% to
  +13%); 4 ahead of 3 on 6 of the 8 full rows, 3 ahead of 4 on 5 of the 8
  causal ones (mean +1.3% and +2.3%). 2 and 6 of 16, and P V's retirement
  held after the softmax (``hold_pv_wait``) with and without the
  polynomial, measured behind (the hold ahead on 1 row of 4 in run 6).
  Those shares are of the f32 polynomial; the defaults since runs 14 and
  15 (below) take it on f16 pairs: with the LSE 8 of 16 full and 4 causal,
  without it 6 and 5.
- d 256: 128-key blocks (one 128-byte box row of V^T), three stages with one
  Q buffer (225 KiB); causal two stages with two Q buffers since run 12
  (below). Against two stages with two Q buffers the two runs
  disagree (run 1: +1% to +11% on the 4 rows; run 2: -0.4% to -2%): a
  difference within what changes between machines. Full attention also
  takes 2 of 16 exponentials by the polynomial and holds P V's retirement
  after the softmax: run 6, +2.3% and +4.8% over neither (run 5, with the
  hold's first form: +4% and +7%); causal takes neither (the hold alone
  behind on the 4 rows of runs 5 and 6, with 2 of 16 ahead on 1 of 4).
  Since run 16 (below) both take the polynomial on f16 pairs: full on its
  2 of 16, causal 4 of 16.

O's rescale only where a row max grows by more than 2^8
(``rescale_threshold=8``; run 8 of docs/attention.md's "FP8 forward", one
H200 machine, four passes): at d 256 on in both modes, +4% to +8% on all 4
rows in every pass; at d 128 full with 5 of 16 exponentials by the
polynomial (it frees issue slots, which the fifth polynomial value takes):
+0.4% to +1.6% at 8192 and +4% to +6% at 16384 over 4 of 16 without it,
every pass. At d 128 causal no combination was faster on both rows (the
rescale with 3 of 16: -0.3% to -0.8%), so causal is unchanged.

d 128 full also takes the degree-2 polynomial (``exp2_poly_degree=2``)
and P's e4m3 registers packed as halves (``p_pack_merge``: no PRMT): run 9
of docs/attention.md's "FP8 forward" (one H200 machine, two passes),
+2.0% to +5.5% on both rows (865-894 TFLOP/s). Causal took neither until
run 15 (below: the packing with the f16 pairs): the packing alone was 6-9%
behind there, the polynomial's degree 2 behind at 8192 in both passes.

The row sum of P on the tensor pipe (``row_sum_mma``) with the degree-2
polynomial (``exp2_poly_degree=2``) was faster at d 128 (run 9 of
docs/attention.md's "FP8 forward", one H200 machine: full +8% to +11%,
causal +2% to +10%) but is on in none that returns the LSE: its sum is of P
as rounded to e4m3,
and on rows that few keys dominate (causal, 1000 and 4096 keys) the LSE
was 0.019-0.021 off, over the check's 0.01 (O within its bound).

Where the caller does not ask for the LSE (``attention_fp8``'s default,
``return_lse=False``), d 128 runs its own configuration (``variant(d,
causal, lse=False)``, names ending ``_nolse``, separate cache entries): the
row sum on the tensor pipe (``row_sum_mma``). Its sum is of P as rounded
to e4m3, the very weights P V multiplies V by, so O (P V over that sum)
stays within the FP8 check's bound, while the LSE does not on rows that
few keys dominate (the kernel still stores an LSE there; the op does not
return it). Run 10 of docs/attention.md's "FP8 forward" (one H200
machine, two passes): full on the LSE configuration's 5 of 16 and
threshold, without the packing as halves (+7% at 8192, +10% at 16384
over the LSE kernel; 937-945 TFLOP/s; 4 of 16 and the packing as halves
not faster on both rows), causal on its 3 of 16 with the packing as
halves (+4.5% to +8%; 774-858 TFLOP/s in three passes; ahead of 4 of 16
with the packing by 1.6-3.7% on both rows in passes 1 and 2, mixed in a
third). At d 256 the LSE
configurations serve both. Run 11 (one H200 machine, four passes in two
bundles): causal also takes the rescale threshold (+1.2% to +8.8% over
run 10's no-LSE kernel on both rows in every pass; 764-856 TFLOP/s); full
is unchanged (P converted before P V's wait, ``double_p``, with 3 or 5
of 16 and the packing as halves, within -1.5% to +3% of it, not ahead on
both rows in every pass).

Run 12 (one H200 machine, ten passes in four bundles): both d 128
no-LSE configurations fold the row sum into P V (``row_sum_fold``: the
ones as 8 more rows of every V^T box in the V stages, P V one m64n136k32
wgmma per k-slice instead of an m64n128 and an m64n8; the same sum of
e4m3-rounded P, so the LSE stays off them). Full: +0.8% to +3.4% over run
11's no-LSE kernel on both rows in all four passes of the first two
bundles (916-952 TFLOP/s). Causal: ahead on both rows in five of the
seven passes (+0.7% to +3.1%), 0.9% and 2.1% behind at 16384 in the
other two (one bundle), +1.3% on average (773-868 TFLOP/s). d 256
causal takes two Q buffers with two K/V stages (``q_stages=2,
stages=2``: the next tile's Q loaded while this one finishes): +1.6% to
+3.4% by the ratio over rounds on both causal rows in all eight passes
that timed it (992-1040 TFLOP/s at 8192 in the last two bundles, the
configuration before 951-1007); in full attention it was behind in 9 of
10 measurements (0.988-0.999), so full keeps one Q buffer and three
stages. Part of P converted before P
V's wait (``p_early=3``), all of it (``double_p``), 4 or 6 of 16 by the
polynomial on the fold, and causal heads in L2-sized sections
(``l2_sections``, at d 128 and 256: 9-15% slower) were not faster on
every row.

Run 14 (one H200 machine, two passes): d 128 full without the LSE takes
6 of 16 exponentials by the polynomial on f16 pairs (``exp2_poly_half``,
two values of P per f16x2 instruction, from P packed as halves): +3.9% to
+5.2% over run 12's folded kernel on both rows in both passes (962-978
TFLOP/s); 4 and 8 of 16 were within -1.4% to +0.8%. Causal keeps its
configuration: 6 of 16 there was 0.6% behind at 8192 in one pass.

Run 15 (one H200 machine, two passes): the polynomial on f16 pairs takes
odd shares (its pairs spread over 32 values) and serves the configurations
that return the LSE (the FMA pipe's row sum adds the pairs on f16x2,
``exponentials.half_row_sums``). d 128 causal without the LSE takes 5 of 16
on f16 pairs: +3.1% to +10.4% over run 12's folded kernel on both rows in
both passes (769-896 TFLOP/s; 4, 6 and 7 of 16 also ahead, by less on
average). With the LSE, full takes 8 of 16 on f16 pairs (+6.5% to +10.8%
over 5 of 16 in f32 on both rows in both passes; 6 of 16 +6.5% to +9.6%)
and causal 4 of 16 with the packing as halves (+4.4% to +6.5% over 3 of 16
in f32; 8 of 16 +0.8% to +6.8%, 6 of 16 behind at 8192); their LSE within
6.4e-4 (full) and 2.5e-3 (causal) of fp32's on the check shapes, under the
check's 0.01. d 128 full without the LSE keeps 6 of 16 (5 and 7 of 16
within -1.5% to +1.7%).

Run 16 (one H200 machine, two passes): d 256 takes the polynomial on f16
pairs (``exp2_poly_half`` with the packing as halves; the FMA pipe's row
sum adds the pairs on f16x2): full on its 2 of 16 (+3.2% to +3.9% over 2
of 16 in f32 on both rows in both passes, 1152-1179 TFLOP/s; 4 of 16
+0.9% to +2.3%, 6 of 16 behind), causal 4 of 16 (+2.3% to +3.5% over none
by the polynomial, 1046-1153 TFLOP/s; 2 of 16 even, 6 of 16 behind). P
V's wait held after the exponentials at d 128 (``hold_pv_on_p`` on the
no-LSE kernels, ``hold_pv_wait`` on the LSE ones) and on d 256 causal was
3-10% behind on every row: on in none.

Run 18 (one H200 machine, two passes): d 128 causal without the LSE
converts P's first 3 k-slices of 6 before P V's wait and holds the wait
on their e4m3 registers (``p_early=3, hold_pv_on_e4m3``: half the
softmax and its conversions under that GEMM): +2.6% to +4.5% over run
15's kernel on both rows in both passes (777-887 TFLOP/s). Full attention
keeps its kernel (the same hold 0.985-1.001 of it; every other hold,
on P's exponentials in part, on all of P converted, or on the last
register converted alone, ``hold_pv_last``, behind or even).

Run 19 (one H200 machine, two passes): both d 128 no-LSE configurations
hold on p_early's 3 k-slices with 4 of 16 exponentials by the polynomial
on f16 pairs (full: the hold and 4 of 16 where run 18's kernel had
neither and 6 of 16; causal: 4 of 16 where it had 5). The hold runs half
of the exponentials under P V, and 4 of 16 gives 6 f16 pairs a block back
to MUFU: the full loop 761 SASS instructions (773 without the hold on 6
of 16, 809 with it). Full +1.6% to +2.1% over run 18's kernel on both
rows in both passes (982-999 TFLOP/s), causal +0.04% to +8.1% (828-912;
the 8192 row +1.6% and +0.04%). The hold with 5 of 16 (full +0.5% to
+1.3%), on all 16 registers of 4 k-slices (causal: behind it on 3 of the
4 measurements) and on the last 4 registers of 3 or 4 k-slices were
behind it.

Run 20 (one H200 machine, two passes): d 128 full without the LSE keeps
the hold and takes 2 of 16 on f16 pairs (``nhp8e3p2``; the loop 712 SASS
instructions, 761 on 4 of 16): +2.1% / +2.5% at 8192 and +1.0% / +0.7%
at 16384 by the ratio over rounds over run 19's kernel (999-1013
TFLOP/s); 3 of 16 also ahead (1.007-1.034), its median TFLOP/s below 2
of 16's on all four. Causal keeps 4 of
16 (2 of 16 0.999 and 1.004 at 8192, +2.8% to +6.1% at 16384; the hold on
4 k-slices, alone or on 3 of 16, behind at 8192). The no-LSE hold on the
LSE configurations (``lhp8e3p4``, ``lhp8e3p6``: its row sum on the FMA
pipe reads every exponential, so ptxas waits after all of them) 10-16%
behind the no-LSE kernel, and 0-9% behind the LSE one (even once).

P converted before the held wait (``double_p``, with ``hold_pv_wait``;
run 7 of docs/attention.md's "FP8 forward", one H200 machine, two
passes) is on in none: with no, 2, 3 or 4 of
16 exponentials by the polynomial it was faster than these on every row
of no head dim and mode (d 128: up to +8% on 16384 full, -1% to -7% on the
other rows; d 256: -4% to +2%).
"""

HEAD_DIMS = (128, 256)
DTYPE = "e4m3"
TUNED = {128: dict(block_n=192, stages=3, exp2_poly=4),
         256: dict(q_stages=1, stages=3, rescale_threshold=8.0)}
# (head dim, causal) -> overrides on top of TUNED (measured per mode).
TUNED_MODE = {(128, False): dict(exp2_poly=8, rescale_threshold=8.0, exp2_poly_degree=2,
                                 p_pack_merge=True, exp2_poly_half=True),
              (128, True): dict(exp2_poly=4, p_pack_merge=True, exp2_poly_half=True),
              (256, False): dict(exp2_poly=2, hold_pv_wait=True, p_pack_merge=True,
                                 exp2_poly_half=True),
              (256, True): dict(q_stages=2, stages=2, exp2_poly=4, p_pack_merge=True,
                                exp2_poly_half=True)}
# (head dim, causal) -> overrides on top of TUNED and TUNED_MODE where the
# caller does not ask for the LSE (runs 10 to 15, 18 to 20; the head dims
# not here: the LSE configuration).
TUNED_NO_LSE = {(128, False): dict(row_sum_mma=True, row_sum_fold=True, exp2_poly=2,
                                    p_pack_merge=True, exp2_poly_half=True, p_early=3,
                                    hold_pv_on_e4m3=True),
                (128, True): dict(row_sum_mma=True, exp2_poly_degree=2, p_pack_merge=True,
                                  rescale_threshold=8.0, row_sum_fold=True, exp2_poly=4,
                                  exp2_poly_half=True, p_early=3, hold_pv_on_e4m3=True)}


def variant(head_dim, causal, lse=True):
    """(name, AttentionConfig overrides, without the dtype) of the FP8
    forward for this head dim and causality; ``lse=False``: where the
    caller does not ask for the LSE (``TUNED_NO_LSE``, name ``..._nolse``;
    the LSE one where the head dim has none)."""
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"attention_fp8: head_dim must be one of {HEAD_DIMS}, got {head_dim}")
    key = (head_dim, bool(causal))
    no_lse = not lse and key in TUNED_NO_LSE
    return (f"fp8_d{head_dim}{'c' if causal else ''}{'_nolse' if no_lse else ''}",
            {"head_dim": head_dim, "causal": bool(causal), **TUNED[head_dim],
             **TUNED_MODE.get(key, {}), **(TUNED_NO_LSE[key] if no_lse else {})})


VARIANTS = dict(variant(d, c, lse) for d in HEAD_DIMS for c in (False, True)
                for lse in (True, False))
