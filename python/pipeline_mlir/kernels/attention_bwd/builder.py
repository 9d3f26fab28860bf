"""The backward's stages put together: ``Stages`` (what ``build``
assembles), ``STAGES`` (the production set), ``build`` and the kernel
cache's ``build_variant``.
"""

from dataclasses import dataclass
from types import SimpleNamespace

from pipeline_mlir.chip_limits import SMEM_PER_BLOCK
from pipeline_mlir.kernel import Float32, GlobalPtr, Int32, Kernel, TmaDescriptor
from pipeline_mlir.kernel.warpgroup import check_register_budget, producer_consumer_roles

from .config import CONSUMER_WARPGROUPS, AttentionBwdConfig
from .consumer import consumer
from .dq_reduce import DqReduce
from .dq_reduce_warp import DqHandOff, ReduceWarp, roles_with_reduce_warp
from .epilogue import DkvEpilogue
from .grad_gemms import GradGemms
from .mainloop import Mainloop
from .producer import producer
from .rings import Rings
from .schedule import KeyBlockSchedule
from .score_gemms import ScoreGemms
from .softmax_grad import SoftmaxGrad


@dataclass(frozen=True)
class Stages:
    """The kernel's stages, what ``build`` assembles: the shared-memory plan
    and its rings, the schedule of query blocks, the producer warp, and per
    consumer warpgroup the order of one query block (``mainloop``: every
    wait and release), the S^T / dP^T GEMMs (``scores``), the
    softmax-gradient math (``softmax_grad``: P^T, the mask, dS^T), the dV /
    dK / dQ GEMMs (``grads``), the dQ reduce-add (``dq_reduce``) and the dK /
    dV epilogue; with ``dq_reduce_warp`` the consumers' dQ hand-off
    (``dq_hand_off``, in ``dq_reduce``'s place) and the producer
    warpgroup's reduce warp (``reduce_warp``). ``build`` takes the
    production set, ``STAGES``, unless given another; the tests plant each synchronization mistake the checker
    or the simulator must reject by replacing one stage with a wrong one of
    their own (``dataclasses.replace(STAGES, epilogue=...)``), so the
    kernel itself holds no mistake."""
    rings: type
    schedule: type
    producer: object
    mainloop: type
    scores: type
    softmax_grad: type
    grads: type
    dq_reduce: type
    epilogue: type
    dq_hand_off: type
    reduce_warp: type


STAGES = Stages(rings=Rings, schedule=KeyBlockSchedule, producer=producer,
                mainloop=Mainloop, scores=ScoreGemms, softmax_grad=SoftmaxGrad,
                grads=GradGemms, dq_reduce=DqReduce, epilogue=DkvEpilogue,
                dq_hand_off=DqHandOff, reduce_warp=ReduceWarp)


def build(cfg=AttentionBwdConfig(), chip="sm_90a", stages=None):
    """The main backward kernel for ``cfg`` (``.module`` is the built
    module); ``stages``: the ``Stages`` to assemble (``STAGES``)."""
    stages = STAGES if stages is None else stages
    check_register_budget(cfg.threads, 1, cfg.producer_registers,
                          CONSUMER_WARPGROUPS, cfg.consumer_registers)
    if cfg.smem_bytes() > SMEM_PER_BLOCK:
        raise ValueError(f"{cfg.name}: {cfg.smem_bytes()} bytes of shared memory "
                         f"> {SMEM_PER_BLOCK}")
    k = Kernel(cfg.name, chip=chip, block_dim=cfg.threads,
               min_ctas_per_sm=1 if cfg.min_ctas else None,
               params={"q": TmaDescriptor(), "k": TmaDescriptor(), "v": TmaDescriptor(),
                       "do": TmaDescriptor(), "lse_log2": GlobalPtr(align=16),
                       "dpsum": GlobalPtr(align=16), "dq_accum": TmaDescriptor(),
                       "dk": TmaDescriptor(), "dv": TmaDescriptor(),
                       "batch": Int32(), "heads": Int32(), "heads_kv": Int32(),
                       "seqlen_q": Int32(), "seqlen_k": Int32(),
                       "scale_log2": Float32(), "scale": Float32()})
    with k:
        args = SimpleNamespace(**{name: v for (name, _), v in zip(k.params, k.args)})
        rings = stages.rings(k, cfg)
        sched = stages.schedule(k, cfg, args)
        load = lambda: stages.producer(k, cfg, rings, sched, args)   # noqa: E731
        compute = lambda warp, warpgroup: consumer(                   # noqa: E731
            k, cfg, stages, rings, sched, args, warp, warpgroup)
        if cfg.dq_reduce_warp:
            roles_with_reduce_warp(k, cfg.producer_registers, cfg.consumer_registers, load,
                                   lambda: stages.reduce_warp(k, cfg, rings, sched, args)(),
                                   compute)
        else:
            producer_consumer_roles(k, cfg.producer_registers, cfg.consumer_registers,
                                    load, compute)
    k.config = cfg
    return k


def build_variant(overrides, dtype, chip):
    """(cubin, launch facts) of the backward variant ``overrides``
    (``AttentionBwdConfig`` fields, or ``kernel="prep"`` and ``head_dim``
    for the preprocess of ``attention_bwd_prep``; ``kernel="prep_wide"``,
    ``head_dim``, ``slots`` and ``order`` for ``prep_wide``'s;
    ``kernel="dq_convert"``
    and ``head_dim`` for ``dq_acc_order``'s postprocess of
    ``attention_bwd_dq_convert``) in ``dtype`` ('bf16'):
    the kernel cache's builder of the family ``attention_bwd``."""
    if dtype != "bf16":
        raise ValueError(f"attention_bwd: bf16 only, got {dtype!r}")
    if overrides.get("kernel") == "prep":
        from pipeline_mlir.kernels import attention_bwd_prep

        if set(overrides) != {"kernel", "head_dim"}:
            raise ValueError(f"attention_bwd prep: overrides are kernel and head_dim, got "
                             f"{sorted(overrides)}")
        prep = attention_bwd_prep.build(overrides["head_dim"], chip=chip)
        return bytes(prep.compile()), attention_bwd_prep.meta(prep)
    if overrides.get("kernel") == "prep_wide":
        from . import prep_wide

        if set(overrides) != {"kernel", "head_dim", "slots", "order"}:
            raise ValueError(f"attention_bwd prep_wide: overrides are kernel, head_dim, slots "
                             f"and order, got {sorted(overrides)}")
        prep = prep_wide.build(overrides["head_dim"], slots=overrides["slots"],
                               order=overrides["order"], chip=chip)
        return bytes(prep.compile()), prep_wide.meta(prep)
    if overrides.get("kernel") == "dq_convert":
        from pipeline_mlir.kernels import attention_bwd_dq_convert

        if not {"kernel", "head_dim"} <= set(overrides) <= {"kernel", "head_dim", "block_m"}:
            raise ValueError(f"attention_bwd dq_convert: overrides are kernel and head_dim "
                             f"(and block_m 80), got {sorted(overrides)}")
        conv = attention_bwd_dq_convert.build(overrides["head_dim"], chip=chip,
                                              block_m=overrides.get("block_m", 64))
        return bytes(conv.compile()), attention_bwd_dq_convert.meta(conv)
    cfg = AttentionBwdConfig(**overrides)
    kernel = build(cfg, chip=chip)
    return bytes(kernel.compile()), cfg.meta(kernel)
