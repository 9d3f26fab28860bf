"""A ring: one operand's stages in shared memory and the ``PipelineTmaAsync``
that fills them.

A warp-specialized kernel streams each operand through a few shared-memory
buffers: a producer thread TMA-loads (or bulk-copies) stage ``i`` while the
consumers read the others, and the pipeline's barriers say which stage is
full and which is free again. The buffers, the barriers and every pipeline
state must agree on the stage count; a :class:`Ring` holds it once::

    q = Ring.of_layout(k, 2, layout, "Q")         # the buffers, allocated here
    ...                                           # other rings' buffers
    q.create_pipeline(k, producer_group, consumer_group, name="q")   # barriers
    state = q.state(PipelineUserType.Producer)
    q.pipe.producer_acquire(state)
    ... q.buffer(state.index) ...                 # the stage's buffer

The buffers and the barriers are allocated in two calls so that a kernel
can place every ring's buffers before any barrier (the shared-memory plan
the attention kernels use). ``layout`` (an ``OperandLayout``, optional) is
what the stage holds, for the TMA boxes and the wgmma descriptors that
read it.
"""


class Ring:
    """``stages`` buffers of ``stage_bytes`` in shared memory (``smem``,
    allocated at construction) and, after ``create_pipeline``, the
    ``PipelineTmaAsync`` over them (``pipe``). ``tx_bytes``: what the
    producer's copies deliver into a stage (its barrier's transaction
    bytes), where that is less than the buffer (bytes the copies leave
    alone, written once before the loads: the FP8 attention forward's
    ones rows below V^T); by default the whole buffer."""

    def __init__(self, k, stages, stage_bytes, *, align, name, layout=None, tx_bytes=None):
        self.stages, self.stage_bytes, self.layout = stages, stage_bytes, layout
        self.tx_bytes = stage_bytes if tx_bytes is None else tx_bytes
        self.smem = k.smem_alloc(stages * stage_bytes, align=align, name=name)
        self.pipe = None

    @classmethod
    def of_layout(cls, k, stages, layout, name):
        """A ring of ``stages`` tiles of ``layout`` (an ``OperandLayout``),
        aligned as its swizzle needs."""
        return cls(k, stages, layout.bytes, align=layout.alignment, name=name, layout=layout)

    def buffer(self, index):
        """Stage ``index``'s buffer."""
        return self.smem.stage(index, self.stage_bytes)

    def create_pipeline(self, k, producer_group, consumer_group, name):
        """The ``PipelineTmaAsync`` of this ring: its barriers (two per
        stage) allocated now, each stage's transaction bytes ``tx_bytes``
        (one buffer unless given)."""
        # pipeline builds on this layer: imported here, not at the top.
        from ..pipeline import PipelineTmaAsync

        self.pipe = PipelineTmaAsync.create(
            num_stages=self.stages, producer_group=producer_group,
            consumer_group=consumer_group, tx_count=self.tx_bytes,
            barrier_storage=k.alloc_barriers(2 * self.stages), name=name)
        return self.pipe

    def state(self, side):
        """A start state of ``side`` (``PipelineUserType``) over the ring's
        stages."""
        from ..pipeline import make_pipeline_state

        return make_pipeline_state(side, self.pipe.num_stages)
