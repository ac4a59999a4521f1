"""Run control from the dashboard: every state-changing action on a run goes through ``jobs.client``.

The dashboard never moves a run's state itself; it asks the job client, which validates, stores
and enqueues (submit), sets the stop flag (stop), or creates a new attempt (resume). ``jobs.client``
is imported when an action is taken, so pages that only read do not load Celery.
"""

from __future__ import annotations

from typing import Any


def launch(config: dict[str, Any], *, experiment_id: int, device: str = "cpu") -> int:
    """Queue a new run of ``config`` on ``device``; returns the new run's id."""
    from jobs import client

    return client.submit_run(config, experiment_id=experiment_id, device=device)


def stop(run_id: int) -> None:
    """Ask a starting or running run to stop (it shows ``stopping`` until the worker ends it)."""
    from jobs import client

    client.stop_run(run_id)


def cancel(run_id: int) -> None:
    """Cancel a queued run before a worker picks it up."""
    from jobs import client

    client.cancel_queued(run_id)


def resume(run_id: int) -> int:
    """Start a new attempt that continues from the run's last checkpoint; returns its id."""
    from jobs import client

    return client.resume_run(run_id)
