"""FlashAttention's pipeline extensions (module ``flash_attn.cute.pipeline``),
ported to pipeline_mlir by changing imports: ``pipeline.py`` defines them as
FlashAttention does (frozen dataclass subclasses with mixins, a ``create``
that re-classes the base object); ``cute_names.py`` gives the few CuTe DSL
names it imports besides ``cutlass.pipeline``. Mirrors names and semantics;
no FlashAttention code is copied. Used by test_flash_attn_pipeline_port.py.
"""
