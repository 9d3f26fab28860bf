"""Synchronization mistakes planted in the library's attention forward
(pipeline_mlir/kernels/attention_fwd/), each a wrong version of one of
its stages: ``build(cfg, stages=STAGES_WITH[name])`` builds the kernel with
that stage replaced. The kernel holds no mistake of its own; these are
what the protocol checker and the simulator must reject
(test_attention_protocol.py).

Each wrong stage is its correct twin with one release moved (or, for the
ping-pong, one barrier id changed), so the kernel around the mistake is the
production one.
"""

from dataclasses import replace

from pipeline_mlir.kernel import wgmma
from pipeline_mlir.kernel.fragment import Fragment
from pipeline_mlir.kernel.values import Scalar
from pipeline_mlir.kernels import attention_fwd
from pipeline_mlir.kernels.attention_fwd import STAGES, Mainloop, PingPong


class KReleasedBeforeSRetired(Mainloop):
    """Block 0 hands its K stage back right after issuing S_0, before
    ``wait_group`` retired it: TMA may overwrite K under the S GEMM."""

    def first_block(self, states, q_desc, acc, softmax, m_row0, n_free):
        _, k_read, _ = states
        pipe_k = self.rings.k.pipe
        s_acc = Fragment.undef(self.cfg.kv_block)
        pipe_k.consumer_wait(k_read)
        self.turns.begin()
        self.issue_s(s_acc, k_read.index, q_desc)
        self.turns.end()
        pipe_k.consumer_release(k_read)      # wrong: S_0 still reads it
        wgmma.wait_group(0)
        k_read.advance()
        p, _ = softmax(s_acc, acc, Scalar(0), m_row0, Scalar(0) >= n_free, first=True)
        return p.to_operand_a("bf16")


class QRearmedWhileRead(Mainloop):
    """Q's stage is handed back after the tile's first S GEMM is issued
    (and not at the tile's end): the producer may load the next tile's Q
    over it while this tile's S GEMMs still read it."""

    def first_block(self, states, q_desc, acc, softmax, m_row0, n_free):
        q_read, k_read, _ = states
        pipe_k = self.rings.k.pipe
        s_acc = Fragment.undef(self.cfg.kv_block)
        pipe_k.consumer_wait(k_read)
        self.turns.begin()
        self.issue_s(s_acc, k_read.index, q_desc)
        self.turns.end()
        self.rings.q.pipe.consumer_release(q_read)    # wrong: S GEMMs read Q
        wgmma.wait_group(0)
        pipe_k.consumer_release(k_read)
        k_read.advance()
        p, _ = softmax(s_acc, acc, Scalar(0), m_row0, Scalar(0) >= n_free, first=True)
        return p.to_operand_a("bf16")

    def release_q(self, q_read):
        """Released already (in ``first_block``)."""


class VReleasedBeforePvRetired(Mainloop):
    """In the overlapped blocks, V_{j-1}'s stage is handed back after the
    softmax but before ``wait_group(0)`` retired P_{j-1} V_{j-1}."""

    def overlapped_block(self, states, j, q_desc, acc, p_regs, corr, softmax, m_row0,
                         n_free):
        _, k_read, v_read = states
        pipe_k, pipe_v = self.rings.k.pipe, self.rings.v.pipe
        s_acc = Fragment.undef(self.cfg.kv_block)
        pipe_k.consumer_wait(k_read)
        self.turns.begin()
        self.issue_s(s_acc, k_read.index, q_desc)
        acc.o.set(acc.o * corr)
        pipe_v.consumer_wait(v_read)
        self.issue_pv(acc.o, p_regs, v_read.index)
        self.turns.end()
        wgmma.wait_group(1)
        pipe_k.consumer_release(k_read)
        k_read.advance()
        p, new_corr = softmax(s_acc, acc, j, m_row0, j >= n_free, first=False)
        pipe_v.consumer_release(v_read)      # wrong: P V still reads it
        wgmma.wait_group(0)
        v_read.advance()
        corr.set(new_corr)
        p_regs.set(p.to_operand_a("bf16"))


class PingPongBarriersCrossed(PingPong):
    """Each consumer warpgroup waits on the next one's barrier id (and
    still arrives there): each id is reached by one warpgroup only.
    (Swapping both ids would be a correct ping-pong in which warpgroup 1
    goes first.)"""

    def ids(self, cw, wgs):
        _, other = super().ids(cw, wgs)
        return other, other


STAGES_WITH = {
    "k_released_before_s_retired": replace(STAGES, mainloop=KReleasedBeforeSRetired),
    "v_released_before_pv_retired": replace(STAGES, mainloop=VReleasedBeforePvRetired),
    "pingpong_barriers_crossed": replace(STAGES, pingpong=PingPongBarriersCrossed),
    "q_rearmed_while_read": replace(STAGES, mainloop=QRearmedWhileRead),
}


def build_with_mistake(name, cfg=attention_fwd.AttentionConfig()):
    """The attention kernel for ``cfg`` with mistake ``name`` planted."""
    return attention_fwd.build(cfg, stages=STAGES_WITH[name])
