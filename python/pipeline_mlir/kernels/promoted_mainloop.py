"""The FP8 GEMM's promoted mainloop with the promotion overlapped: k-block
kb's wgmma runs while k-block kb-1's partial sum is added into the fp32
total (``GemmConfig.promotion_overlap``; ``gemm_mainloop.mainloop_promoted``
is the plain one).

The plain promoted mainloop issues each k-block into one partial
accumulator and waits for it (``wait_group(0)``) before adding it: the
warpgroup's tensor-core work stops for every promotion, and only the other
consumer warpgroup's wgmma fill the gap. Here two partial accumulators
alternate: k-block kb is issued into ``part[kb % 2]``, then ``wait_group(1)``
retires k-block kb-1's group (kb's stays in flight), kb-1's stage is
released and ``part[(kb-1) % 2]`` is added into the total, as the fast
mainloop's ``wait_group(1)`` keeps one k-block in flight. The additions are
the plain mainloop's, in the same order (0 + p0 + p1 + ...), so the two
give the same bits.

The loop runs over pairs of k-blocks, so that each accumulator keeps its
registers: an accumulator a wgmma is still writing may not move, and
swapping the two through the loop's carried values would make ptxas copy
registers under an in-flight wgmma (or serialize the wgmma). The first
k-block is issued before the loop; where the rest are an odd count, the
last is the tail's. Costs one more accumulator's registers than the
plain mainloop: ``3 * N / 2`` fp32 a thread (the 128 x 128 tile: 192 of the
consumers' 232).
"""

from mlir.dialects import llvm

from pipeline_mlir.kernel import wgmma
from pipeline_mlir.kernel.fragment import Fragment


def pinned(frag):
    """``frag``'s values passed through an empty ``asm volatile`` that
    reads and writes them in place (CUTLASS's
    ``warpgroup_fence_operand``): what reads the result comes after the
    code before the asm, and what computed ``frag`` before the code after
    it, since LLVM keeps side-effecting asm in program order. Without it
    LLVM moved the promotion's adds past the next k-block's wgmma issue
    (into the loop's last block, where their sums are used), which keeps
    a retired partial alive beside the new one and makes ptxas copy and
    serialize the wgmma; and nothing kept them below the ``wait_group``
    that makes their operands valid (above it they would read a wgmma's
    registers in flight)."""
    count = frag.count
    constraints = ",".join(["=f"] * count + [str(i) for i in range(count)])
    return Fragment(frag.n, struct=llvm.inline_asm(frag.type, list(frag.values), "",
                                                   constraints, has_side_effects=True))


class OverlappedPromotion:
    """One tile's mainloop: ``OverlappedPromotion(k, ring, mma_k_block)(
    total, read, release, k_blocks)`` leaves the tile's sum in ``total``;
    ``read`` and ``release`` each advance ``k_blocks`` stages (k_blocks >= 1)."""

    def __init__(self, k, ring, mma_k_block):
        self.k, self.ring, self.mma_k_block = k, ring, mma_k_block

    def issue(self, read):
        """Wait for stage ``read`` and issue its k-block; returns the
        partial it writes (a new fragment). The wgmma is given an undefined
        accumulator, not a partial's old value (scale-d = 0 reads none):
        with the old value as its operand LLVM keeps that value alive in a
        copy wherever it places the adds that read it, and ptxas then
        serializes the wgmma and spills around the copies."""
        part = Fragment.undef(self.mma_k_block.mma.n)
        self.ring.consumer_wait(read)
        self.mma_k_block(part, read.index, accumulate=False)
        return part

    def retire_previous(self, done, total, read, release):
        """After the next k-block's issue (stage ``read``): once the
        previous k-block's group (the one that wrote ``done``) retires,
        release its stage and add ``done`` into ``total``."""
        # Release order: wait_group(1) retires every group but the one just
        # issued, which still reads stage `read`; stage `release` (the
        # previous k-block's) is read by no wgmma any more.
        wgmma.wait_group(1)
        self.ring.consumer_release(release)
        total += pinned(done)       # fp32 adds on the CUDA cores, under the wgmma
        total.set(pinned(total))    # ... and before the next k-block's issue
        read.advance()
        release.advance()

    def add_last(self, last, total):
        """Retire the last k-block's group and add it (its stage is released
        after, by the caller: outside the tail's branches, so that each
        branch waits for as many stages as it releases)."""
        wgmma.wait_group(0)
        total += pinned(last)

    def __call__(self, total, read, release, k_blocks):
        n = self.mma_k_block.mma.n
        total.zero()
        even, odd = self.issue(read), Fragment.undef(n)
        read.advance()
        k = self.k
        for _, _ in k.range((k_blocks - 1) // 2, carry=[read, release, total, even, odd]):
            odd.set(self.issue(read))
            self.retire_previous(even, total, read, release)
            even.set(self.issue(read))
            self.retire_previous(odd, total, read, release)
        # An even count of k-blocks leaves one more, into a partial of the
        # tail's own (`odd`'s registers are free: its group retired). Each
        # branch reads `even` through a fragment of its own: a Fragment
        # caches the values it extracted, and those of one branch do not
        # exist in the other.
        last = even.ir_value
        with k.if_((k_blocks - 1) % 2 == 1, carry=[read, release, total]) as tail:
            tail_part = self.issue(read)
            self.retire_previous(Fragment(n, struct=last), total, read, release)
            self.add_last(tail_part, total)
        with tail.else_():
            self.add_last(Fragment(n, struct=last), total)
        self.ring.consumer_release(release)     # the last k-block's stage
        release.advance()
