"""The Celery task: receives a run id and hands the work to :func:`jobs.executor.execute_run`.

Registered under the name ``jobs.run_training``; senders use that name (``send_task``) and never
import this module. The executor imports torch and the engine inside the job process only.
"""

from __future__ import annotations

from celery import shared_task

from jobs.celery_app import TASK_NAME


@shared_task(name=TASK_NAME, bind=True, acks_late=True, ignore_result=True)
def run_training(self, run_id: int) -> str:  # type: ignore[no-untyped-def]
    """Execute stored run ``run_id``; returns the state it ended in."""
    from jobs.executor import execute_run

    return execute_run(int(run_id), worker=self.request.hostname, exit_when_settled=True)
