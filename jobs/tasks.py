"""The Celery task: receives a run id and hands the work to :func:`jobs.executor.execute_run`.

Registered under the name ``jobs.run_training``; senders use that name (``send_task``) and never
import this module. The engine runs inside the job process only (its libraries are already loaded
there when the worker preloaded them before forking, :func:`jobs.worker.preload_engine`).

A message whose run was cancelled while it waited is dropped in the worker parent, before a job
process is forked for it (:class:`jobs.consume.RunRequest`).

The worker parent imports this module too: when Celery reports that a job process died under a task
(``WorkerLostError``: killed, out of memory), :func:`_job_process_lost` settles its run at once (the
state its job left in its job file, else ``lost`` naming the signal), instead of waiting for the
heartbeat to expire.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.exceptions import WorkerLostError
from celery.signals import task_failure

from jobs.celery_app import TASK_NAME


@shared_task(name=TASK_NAME, bind=True, acks_late=True, ignore_result=True, Request="jobs.consume:RunRequest")
def run_training(self, run_id: int) -> str:  # type: ignore[no-untyped-def]
    """Execute stored run ``run_id``; returns the state it ended in."""
    from jobs import warm_shutdown
    from jobs.executor import execute_run

    warm_shutdown.leave_if_requested(f"run {run_id}")  # unclaimed: back to the queue when the worker leaves
    status = execute_run(int(run_id), worker=self.request.hostname, exit_when_settled=True,
                         leaving=warm_shutdown.requested)
    _schedule_study_of(int(run_id))
    return status


def _schedule_study_of(run_id: int) -> None:
    """A study's child ended: let its study queue the next child now (see :mod:`jobs.studies`)."""
    try:
        from jobs.studies import after_run

        after_run(run_id)
    except Exception:  # the maintenance pass schedules the study later
        import logging

        logging.getLogger(__name__).warning("could not schedule the study of run %s", run_id, exc_info=True)


@task_failure.connect(weak=False)
def _job_process_lost(sender: Any = None, exception: BaseException | None = None, args: Any = None,
                      **kwargs: Any) -> None:
    """In the worker parent: a job process died under a run (Celery's ``WorkerLostError``)."""
    if getattr(sender, "name", None) != TASK_NAME or not isinstance(exception, WorkerLostError) or not args:
        return
    from jobs.maintenance import job_death_cause, settle_lost_job

    settle_lost_job(int(args[0]), job_death_cause(exception))


# The evaluation job's task (``jobs.run_evaluation``, :mod:`jobs.eval_job`): importing it registers it
# with the workers, which load this module.
from jobs import eval_job  # noqa: E402,F401
