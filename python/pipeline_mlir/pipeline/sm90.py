"""Hopper pipelines (``cutlass.pipeline.sm90``)."""

from .async_pipelines import PipelineAsync, PipelineCpAsync
from .order import PipelineOrder
from .participants import PipelineConsumer, PipelineProducer
from .tma_pipelines import (PipelineTmaAsync, PipelineTmaMultiConsumersAsync,
                            PipelineTmaStore)

__all__ = ["PipelineAsync", "PipelineCpAsync", "PipelineTmaAsync",
           "PipelineTmaMultiConsumersAsync", "PipelineTmaStore",
           "PipelineOrder", "PipelineProducer", "PipelineConsumer"]
