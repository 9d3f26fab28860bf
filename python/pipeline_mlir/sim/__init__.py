"""``pipeline_mlir.sim``: run the pipeline-level program of a kernel on the CPU.

The roles of a kernel run as concurrent agents over a model of mbarriers
(phases, arrival counts, tx bytes), named and cluster barriers, TMA copies
and tcgen05.commit completions; schedulers explore their interleavings and
report deadlocks, phase overruns, buffers overwritten before their release,
reads before a copy finished, arrivals on exited CTAs, stages released
while a wgmma / tcgen05.mma / bulk store (of the releasing warp, or of
another warp whose hold the release ends) may still read them, races on
plain shared memory that roles hand over with barriers of their own (or
read through another ring's hold), ``setmaxnreg.inc`` waiting for registers
no warp gives back, pipelines created on one barrier storage, tensor
memory's allocation (per CTA and CTA pair), ``tcgen05.ld`` used before
its wait and columns loaded before their ``tcgen05.st`` was waited
(:mod:`.tmem`), and misuse of the verbs (docs: ``pipeline-sim
--help`` and the module docstrings).
Branches on values loaded from global memory read a user-given or seeded
random fill of the kernel's input buffers (:mod:`.memory`); a kernel that
synchronizes through global memory (atomics, a polled flag, fences: a
stream-K fix-up) has what it writes read back, with races on it and polls
that never end reported (:mod:`.gmem`); so do the TMA tensor stores and
reduce-adds through descriptors a :class:`~.launch.TensorMap` describes
(``simulate(tensor_maps=)``, ``pipeline-sim --tensor-map``). Stores into
another CTA's shared memory through a ``mapa`` address (and ``st.async``,
with the hand-driven mbarriers it completes on and their one-try waits:
:mod:`.rawbar`) are checked against that CTA's reads (:mod:`.smemrace`),
as is the whole tile a bulk or TMA store reads; a stage's TMA copies land
at their offset in every CTA of their multicast mask (two on the same
bytes in one phase: a race, :mod:`.async_verbs`), after every
asynchronous read of those bytes (a store's source still read, its wait
not run or not ordered before the copy: a race, ``smemrace.async_fill``).

The launch is one cluster, or a grid of several (``simulate(grid=)``,
``pipeline-sim --grid``: :mod:`.launch`): cluster barriers, multicast and
a pipeline's peer CTAs stay within a cluster, global memory spans the grid.

Granularity: one agent per warp. Pipeline code is warp-uniform except for
elected lanes and lane-indexed signalling, so a warp with a mask of active
lanes reproduces the per-thread arrive counts (an arrive by a warp with k
active lanes is k arrivals, an elected one is 1) at a fraction of the
interleavings of per-thread agents. Lane-divergent ``scf.if`` runs its two
halves in program order.

- :mod:`.model`: Mbarrier, NamedBarrier, Cta, Cluster, SimError (no MLIR);
- :mod:`.engine`: agents, steps, events, random and bounded-DFS schedulers;
- :mod:`.verbs`: the pipeline verbs on the model (reference semantics), on
  :mod:`.sync_verbs` (mbarrier waits, init sync, cluster and named
  barriers, the register file's setmaxnreg), :mod:`.async_verbs` (copies
  into stages, CLC requests, bulk async-groups) and :mod:`.stage_access`
  (plain loads and stores of a stage's buffer);
- :mod:`.asyncread`: asynchronous readers of stage buffers (wgmma groups,
  tcgen05.mma, bulk stores) and the release-after-last-read check, for the
  reader's own release and for another warp's release that ends its hold;
- :mod:`.clocks`: happens-before between warps (vector clocks over the
  barriers); :mod:`.smemrace`: races on plain shared memory;
- :mod:`.tmem`: tensor memory (alloc / dealloc per CTA and CTA pair,
  ``tcgen05.ld`` in flight until ``tcgen05.wait::ld``, ``tcgen05.st``
  until ``tcgen05.wait::st``);
- :mod:`.memory`: the input buffers that branches on loaded values read;
  :mod:`.gmem`: global memory the kernel writes and reads back (stores,
  atomics, flags and fences between CTAs);
- :mod:`.frontend`: mlir.ir.Module -> kernels; :mod:`.interp`: kernels -> agents
  (:mod:`.evaluate`: its scalar ops; :mod:`.launch`: the launch's shape and
  argument values); :mod:`.cli`: ``pipeline-sim``;
  :mod:`.api`: ``simulate(module, ...)`` (what ``Kernel.simulate`` calls).
"""

from .api import SimResult, SimulationFailed, simulate

from .engine import Agent, Event, Report, Step, World, explore
from .launch import TensorMap
from .model import Cluster, Mbarrier, NamedBarrier, SimError
from .verbs import Group, PipelineSpec, PipeRef, State

__all__ = ["Agent", "Cluster", "Event", "Group", "Mbarrier", "NamedBarrier", "PipeRef",
           "PipelineSpec", "Report", "SimError", "SimResult", "SimulationFailed", "State", "Step",
           "TensorMap", "World", "explore", "simulate"]
