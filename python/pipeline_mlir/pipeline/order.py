"""``PipelineOrder``: groups of threads taking turns (group 0 first).

The order holds its own state, as in CuTe DSL: ``wait()`` waits for this
group's turn on the current stage, ``arrive()`` hands the turn to the next
group and advances. Carry it through loops with ``k.range(...,
carry=[order])``.
"""

from ..dialects import pipeline as pl
from ..kernel.scope import current_block, note_update, require_visible
from .agent import require_group
from .emit import barrier_storage as barrier_storage_operand
from .emit import i32_value, optional_name, positive_int, stage_count
from .errors import PipelineError


class PipelineOrder:
    kind = pl.PipelineKind.Order

    @classmethod
    def create(cls, barrier_storage, depth, length, group_id, producer_group,
               defer_sync=False, name=None):
        what = f"{cls.__name__}.create"
        current_block(what)
        stage_count(depth, f"{what}: depth")
        name = optional_name(name, what)
        positive_int(length, f"{what}: length")
        require_group(producer_group, f"{what}: producer_group")
        if isinstance(group_id, int) and not 0 <= group_id < length:
            raise PipelineError(f"{what}: group_id must be in 0..{length - 1}, "
                                f"got {group_id}")
        try:
            ptype = pl.PipelineType.get(cls.kind, depth,
                                        producer=producer_group.attr(),
                                        length=length)
        except ValueError as e:
            raise PipelineError(f"{what}: {e}") from None
        storage = None if barrier_storage is None else barrier_storage_operand(
            barrier_storage, ptype, f"{what}: barrier_storage")
        obj = cls.__new__(cls)
        obj._value = pl.create_(ptype, barrier_storage=storage,
                                defer_sync=bool(defer_sync) or None, name=name)
        obj.depth, obj.length = depth, length
        obj.producer_group = producer_group
        obj._group_id = i32_value(group_id, f"{what}: group_id")
        stype = pl.StateType.get(depth, pl.Role.ProducerConsumer)
        obj._state = pl.order_state(stype, obj._value, obj._group_id)
        return obj

    @property
    def ir_value(self):
        return self._value

    @property
    def state(self):
        from .state import PipelineState
        return PipelineState.from_value(self._state)

    def _check(self, verb):
        what = f"PipelineOrder.{verb}"
        require_visible(self._value, what)
        require_visible(self._state, f"{what} (its state)")

    def wait(self):
        """Wait until the previous group handed this group the turn."""
        self._check("wait")
        pl.order_wait(self._value, self._state, self._group_id)

    def arrive(self):
        """Hand the turn to the next group and advance to the next stage."""
        self._check("arrive")
        note_update(self, "advanced (arrive)")
        self._state = pl.order_arrive(self._value, self._state, self._group_id)

    def get_barrier_for_current_stage_idx(self, group_id):
        raise PipelineError(
            "PipelineOrder.get_barrier_for_current_stage_idx: the order's "
            "barriers are private to pipeline.order.wait/arrive")

    def _carry_values(self):
        return [self._state]

    def _carry_rebind(self, values):
        (self._state,) = values
