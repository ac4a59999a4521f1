"""Messages of cancelled runs are dropped in the worker's own process, before a job process is forked.

A run cancelled while queued keeps its message in the broker (a worker that is not running cannot be
told to forget it, and the filesystem and Redis transports keep what nobody took). Each job runs in a
fresh child process (``worker_max_tasks_per_child=1``), so a worker meeting hundreds of such messages
would fork a child for each, only for the child to find the run cancelled. :class:`RunRequest` is the
Request class of ``jobs.run_training``: before the message reaches the pool it reads the run's state
(a short read; no connection is kept open across forks), and for a ``cancelled`` run it acknowledges
the message and logs ``run N is cancelled: its message is dropped without starting a job process``. Any
other state is left to the job (:func:`jobs.executor.execute_run` decides, as before); so is a message
whose run cannot be read now (the database unreachable or locked). A message that arrives while the
worker is in warm shutdown is rejected with requeue, unstarted, and the worker stops consuming
(:mod:`jobs.warm_shutdown`).
"""

from __future__ import annotations

import logging
from typing import Any

from db import states
from jobs import warm_shutdown

log = logging.getLogger(__name__)


def run_status(run_id: int) -> str | None:
    """The run's state now, from a short-lived store (None when it cannot be read now)."""
    from db.errors import NotFoundError
    from db.store import Store
    from jobs.settings import get_settings

    try:
        with Store(get_settings().resolved_database_url) as store:
            return store.get_run(run_id).status
    except NotFoundError:
        return None
    except Exception as exc:  # unreachable or locked: the job decides
        log.info("run %s: its state could not be read before starting its job (%s)", run_id, exc)
        return None


def run_id_of(args: Any) -> int | None:
    """The run id a ``jobs.run_training`` message carries (its one argument), else None."""
    try:
        return int(args[0])
    except (TypeError, ValueError, IndexError, KeyError):
        return None


class RunRequest(warm_shutdown.LeavingRequest):
    """A ``jobs.run_training`` request that is dropped, unstarted, when its run was cancelled (and goes
    back to the queue unstarted when the worker is shutting down)."""

    def revoked(self) -> bool:
        if super().revoked():
            return True
        run_id = run_id_of(self.args)
        if run_id is None or run_status(run_id) != states.CANCELLED:
            return False
        log.info("run %s is cancelled: its message is dropped without starting a job process", run_id)
        self._announce_revoked("cancelled", False, None, False)  # acknowledges the message
        return True
