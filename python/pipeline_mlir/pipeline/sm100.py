"""Blackwell pipelines (``cutlass.pipeline.sm100``)."""

from .tma_pipelines import PipelineTmaMultiConsumersAsync
from .umma_pipelines import (PipelineAsyncUmma, PipelineClcFetchAsync,
                             PipelineTmaUmma, PipelineUmmaAsync)

__all__ = ["PipelineTmaUmma", "PipelineAsyncUmma", "PipelineUmmaAsync",
           "PipelineClcFetchAsync", "PipelineTmaMultiConsumersAsync"]
