"""A worker in warm shutdown takes no new run: what it had taken and not started goes back to the queue.

A warm shutdown (SIGTERM, Ctrl-C, ``cooplab up`` stopping) asks the runs in progress to stop
(:func:`jobs.worker._stop_active_run`) and waits for them. Celery keeps consuming for a moment after
the signal: with the filesystem broker its blocking loop drains the broker once more (up to 2 s) after
the shutdown began, and the message that the stopped run's acknowledgement lets in reaches the pool,
where a fresh job process may claim it and train it while the worker waits, until whoever stopped the
worker kills it and the run is ``lost``. Three places close that door, all keyed on one flag:

- the flag (:func:`mark`, :func:`requested`) is one byte of shared memory mapped by the worker parent
  before it forks any job process, so its job processes see it the moment the parent sets it (in its
  signal handler);
- in the worker parent, a message that arrives after the flag is set is rejected with requeue before a
  job process is forked for it (:class:`LeavingRequest`, the Request class of runs and evaluations),
  and the worker stops consuming its queues (:func:`stop_consuming`);
- in the job process, a job that has not claimed its run (or evaluation request) yet raises
  ``Reject(requeue=True)`` (:func:`leave_if_requested`: the work stays ``queued`` and its message goes
  back to the broker); a run claimed just as the flag was set stops before training (it ends
  ``stopped`` and can be resumed).

Unacknowledged messages (late acks) that the worker still holds when it closes its broker connection
go back to the queue as well (both transports restore them at shutdown).
"""

from __future__ import annotations

import logging
import mmap
from typing import Any

from celery.worker.request import Request

log = logging.getLogger(__name__)

_FLAG = mmap.mmap(-1, 1)
"""Anonymous shared memory (``MAP_SHARED``): made at import in the worker parent, shared by every job
process it forks afterwards; 1 once the worker is shutting down."""

_consumer: Any = None


def mark() -> None:
    """The worker is shutting down (called from its signal handler: one byte written, nothing else)."""
    _FLAG[0] = 1


def requested() -> bool:
    """True in the worker parent and its job processes once :func:`mark` was called in the parent."""
    return _FLAG[0] == 1


def reset() -> None:
    """Clear the flag (tests, and a worker started again in the same process)."""
    _FLAG[0] = 0


def remember_consumer(sender: Any = None, **kwargs: Any) -> None:
    """``worker_ready`` receiver: keep the worker's consumer so :func:`stop_consuming` can cancel it."""
    global _consumer
    _consumer = sender


def stop_consuming() -> None:
    """Cancel the worker's task queues (from a message callback in the consumer's own thread): the
    broker keeps the queued runs for the other workers. Safe to call more than once."""
    consumer, queues = _consumer, ()
    if consumer is None:
        return
    try:
        queues = tuple(q.name for q in consumer.task_consumer.queues)
        for name in queues:
            consumer.cancel_task_queue(name)
    except Exception:  # the consumer is closing anyway; the requeue already happened
        log.warning("could not cancel the queues %s during shutdown", queues, exc_info=True)


def leave_if_requested(what: str) -> None:
    """In a job process, before it claims its work (``what``: "run 3", "evaluation request 5"): when
    the worker is shutting down, give the message back (``Reject(requeue=True)``) and leave the work
    queued for another worker."""
    if not requested():
        return
    from celery.exceptions import Reject

    log.warning("%s: the worker is shutting down; it was not started and goes back to the queue", what)
    raise Reject("the worker is shutting down", requeue=True)


class LeavingRequest(Request):
    """The Request class of the worker's tasks (runs, evaluations): a message that reaches the worker
    once it is shutting down goes back to the queue unstarted, before a job process is forked for it."""

    def revoked(self) -> bool:
        if super().revoked():
            return True
        if not requested():
            return False
        from celery.worker.state import task_ready

        log.warning("%s%s: the worker is shutting down; its message goes back to the queue unstarted",
                    self.task_name, list(self.args or ()))
        self.reject(requeue=True)
        task_ready(self)
        self._already_revoked = True  # never sent to the pool; asked again, the answer stays
        stop_consuming()
        return True
