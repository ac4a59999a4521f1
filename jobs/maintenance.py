"""Keeping run states truthful when processes die or ignore a stop request.

:func:`run_maintenance` does one pass: runs whose heartbeat is older than ``heartbeat_timeout_s``
become ``lost`` (or ``stopped`` when they were being stopped), runs that have been ``stopping`` for
longer than ``stop_grace_s`` get their job process terminated (``revoke(terminate=True)``) and are
marked ``stopped``, and workers that stopped reporting are marked offline. Every step is a
compare-and-set in the database, so several workers and the dashboard may run it concurrently.

Workers run it from a timer in the worker parent (:class:`MaintenanceStep`, a Celery bootstep); the
dashboard and ``cooplab up`` call :func:`run_maintenance` on their own schedule.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import Celery, bootsteps

from db import states
from db.states import InvalidTransition
from db.store import Store
from jobs.settings import Settings, get_settings

log = logging.getLogger(__name__)

TERMINATE_SIGNAL = "SIGKILL"
"""Sent to a job that ignored its stop flag for the whole grace period: it cannot be caught."""


@dataclass(frozen=True)
class MaintenanceReport:
    """What one pass changed: runs marked lost, runs settled as stopped (terminated or reaped),
    workers marked offline."""

    lost: tuple[int, ...] = ()
    stopped: tuple[int, ...] = ()
    offline_workers: tuple[str, ...] = ()


class StopEnforcer:
    """Terminates runs that stay ``stopping`` past the grace period and marks them ``stopped``.

    The grace period counts from the moment the stop was requested (the run's ``stop_requested_at``),
    so an enforcer that starts late, or runs in another process than the one that asked, does not
    extend it. A ``stopping`` run without that time (moved there directly, never flagged) counts from
    the first time this enforcer saw it stopping.
    """

    def __init__(self) -> None:
        self._first_seen: dict[int, datetime] = {}

    def enforce(self, store: Store, app: Celery | None, grace_s: float, now: datetime | None = None) -> list[int]:
        now = now or datetime.now(UTC)
        stopping = store.list_runs(statuses=[states.STOPPING], limit=10_000)
        self._first_seen = {r.id: self._first_seen.get(r.id, now) for r in stopping}
        settled: list[int] = []
        for run in stopping:
            since = run.stop_requested_at or self._first_seen[run.id]
            if now - since < timedelta(seconds=grace_s):
                continue
            if app is not None and run.celery_task_id:
                try:
                    app.control.revoke(run.celery_task_id, terminate=True, signal=TERMINATE_SIGNAL)
                except Exception:  # the broker may be down; the job's own sink also ends a settled run
                    log.warning("could not revoke task %s of run %s", run.celery_task_id, run.id, exc_info=True)
            try:
                store.transition(run.id, states.STOPPED, expected_from=states.STOPPING,
                                 error=f"did not stop within the {grace_s:g} s grace period; its job was terminated")
            except InvalidTransition:
                continue  # it stopped by itself (or was reaped) meanwhile
            log.warning("run %s ignored its stop for %g s: terminated and marked stopped", run.id, grace_s)
            settled.append(run.id)
        return settled


_DEFAULT_ENFORCER = StopEnforcer()


def run_maintenance(settings: Settings | None = None, *, store: Store | None = None, app: Celery | None = None,
                    enforcer: StopEnforcer | None = None, now: datetime | None = None) -> MaintenanceReport:
    """One maintenance pass (see the module docstring). Opens its own store and Celery app when not given."""
    settings = settings or get_settings()
    own_store = store is None
    store = store or Store(settings.resolved_database_url)
    if app is None:
        from jobs.celery_app import get_app

        app = get_app(settings)
    try:
        reaped = store.reap_lost(settings.heartbeat_timeout_s, now=now)
        reaped_stopped = [i for i in reaped if store.get_run(i).status == states.STOPPED]
        lost = [i for i in reaped if i not in reaped_stopped]
        for run_id in lost:
            log.warning("run %s lost: no heartbeat for %g s", run_id, settings.heartbeat_timeout_s)
        terminated = (enforcer or _DEFAULT_ENFORCER).enforce(store, app, settings.stop_grace_s, now=now)
        offline = store.mark_stale_workers_offline(max(3 * settings.maintenance_interval_s,
                                                       settings.heartbeat_timeout_s), now=now)
        return MaintenanceReport(lost=tuple(lost), stopped=tuple(reaped_stopped + terminated),
                                 offline_workers=tuple(offline))
    finally:
        if own_store:
            store.close()


class WorkerMaintenance:
    """A worker's own bookkeeping: its row in the worker registry and the periodic maintenance pass."""

    def __init__(self, settings: Settings, app: Celery, *, name: str, queues: list[str]) -> None:
        self.settings = settings
        self.app = app
        self.name = name
        self.queues = queues
        self.enforcer = StopEnforcer()

    def _store(self) -> Store:
        # A short-lived store per pass: the worker parent keeps no database connection open while it
        # forks job processes.
        return Store(self.settings.resolved_database_url)

    def register(self) -> None:
        with self._store() as store:
            store.upsert_worker(self.name, host=socket.gethostname(), devices=self.queues, queues=self.queues,
                                pid=os.getpid())

    def tick(self) -> MaintenanceReport | None:
        try:
            with self._store() as store:
                current = active_run_id()
                if current is not None and store.get_run(current).status not in states.LIVE_STATUSES:
                    current = None  # its job process died; the pool has not noticed yet
                store.upsert_worker(self.name, host=socket.gethostname(), devices=self.queues,
                                    queues=self.queues, pid=os.getpid(), current_run_id=current)
                return run_maintenance(self.settings, store=store, app=self.app, enforcer=self.enforcer)
        except Exception:  # keep the timer alive through transient database errors
            log.warning("worker maintenance pass failed", exc_info=True)
            return None

    def unregister(self) -> None:
        try:
            with self._store() as store:
                store.mark_worker_offline(self.name)
        except Exception:
            log.warning("could not mark worker %s offline", self.name, exc_info=True)


def active_run_id() -> int | None:
    """The run this worker's job process is executing, from the worker parent's own request table
    (so a killed job process stops being reported at the next pass)."""
    from celery.worker import state as worker_state

    from jobs.celery_app import TASK_NAME

    for request in list(worker_state.active_requests):
        if request.task_name == TASK_NAME and request.args:
            return int(request.args[0])
    return None


class MaintenanceStep(bootsteps.StartStopStep):
    """Celery worker bootstep: registers the worker and runs :class:`WorkerMaintenance` on the timer."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.maintenance: WorkerMaintenance | None = None
        self.tref: Any = None

    def start(self, worker: Any) -> None:
        settings = get_settings()
        queues = sorted(worker.app.amqp.queues.consume_from or worker.app.amqp.queues)
        self.maintenance = WorkerMaintenance(settings, worker.app, name=worker.hostname, queues=queues)
        self.maintenance.register()
        self.tref = worker.timer.call_repeatedly(settings.maintenance_interval_s, self.maintenance.tick)

    def stop(self, worker: Any) -> None:
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None
        if self.maintenance is not None:
            self.maintenance.unregister()
            self.maintenance = None
