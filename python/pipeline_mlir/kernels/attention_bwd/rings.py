"""Stage: the backward's shared-memory plan and the pipelines over it
(``Rings``).
"""

from pipeline_mlir.kernel.ring import Ring
from pipeline_mlir.pipeline import Agent, CooperativeGroup

from .config import CONSUMER_WARPGROUPS


class Rings:
    """The shared memory of a CTA (``AttentionBwdConfig.smem_bytes`` bounds
    it for the limit check) and the pipelines over it: K and V together
    (``kv``, one stage, loaded once), the rings of Q, LSE, dO and dPsum
    (``q``, ``lse``, ``do``, ``dpsum``), and per consumer warpgroup a dS^T
    tile (``ds``; two buffers of them with ``shared_ds``) and an fp32 dQ tile
    (``dq``). Each ring holds its stage count (``Ring``): its buffers, its
    barriers and every pipeline state over it follow it."""

    def __init__(self, k, cfg):
        kv_layout, q_layout = cfg.kv_layout(), cfg.q_layout()
        ds_layout, dq_layout = cfg.ds_layout(), cfg.dq_layout()
        stages = cfg.stages
        # LSE and dPsum rings one stage deeper than Q and dO: tiny, and a
        # state of another stage count is a state of its own for the
        # checker and the simulator, which otherwise take the same stage of
        # every ring a state indexes to be read by the GEMMs of any of them.
        row_stages = stages + 1
        # K then V, one stage.
        self.kv = Ring(k, 1, 2 * kv_layout.bytes, align=kv_layout.alignment, name="K and V")
        self.q = Ring.of_layout(k, stages, q_layout, "Q ring")
        self.do = Ring.of_layout(k, stages, q_layout, "dO ring")
        self.lse = Ring(k, row_stages, cfg.row_bytes, align=128, name="LSE ring")
        self.dpsum = Ring(k, row_stages, cfg.row_bytes, align=128, name="dPsum ring")
        self.ds = k.smem_alloc(cfg.ds_buffers * CONSUMER_WARPGROUPS * ds_layout.bytes,
                               align=ds_layout.alignment, name="dS tiles")
        self.dq = k.smem_alloc(cfg.dq_buffers * CONSUMER_WARPGROUPS * dq_layout.bytes,
                               align=dq_layout.alignment, name="dQ tiles")

        self.one = CooperativeGroup(Agent.Thread, 1)
        # Every consumer warp releases a stage once.
        consumers = CooperativeGroup(Agent.Thread, 4 * CONSUMER_WARPGROUPS)
        for name, ring in (("kv", self.kv), ("q", self.q), ("lse", self.lse),
                           ("do", self.do), ("dpsum", self.dpsum)):
            ring.create_pipeline(k, self.one, consumers, name)

    def states(self, side):
        """A start state of ``side`` for each of Q, LSE, dO and dPsum (the
        rings of a query block, in the order the producer fills them)."""
        return [r.state(side) for r in (self.q, self.lse, self.do, self.dpsum)]
