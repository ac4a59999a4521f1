"""Errors the store raises; each message names what went wrong and what to do instead."""

from __future__ import annotations

from db.states import InvalidTransition

__all__ = ["StoreError", "NotFoundError", "DuplicateNameError", "RunActiveError", "RunSettledError",
           "StaleEditError", "InvalidTransition"]


class StoreError(Exception):
    """Base class of the store's own errors."""


class NotFoundError(StoreError, LookupError):
    """No row with the requested id (or name)."""


class DuplicateNameError(StoreError, ValueError):
    """An experiment with that name already exists."""


class StaleEditError(StoreError, RuntimeError):
    """An edit based on an older version of an experiment: it was saved elsewhere (another tab or user)
    after the editor loaded it. ``saved_at`` is when the stored version was saved."""

    def __init__(self, experiment_id: int, saved_at: object) -> None:
        self.experiment_id = experiment_id
        self.saved_at = saved_at
        super().__init__(f"experiment {experiment_id} was saved elsewhere at {saved_at} after this edit began; "
                         "reload it, or overwrite it knowingly")


class RunActiveError(StoreError, ValueError):
    """The operation would destroy a run that is still queued, starting, running or stopping."""


class RunSettledError(StoreError, RuntimeError):
    """A job's write (a step, a heartbeat) was refused because its run is no longer live: it was
    settled elsewhere (``lost``, ``stopped``, ...) or never claimed. ``status`` is the run's state; the
    job should stop at once, its writes would land on a settled run."""

    def __init__(self, run_id: int, status: str) -> None:
        self.run_id = run_id
        self.status = status
        super().__init__(f"run {run_id} is {status}, not starting, running or stopping: its job's writes are "
                         f"refused (the run was settled elsewhere); the job stops")
