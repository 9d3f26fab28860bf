"""CuTe DSL's ``cutlass.pipeline``, emitting the ``pipeline`` dialect.

Code written against ``cutlass.pipeline`` (4.x) ports by changing its import::

    from pipeline_mlir import pipeline          # was: from cutlass import pipeline
    from pipeline_mlir.pipeline import (        # was: from cutlass.pipeline import ...
        CooperativeGroup, Agent, PipelineTmaUmma, make_pipeline_state,
        PipelineUserType)

Objects hold SSA values and emit ops at the current insertion point (inside
a ``pipeline_mlir.kernel.Kernel`` body). Runtime arguments take Python ints
(emitted as ``arith.constant : i32``), Scalars or i32 values.

Differences from CuTe DSL, by design: ``producer_mask`` / ``consumer_mask``
(run-time remote arrive targets of PipelineAsync/CpAsync) are rejected; TMA
loads are issued with ``pipeline.tma_load(state, desc, coords, dst, bytes)``
(or a producer handle's ``tma_load``) instead of ``cute.copy``; states also
take ``advance(amount)``.
"""

from . import sm90, sm100
from .agent import Agent, CooperativeGroup, PipelineOp, PipelineUserType
from .async_pipelines import PipelineAsync, PipelineCpAsync
from .base import PipelineBase
from .errors import PipelineError, ScopeError, UncheckedBarrierWarning
from .mbarrier import MbarrierArray, SyncObject, TmaStoreFence
from .named_barrier import NamedBarrier
from .order import PipelineOrder
from .participants import (ImmutableResourceHandle, PipelineConsumer,
                           PipelineProducer)
from .state import (PipelineState, PipelineStateSimple, make_pipeline_state)
from .sync import agent_sync, pipeline_init_arrive, pipeline_init_wait
from .tma_pipelines import (PipelineTmaAsync, PipelineTmaMultiConsumersAsync,
                            PipelineTmaStore, tma_store)
from .umma_pipelines import (PipelineAsyncUmma, PipelineClcFetchAsync,
                             PipelineTmaUmma, PipelineUmmaAsync)

__all__ = [
    "Agent", "CooperativeGroup", "PipelineOp", "PipelineUserType",
    "PipelineState", "PipelineStateSimple", "make_pipeline_state",
    "SyncObject", "MbarrierArray", "NamedBarrier", "TmaStoreFence",
    "PipelineOrder", "PipelineAsync", "PipelineCpAsync", "PipelineTmaAsync",
    "PipelineTmaStore", "PipelineTmaUmma", "PipelineAsyncUmma",
    "PipelineUmmaAsync", "PipelineTmaMultiConsumersAsync",
    "PipelineClcFetchAsync", "PipelineProducer", "PipelineConsumer",
    "ImmutableResourceHandle", "pipeline_init_arrive", "pipeline_init_wait",
    "agent_sync", "tma_store", "PipelineBase", "PipelineError", "ScopeError",
    "UncheckedBarrierWarning",
    "sm90", "sm100",
]
