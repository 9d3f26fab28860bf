"""Stage: the backward's shared-memory plan and the pipelines over it
(``Rings``).
"""

from pipeline_mlir.kernel.ring import Ring
from pipeline_mlir.pipeline import Agent, CooperativeGroup, PipelineTmaAsync

from .config import CONSUMER_WARPGROUPS


class Rings:
    """The shared memory of a CTA (``AttentionBwdConfig.smem_bytes`` bounds
    it for the limit check) and the pipelines over it: K and V together
    (``kv``, one stage, loaded once), the rings of Q, LSE, dO and dPsum
    (``q``, ``lse``, ``do``, ``dpsum``), and per consumer warpgroup a dS^T
    tile (``ds``; two buffers of them with ``shared_ds``) and an fp32 dQ tile
    (``dq``). Each ring holds its stage count (``Ring``): its buffers, its
    barriers and every pipeline state over it follow it.

    With ``stats_with_tiles`` LSE and dPsum have no pipelines: their rows
    (one buffer per stage, ``lse`` and ``dpsum`` without a ``pipe``) are
    filled on Q's and dO's stages, whose ``tx_count`` counts a row more, and
    read with those stages' states (``step_states``)."""

    def __init__(self, k, cfg):
        kv_layout, q_layout = cfg.kv_layout(), cfg.q_layout()
        ds_layout, dq_layout = cfg.ds_layout(), cfg.dq_layout()
        stages = cfg.stages
        # LSE and dPsum rings one stage deeper than Q and dO: tiny, and a
        # state of another stage count is a state of its own for the
        # checker and the simulator, which otherwise take the same stage of
        # every ring a state indexes to be read by the GEMMs of any of them.
        row_stages = cfg.row_stages
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
        self.stats_with_tiles = cfg.stats_with_tiles
        if not cfg.stats_with_tiles:
            for name, ring in (("kv", self.kv), ("q", self.q), ("lse", self.lse),
                               ("do", self.do), ("dpsum", self.dpsum)):
                ring.create_pipeline(k, self.one, consumers, name)
            return
        self.kv.create_pipeline(k, self.one, consumers, "kv")
        for name, ring in (("q", self.q), ("do", self.do)):
            # A stage's bytes: the tile and the row that rides on it.
            ring.pipe = PipelineTmaAsync.create(
                num_stages=ring.stages, producer_group=self.one, consumer_group=consumers,
                tx_count=ring.stage_bytes + cfg.row_bytes,
                barrier_storage=k.alloc_barriers(2 * ring.stages), name=name)

    def rows_of(self, ring):
        """The ring of rows that rides on ``ring``'s stages
        (``stats_with_tiles``: LSE on Q's, dPsum on dO's), or None."""
        if not self.stats_with_tiles:
            return None
        return {id(self.q): self.lse, id(self.do): self.dpsum}.get(id(ring))

    def states(self, side):
        """A start state of ``side`` for each pipeline of a query block, in
        the order the producer fills them: Q, LSE, dO and dPsum, or with
        ``stats_with_tiles`` Q and dO. These are what a loop carries and
        advances once per step."""
        if self.stats_with_tiles:
            return [r.state(side) for r in (self.q, self.do)]
        return [r.state(side) for r in (self.q, self.lse, self.do, self.dpsum)]

    def step_states(self, states):
        """(Q, LSE, dO, dPsum) states of ``states`` (``states``' list):
        with ``stats_with_tiles`` LSE's is Q's and dPsum's dO's."""
        if self.stats_with_tiles:
            q, do = states
            return q, q, do, do
        return tuple(states)
