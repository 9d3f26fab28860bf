"""Stream-K (``choose_stream_k``, ``<tile>_streamk`` variants): one launch in
which the waves the tiles fill whole run as data-parallel tiles and the
rest (the leftover, all tiles when there are fewer than SMs, or for a
small leftover the leftover and the last full wave: ``stream_k_launch``)
is cut into equal runs of K blocks, one per CTA; the CTAs that
share a tile leave fp32 partials in a workspace and the tile's last
contributor in K order waits for them and adds them to its own
accumulator (bitwise the same every run). It removes the part-empty
last wave of any shape at the price of writing and reading partial tiles;
``estimate_time_stream_k`` models both, and the pick takes stream-K where
the model says it beats the plain pick by ``STREAM_K_MARGIN``.

This module holds the launch (``stream_k_launch``: the host and the pick
both call it), the time model of a stream-K variant
(``estimate_time_stream_k``) and when a pick takes the shared fix-up
(``share_fixup``); the pick itself and its margins are
``gemm_configs.choose_stream_k``'s. Callers import these names from
``gemm_configs``, which re-exports them.
"""

import math

from .gemm_cost import K_BLOCK, TILE_S, block_time, units_per_wave
from .gemm_variants import tile, variant_unit_tiles

# -- the time model of stream-K -----------------------------------------------------
# A stream-K run costs, besides its K blocks: a fixed part (its extra
# units' pipeline fill, the arrival's fences and atomic, the last
# contributor's wait for the others) and one partial tile's write or read
# per piece and two more (128x256: 128 KiB of fp32). Fitted with the plain
# model's constants on their H200 run (gemm_cost.EFFICIENCY: run2). Not
# refitted after the last contributor stopped storing and re-reading its
# own partial (docs/gemm.md, "The last contributor adds the partials":
# 3-5 us less a run): lower
# constants turn 5648 x 216 x 8832 to 192x128_streamk, measured 0.77-0.80x
# cuBLAS there against the plain 128x128's 0.89-0.90x (an L2 cost of the
# runs the model does not have).
STREAM_K_FIXED_S = 10e-6
SLOT_S = 1.3e-6              # a 128x256 tile's partial (scaled by area)
# The spread launch only for a leftover of at most a quarter of the wave
# (runs of at most 1.25 tiles). Measured on an H200 (docs/gemm.md, run8),
# spread against leftover in one process: 1.09-tile runs 2-3% faster
# (4544 x 1008 x 7784), 1.33 even (2040 x 2752 x 6744), 1.61-1.97 2-5%
# slower and 1.77 on the one-CTA 128x256 18% slower (1024 x 11008 x 4096,
# 592 x 9560 x 3864, 1048 x 6504 x 11408): long runs put the CTAs that
# share an operand block at different K, so L2 keeps less of it.
SPREAD_LEFTOVER = 4
# Whether the model's launch may take the even kind (stream_k_launch):
# after at least one full wave, for a leftover of more than half the wave
# (one whole piece a tile: the leftover kind is no stream-K at all there).
# Measured on an H200 in one process (docs/gemm.md, "Run10"), against the
# leftover kind of the same kernel (bf16 and fp16): 1416 x 7160 x 7256 on
# the 2-CTA 128x256 tile (36 of 66 pairs left over after two rounds)
# 0.89x as long, 1048 x 6504 x 11408 on 192x192c2 0.81x, 592 x 9560 x
# 3864 on 128x256c2 0.98x; with no full wave before it (5648 x 216 x 8832:
# 90 tiles of 128x128 on 132 SMs) 1.16-1.17x: every CTA reads A at
# another K from its first block on.
AUTO_EVEN = True
# A whole-tile round of a stream-K launch against a wave of the plain tile
# (estimate_time_stream_k). Measured on an H200 (docs/gemm.md, "Run10"):
# the stream-K kernels' whole tiles ran 1.07x the plain kernel's (whole
# waves, no stream-K run: 5760 x 8448 x 4096 and 8448 x 5120 x 4096) until
# the counter wait stopped diverging (kernel/arrival_counter._poll), then
# 0.98-1.04x; over the seven shapes of 7 to 28 rounds, every kind of
# launch, the stream-K launches ran a median 0.99-1.03x the plain tile's
# time where the model without this said 0.97-1.0x.
STREAM_K_ROUND = 1.02


def stream_k_run_time(variant, sk_tiles, k_blocks, sk_ctas, k=K_BLOCK):
    """Modelled seconds of the stream-K run: ``sk_tiles`` tiles' K blocks
    shared equally by ``sk_ctas`` CTAs (as many: one whole tile each, no
    partial). Its cost besides the longest run's K blocks (and a tile's
    fill for each whole tile inside a run): the fixed part, and the
    partial tiles written and read, ``contributors + 3`` of them, where
    ``contributors`` is the most CTAs sharing one tile (the last one
    reads the others')."""
    bm, bn = tile(variant)
    if sk_ctas == sk_tiles:
        return k_blocks * block_time(variant, k) + TILE_S
    blocks = -(-sk_tiles * k_blocks // sk_ctas)
    contributors = -(-sk_ctas // sk_tiles) + (1 if sk_ctas % sk_tiles else 0)
    return (blocks * block_time(variant, k) + blocks // k_blocks * TILE_S + STREAM_K_FIXED_S
            + (contributors + 3) * SLOT_S * bm * bn / (128 * 256))


# The shared fix-up (``<tile>_streamk_share``): each contributor stores its
# partial and reads one partial's worth (its share of every contributor's),
# so the partial traffic per SM does not grow with the pieces; each piece
# costs a share of the wait and a dependent load per 16 bytes of a share.
SHARE_SLOTS = 3
SHARE_PIECE_S = 0.1e-6


def stream_k_share_run_time(variant, sk_tiles, k_blocks, sk_ctas, k=K_BLOCK):
    """``stream_k_run_time`` of the shared fix-up (``sk_ctas`` a multiple
    of ``sk_tiles``: one segment a run)."""
    bm, bn = tile(variant)
    pieces = sk_ctas // sk_tiles
    if pieces == 1:
        return k_blocks * block_time(variant, k) + TILE_S
    blocks = -(-k_blocks // pieces)
    return (blocks * block_time(variant, k) + STREAM_K_FIXED_S + pieces * SHARE_PIECE_S
            + SHARE_SLOTS * SLOT_S * bm * bn / (128 * 256))


def stream_k_launch(tiles, k_blocks, sms, variant="128x256", spread=None, share=False):
    """``(grid, sk_ctas, rounds)`` of a stream-K launch, the one of least
    modelled time of three kinds:

    - *leftover*: every full wave runs whole tiles (``rounds = tiles //
      sms``), and the ``tiles % sms`` left over are cut into the number of
      pieces each (at most ``sms // leftover``, at most a K block each) of
      least ``stream_k_run_time``: ``sk_ctas = leftover x pieces``;
    - *spread* (at least one full wave, a leftover of at most ``sms /
      SPREAD_LEFTOVER``): the last full wave joins the leftover, and every
      CTA shares the ``sms + leftover`` tiles' K blocks (``rounds = tiles
      // sms - 1``, ``sk_ctas = sms``): runs of one to 1.25 tiles, so a
      tile has at most two contributors, where a leftover much smaller
      than the wave cuts each of its tiles into many pieces whose partials
      one SM then reads back (4544 x 1008 x 7784 on the 2-CTA 128x256
      tile: 6 pairs over 66 clusters, nine pieces each).

    - *even* (after at least one full wave, a leftover of more than half
      the wave, ``AUTO_EVEN``): every full wave runs whole tiles and every
      CTA of the wave shares the leftover's K blocks (``sk_ctas = sms``,
      at most one a K block): runs of ``leftover / sms`` of a tile, at
      most two segments (so at most two contributors a tile), where the
      leftover kind's whole pieces leave SMs idle (102 of 132 left over:
      one piece each, no stream-K run at all). ``spread="even"``: that
      kind whatever the model says (``random_sweep.py``'s ``@even``).

    One CTA per SM (fewer tiles than SMs: the stream-K CTAs alone). With
    no tiles left over, ``sk_ctas`` is 1 and unused. The host and the pick
    both call this (the same numbers). ``spread`` True / False: that kind
    wherever there is a full wave (to measure one beside the other:
    random_sweep.py's ``<variant>@spread`` candidates).

    ``share``: the launch of a shared fix-up variant (``sk_share``): the
    leftover kind only (every run one segment), its pieces by
    ``stream_k_share_run_time``."""
    rounds, rest = divmod(tiles, sms) if tiles >= sms else (0, tiles)
    if rest == 0:
        return sms, 1, rounds
    most = max(1, min(sms // rest, k_blocks))
    if share:
        pieces = min(range(1, most + 1), key=lambda p: (
            stream_k_share_run_time(variant, rest, k_blocks, rest * p), -p))
        return (sms if tiles >= sms else rest * pieces), rest * pieces, rounds
    if spread == "even":
        sk_ctas = min(sms, rest * k_blocks)
        return (sms if tiles >= sms else sk_ctas), sk_ctas, rounds
    pieces = min(range(1, most + 1),
                 key=lambda p: (stream_k_run_time(variant, rest, k_blocks, rest * p), -p))
    best = (stream_k_run_time(variant, rest, k_blocks, rest * pieces), rest * pieces, rounds)
    even = min(sms, rest * k_blocks)
    if spread is None and AUTO_EVEN and rounds >= 1 and pieces == 1 and even > rest:
        t = stream_k_run_time(variant, rest, k_blocks, even)
        if t < best[0]:
            best = (t, even, rounds)
    if rounds >= 1 and (spread or (spread is None and rest * SPREAD_LEFTOVER <= sms)):
        t = (stream_k_run_time(variant, rest + sms, k_blocks, sms)
             - (k_blocks * block_time(variant, K_BLOCK) + TILE_S) * STREAM_K_ROUND)
        if t < best[0] or spread:
            best = (t, sms, rounds - 1)
    _, sk_ctas, rounds = best
    return (sms if tiles >= sms else sk_ctas), sk_ctas, rounds


def is_even_launch(tiles, k_blocks, sms, variant="128x256"):
    """Whether the model's stream-K launch of ``tiles`` units is the even
    kind (stream_k_launch): whole rounds, then every CTA of the wave shares
    the leftover."""
    rounds, rest = divmod(tiles, sms)
    if rounds == 0 or rest == 0:
        return False
    _, sk_ctas, r = stream_k_launch(tiles, k_blocks, sms, variant)
    return r == rounds and sk_ctas == min(sms, rest * k_blocks) and sk_ctas % rest != 0


def stream_k_grid(tiles, k_blocks, sms, variant="128x256", share=False):
    """The grid of a stream-K launch (``stream_k_launch``)."""
    return stream_k_launch(tiles, k_blocks, sms, variant, share=share)[0]


def stream_k_plan(tiles, k_blocks, sms, variant="128x256", spread=None, share=False):
    """``(rounds, stream-K tiles, sk_ctas)``, as
    kernel/tile_scheduler.StreamKSchedule runs them on this launch."""
    grid, sk_ctas, rounds = stream_k_launch(tiles, k_blocks, sms, variant, spread, share)
    return rounds, tiles - rounds * grid, sk_ctas


def stream_k_units(variant, m, n, sms):
    """``(units, units a wave)`` of the stream-K launch of tile ``variant``:
    tiles, or a cluster's tiles (a pair along M or N, or 2x2:
    ``gemm_variants.unit_tiles``), and the units that run at once
    (``gemm_cost.units_per_wave``)."""
    bm, bn = tile(variant)
    along_m_tiles, along_n_tiles = variant_unit_tiles(variant)
    units = math.ceil(m / (bm * along_m_tiles)) * math.ceil(n / (bn * along_n_tiles))
    return units, units_per_wave(variant, sms)


def estimate_time_stream_k(variant, m, n, k, sms):
    """Modelled seconds of the stream-K variant of tile ``variant``: its
    whole-tile rounds, then the stream-K run (a cluster's units are its
    tiles, ``stream_k_units``; ``units_per_wave`` of them a wave)."""
    kb = math.ceil(k / K_BLOCK)
    units, wave = stream_k_units(variant, m, n, sms)
    rounds, rest, sk_ctas = stream_k_plan(units, kb, wave, variant)
    t = rounds * (kb * block_time(variant, k) + TILE_S) * STREAM_K_ROUND
    if rest:
        t += stream_k_run_time(variant, rest, kb, sk_ctas, k)
    return t


# The shared fix-up where each tile has at least this many contributors
# (share_fixup). Measured on an H200 (docs/gemm.md, "The shared fix-up"),
# the kernels alone in CUDA graphs beside the last-contributor fix-up:
# 4, 9 and 12 tiles of 128x128 on 132 SMs (30, 14 and 11 contributors a
# tile) ran 14.1-17.1 us against 18.8-21.5; 12 tile pairs of the 2-CTA
# 128x256 tile on 66 clusters (5 contributors) 34.4-34.6 against 33.4-33.6,
# and a one-wave leftover of 6 pairs (4544 x 1008 x 7784, the leftover
# kind) 122.9-126.9 against the spread launch's 123.5-125.2: even there.
SHARE_MIN_PIECES = 8


def share_fixup(tiles, k_blocks, sms):
    """Whether a stream-K pick of ``tiles`` units (tiles, or a cluster's
    tile pairs) with ``k_blocks`` K blocks on a wave of ``sms`` takes the
    shared fix-up: fewer tiles than the wave (no whole-tile round) and at
    least ``SHARE_MIN_PIECES`` contributors a tile (``sms // tiles``, at
    most one a K block), where the last contributor would read that many
    partials on one SM."""
    return tiles < sms and min(sms // tiles, k_blocks) >= SHARE_MIN_PIECES

