"""``PipelineProducer`` / ``PipelineConsumer``: a pipeline bound to one side's
state, handing out immutable handles to the acquired/waited stage.

Misuse raises instead of emitting wrong IR: a handle of one side given to the
other (or to another pipeline), a consumer verb on a producer handle, or a
handle used after the region (if-branch, loop body) it was made in ended.
"""

from ..kernel.scope import current_block, note_update, require_inside
from .agent import PipelineUserType
from .errors import PipelineError
from .state import make_pipeline_state


class ImmutableResourceHandle:
    """The stage a participant acquired or waited for (a state snapshot)."""

    _side = None

    def __init__(self, origin, state):
        self._origin = origin
        self._state = state.clone()
        self._block = current_block(f"{type(self).__qualname__}")

    def get_origin(self):
        return self._origin

    @property
    def index(self):
        return self._state.index

    @property
    def phase(self):
        return self._state.phase

    @property
    def count(self):
        return self._state.count

    def _check(self, verb):
        require_inside(self._block, f"{type(self).__qualname__}.{verb}")


class _Participant:
    _user_type = None
    _Handle = None

    def __init__(self, pipeline, state, group=None):
        if state.user_type not in (self._user_type,
                                   PipelineUserType.ProducerConsumer):
            raise PipelineError(
                f"{type(self).__name__} needs a {self._user_type.name.lower()} "
                f"state, got a {state.user_type.name.lower()} state")
        self._pipeline = pipeline
        self._state = state
        self._group = group

    @property
    def pipeline(self):
        return self._pipeline

    @property
    def state(self):
        return self._state

    def reset(self):
        """Back to the side's start state."""
        note_update(self, "reset")
        self._state = make_pipeline_state(self._user_type,
                                          self._pipeline.num_stages)

    def clone(self):
        return type(self)(self._pipeline, self._state.clone(), self._group)

    def advance(self):
        self._state.advance()

    def _own(self, handle, verb):
        name = f"{type(self).__name__}.{verb}"
        if not isinstance(handle, ImmutableResourceHandle):
            raise TypeError(f"{name}: expected a handle, got "
                            f"{type(handle).__name__}")
        if not isinstance(handle, self._Handle):
            raise PipelineError(
                f"{name}: got a {handle._side} handle; {verb} takes the "
                f"handle that this {self._user_type.name.lower()} returned")
        if handle.get_origin() is not self._pipeline:
            raise PipelineError(f"{name}: the handle belongs to another pipeline")
        return handle

    # Loop-carried protocol: a participant carries its state.
    def _carry_values(self):
        return self._state._carry_values()

    def _carry_rebind(self, values):
        self._state._carry_rebind(values)


class PipelineProducer(_Participant):
    """The producer side: ``acquire`` / ``commit`` / ``tail``."""

    _user_type = PipelineUserType.Producer

    class ImmutableResourceHandle(ImmutableResourceHandle):
        _side = "producer"

        @property
        def barrier(self):
            """The stage's full barrier, for a TMA copy."""
            self._check("barrier")
            return self._origin.producer_get_barrier(self._state)

        def commit(self):
            self._check("commit")
            self._origin.producer_commit(self._state)

        def tma_load(self, desc, coords, dst, bytes, mcast_mask=None):
            """TMA load into this stage (TMA pipelines only)."""
            self._check("tma_load")
            if not hasattr(self._origin, "tma_load"):
                raise PipelineError(f"{type(self._origin).__name__} has no TMA "
                                    "producer")
            self._origin.tma_load(self._state, desc, coords, dst, bytes,
                                  mcast_mask)

        def release(self):
            raise PipelineError(
                "release is a consumer verb; a producer handle commits "
                "(handle.commit()) -- release the consumer's handle instead")

    _Handle = ImmutableResourceHandle

    def acquire(self, try_acquire_token=None, extra_tx_count=None):
        """Wait for the current stage to be empty; return its handle."""
        self._pipeline.producer_acquire(self._state, try_acquire_token,
                                        extra_tx_count)
        return self._Handle(self._pipeline, self._state)

    def acquire_and_advance(self, try_acquire_token=None, extra_tx_count=None):
        handle = self.acquire(try_acquire_token, extra_tx_count)
        self._state.advance()
        return handle

    def try_acquire(self):
        return self._pipeline.producer_try_acquire(self._state)

    def commit(self, handle=None):
        """Commit ``handle``'s stage (the current stage without one)."""
        if handle is None:
            self._pipeline.producer_commit(self._state)
        else:
            self._own(handle, "commit").commit()

    def tail(self):
        self._pipeline.producer_tail(self._state)

    def release(self, *args, **kwargs):
        raise PipelineError("release is a consumer verb; PipelineProducer "
                            "acquires and commits")


class PipelineConsumer(_Participant):
    """The consumer side: ``wait`` / ``release``."""

    _user_type = PipelineUserType.Consumer

    class ImmutableResourceHandle(ImmutableResourceHandle):
        _side = "consumer"

        def release(self):
            self._check("release")
            self._origin.consumer_release(self._state)

        def commit(self):
            raise PipelineError(
                "commit is a producer verb; a consumer handle releases "
                "(handle.release())")

    _Handle = ImmutableResourceHandle

    def wait(self, try_wait_token=None):
        """Wait for the current stage to be full; return its handle."""
        self._pipeline.consumer_wait(self._state, try_wait_token)
        return self._Handle(self._pipeline, self._state)

    def wait_and_advance(self, try_wait_token=None):
        handle = self.wait(try_wait_token)
        self._state.advance()
        return handle

    def try_wait(self):
        return self._pipeline.consumer_try_wait(self._state)

    def release(self, handle=None):
        """Release ``handle``'s stage (the current stage without one)."""
        if handle is None:
            self._pipeline.consumer_release(self._state)
        else:
            self._own(handle, "release").release()

    def commit(self, *args, **kwargs):
        raise PipelineError("commit is a producer verb; PipelineConsumer waits "
                            "and releases")

    def tail(self):
        raise PipelineError("tail is a producer verb (the producer drains the "
                            "pipeline before the CTA exits)")
