"""The forward's stages put together: ``Stages`` (what ``build``
assembles), ``STAGES`` (the production set), ``build`` and the kernel
cache's ``build_variant``.
"""

from dataclasses import dataclass
from types import SimpleNamespace

from pipeline_mlir.kernel import Float32, GlobalPtr, Int32, Kernel, TmaDescriptor
from pipeline_mlir.kernel.smem import BASE_ALIGN
from pipeline_mlir.kernel.warpgroup import check_register_budget, producer_consumer_roles

from .config import DTYPES_FWD, AttentionConfig
from .consumer import consumer
from .epilogue import OutputEpilogue
from .mainloop import Mainloop
from .pingpong import PingPong
from .producer import producer
from .rings import Rings
from .schedule import WorkSchedule
from .softmax import OnlineSoftmax


@dataclass(frozen=True)
class Stages:
    """The kernel's stages, what ``build`` assembles: the schedule of work
    units, the producer warp, the consumers' GEMM turns (ping-pong), their
    mainloop, the online softmax with its mask, and the epilogue. ``build``
    takes the production set, ``STAGES``, unless given another; the tests
    plant each synchronization mistake the checker must reject by replacing
    one stage with a wrong one of their own
    (``dataclasses.replace(STAGES, mainloop=...)``), so the kernel itself
    holds no mistake."""
    schedule: type
    producer: object
    pingpong: type
    mainloop: type
    softmax: type
    epilogue: type


STAGES = Stages(schedule=WorkSchedule, producer=producer, pingpong=PingPong,
                mainloop=Mainloop, softmax=OnlineSoftmax, epilogue=OutputEpilogue)


def build(cfg=AttentionConfig(), chip="sm_90a", stages=None):
    """The kernel for ``cfg`` (``.module`` is the built module); ``stages``:
    the ``Stages`` to assemble (``STAGES``)."""
    stages = STAGES if stages is None else stages
    check_register_budget(cfg.threads, 1, cfg.producer_registers,
                          cfg.consumer_warpgroups, cfg.consumer_registers,
                          register_file=cfg.register_file)
    if cfg.smem_bytes() > cfg.smem_limit:
        raise ValueError(f"{cfg.name}: {cfg.smem_bytes()} bytes of shared memory "
                         f"> {cfg.smem_limit}")
    # Two CTAs per SM: ptxas must keep the entry registers within half the
    # register file (.minnctapersm), or the second CTA does not fit.
    extra = {"min_ctas_per_sm": cfg.ctas_per_sm} if cfg.ctas_per_sm > 1 else {}
    params = {"q": TmaDescriptor(), "k": TmaDescriptor(), "v": TmaDescriptor(),
              "o": TmaDescriptor() if cfg.o_through_smem else GlobalPtr(),
              "lse": GlobalPtr(align=4),
              "batch": Int32(), "heads": Int32(), "heads_kv": Int32(),
              "seqlen_q": Int32(), "seqlen_k": Int32(),
              "scale_log2": Float32()}
    if cfg.fp8:
        # Per-tensor descales: one-element fp32 device tensors (read by the
        # consumers, as the FP8 GEMM reads its scales: no host sync).
        params.update(q_descale=GlobalPtr(align=4), k_descale=GlobalPtr(align=4),
                      v_descale=GlobalPtr(align=4))
    k = Kernel(cfg.name, chip=chip, block_dim=cfg.threads, **extra, params=params)
    with k:
        args = SimpleNamespace(**{name: v for (name, _), v in zip(k.params, k.args)})
        rings = Rings(k, cfg)
        # The plan that chose Q's buffers and passed the limit check above
        # counts each ring's stages again: it must be what was allocated.
        if k.smem_bytes + BASE_ALIGN != cfg.smem_bytes():
            raise ValueError(f"{cfg.name}: AttentionConfig.smem_bytes() plans "
                             f"{cfg.smem_bytes() - BASE_ALIGN} bytes of shared memory "
                             f"(without the alignment slack) but the rings allocate "
                             f"{k.smem_bytes}: the plan and Rings disagree")
        sched = stages.schedule(k, cfg, args)
        producer_consumer_roles(
            k, cfg.producer_registers, cfg.consumer_registers,
            lambda: stages.producer(k, cfg, rings, sched, args),
            lambda warp, warpgroup: consumer(k, cfg, stages, rings, sched, args, warp,
                                             warpgroup))
    k.config = cfg
    return k


def build_variant(overrides, dtype, chip):
    """(cubin, launch facts) of the attention variant ``overrides``
    (``AttentionConfig`` fields: head_dim, causal and the tuned ones of
    ``pipeline_mlir.ops.attention_configs``) in ``dtype`` ('bf16', or 'e4m3':
    ``pipeline_mlir.ops.attention_fp8``): the kernel cache's builder of this
    family."""
    if dtype not in DTYPES_FWD:
        raise ValueError(f"attention_fwd: dtype must be one of {DTYPES_FWD}, got {dtype!r}")
    cfg = AttentionConfig(**overrides, dtype=dtype)
    k = build(cfg, chip=chip)
    return bytes(k.compile()), cfg.meta(k)
