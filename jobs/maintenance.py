"""Keeping run states truthful when processes die or ignore a stop request.

:func:`run_maintenance` does one pass: runs whose job process is gone are settled (at once when the
job ran on this machine, see :mod:`jobs.liveness`; after ``heartbeat_timeout_s`` without a heartbeat
otherwise) as ``lost``, or ``stopped`` when they were being stopped, or in the state the job left in
its job file; lost runs whose retry policy has attempts left are queued again (:mod:`jobs.retries`);
runs that have been ``stopping`` for longer than ``stop_grace_s`` get their job process terminated
(``revoke(terminate=True)``) and are marked ``stopped``; workers that stopped reporting are marked
offline; and queued runs the broker has lost are sent again (:mod:`jobs.reconcile`). Every step is a
compare-and-set in the database, so several workers and the dashboard may run it concurrently.

Workers run it on a thread of its own in the worker parent (:class:`MaintenanceStep`, a Celery
bootstep; :class:`Repeater`), apart from Celery's timer thread, which watches the job processes every
second (:meth:`WorkerMaintenance.watch_jobs`, job files only): a pass slowed by the database (a lock
held by a hung job waits at most its write timeouts, see :mod:`db.engine`) never delays that watch. There
it also settles the run of a job process the worker no longer holds (:meth:`WorkerMaintenance.settle_orphans`;
Celery's ``WorkerLostError`` settles it at once, see :func:`settle_lost_job`); ``cooplab up`` calls
:func:`run_maintenance` on its own schedule.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery import Celery, bootsteps

from db import states
from db.states import InvalidTransition
from db.store import Store
from jobs import fork_guard, jobfile
from jobs.liveness import (
    LIVENESS_LOCK_WAIT_S,
    dead_job_cause,
    job_is_gone,
    reap_lost_briefly,
    settle_dead_job,
    settle_local_dead_jobs,
)
from jobs.retries import retry_lost_runs
from jobs.settings import Settings, get_settings

log = logging.getLogger(__name__)

JOB_WATCH_INTERVAL_S = 1.0
"""How often a worker checks that the job processes of its runs still live (job files, no database)."""

TERMINATE_SIGNAL = "SIGKILL"
"""Sent to a job that ignored its stop flag for the whole grace period: it cannot be caught."""


@dataclass(frozen=True)
class MaintenanceReport:
    """What one pass changed: runs marked lost, runs settled as stopped (terminated or reaped),
    workers marked offline, queued runs sent again, runs settled ``failed`` from their job's last words,
    new attempts queued for lost runs by their retry policy (:mod:`jobs.retries`)."""

    lost: tuple[int, ...] = ()
    stopped: tuple[int, ...] = ()
    offline_workers: tuple[str, ...] = ()
    requeued: tuple[int, ...] = ()
    failed: tuple[int, ...] = ()
    retried: tuple[int, ...] = ()


def grace_start(asked: datetime, storing_at: datetime | None) -> tuple[datetime, bool]:
    """When a stopping run's grace period starts: at the stop request ``asked``, or at ``storing_at``
    (the job's last file stored) when that is later; and whether it was the latter (pure function)."""
    if storing_at is not None and storing_at > asked:
        return storing_at, True
    return asked, False


class StopEnforcer:
    """Terminates runs that stay ``stopping`` past the grace period and marks them ``stopped``.

    The grace period counts from the moment the stop was requested (the run's ``stop_requested_at``,
    stamped and judged with the database server's clock, so a requester's or enforcer's clock being
    off neither shortens nor extends it),
    so an enforcer that starts late, or runs in another process than the one that asked, does not
    extend it. A ``stopping`` run without that time (moved there directly, never flagged) counts from
    the first time this enforcer saw it stopping. A job that has stopped training and is storing its
    last checkpoint and exports in the artifact store stamps ``storing_at`` after each file it stored:
    the grace period then counts from the later of the two, so a stop never cuts off an upload that is
    making progress, and an upload that stalls for the grace period is terminated like a hung step.
    """

    def __init__(self) -> None:
        self._first_seen: dict[int, datetime] = {}

    def enforce(self, store: Store, app: Celery | None, grace_s: float, now: datetime | None = None) -> list[int]:
        now = now or store.server_now()  # stop_requested_at is on the server's clock too
        stopping = store.list_runs(statuses=[states.STOPPING], limit=10_000)
        self._first_seen = {r.id: self._first_seen.get(r.id, now) for r in stopping}
        settled: list[int] = []
        for run in stopping:
            since, storing = grace_start(run.stop_requested_at or self._first_seen[run.id], run.storing_at)
            if now - since < timedelta(seconds=grace_s):
                continue
            if app is not None and run.celery_task_id:
                try:
                    app.control.revoke(run.celery_task_id, terminate=True, signal=TERMINATE_SIGNAL)
                except Exception:  # the broker may be down; the job's own sink also ends a settled run
                    log.warning("could not revoke task %s of run %s", run.celery_task_id, run.id, exc_info=True)
            if storing:
                reason = f"stored no file of its artifacts for the {grace_s:g} s grace period while stopping"
            else:
                reason = f"did not stop within the {grace_s:g} s grace period"
            try:
                store.transition(run.id, states.STOPPED, expected_from=states.STOPPING,
                                 error=f"{reason}; its job was terminated")
            except InvalidTransition:
                continue  # it stopped by itself (or was reaped) meanwhile
            log.warning("run %s %s: terminated and marked stopped", run.id, reason)
            settled.append(run.id)
        return settled


_DEFAULT_ENFORCER = StopEnforcer()


def run_maintenance(settings: Settings | None = None, *, store: Store | None = None, app: Celery | None = None,
                    enforcer: StopEnforcer | None = None, now: datetime | None = None,
                    reconcile: bool = True) -> MaintenanceReport:
    """One maintenance pass (see the module docstring). Opens its own store and Celery app when not given."""
    settings = settings or get_settings()
    own_store = store is None
    store = store or Store(settings.resolved_database_url)
    if app is None:
        from jobs.celery_app import get_app

        app = get_app(settings)
    try:
        settled = settle_local_dead_jobs(store, settings)
        reaped = reap_lost_briefly(store, settings, now=now)
        ended = {i: store.get_run(i).status for i in (*settled, *reaped)}
        for run_id in reaped:
            if ended[run_id] == states.LOST:
                log.warning("run %s lost: no heartbeat for %g s", run_id, settings.heartbeat_timeout_s)
        retried = retry_lost_runs(store, settings)  # the runs just lost, and any a settler left unretried
        terminated = (enforcer or _DEFAULT_ENFORCER).enforce(store, app, settings.stop_grace_s, now=now)
        offline = _mark_stale_workers_offline(store, settings, now)
        requeued: list[int] = []
        if reconcile:
            from jobs.reconcile import BrokerUnreadable
            from jobs.reconcile import reconcile as reconcile_queued

            try:
                requeued = reconcile_queued(store, app, settings, min_age_s=settings.resend_after_s,
                                            confirm_s=max(1.0, settings.maintenance_interval_s))
            except BrokerUnreadable as exc:
                log.info("queued runs not checked against the broker: %s", exc)
        _schedule_studies(settings, store)
        return MaintenanceReport(
            lost=tuple(i for i, status in ended.items() if status == states.LOST),
            stopped=tuple([i for i, status in ended.items() if status == states.STOPPED] + terminated),
            offline_workers=tuple(offline), requeued=tuple(requeued),
            failed=tuple(i for i, status in ended.items() if status == states.FAILED), retried=tuple(retried))
    finally:
        if own_store:
            store.close()


def _mark_stale_workers_offline(store: Store, settings: Settings, now: datetime | None) -> list[str]:
    """Workers that stopped reporting go offline; like the reaper, waiting for the write lock at most
    :data:`jobs.liveness.LIVENESS_LOCK_WAIT_S` (a locked database leaves it to the next pass)."""
    from jobs.faults import first_line, transient_database_error

    try:
        return store.mark_stale_workers_offline(max(3 * settings.maintenance_interval_s, settings.heartbeat_timeout_s),
                                                now=now, lock_wait_s=LIVENESS_LOCK_WAIT_S)
    except Exception as exc:
        if not transient_database_error(exc):
            raise
        log.warning("workers not checked: the database is locked or unreachable (%s)", first_line(str(exc)))
        return []


def _schedule_studies(settings: Settings, store: Store) -> None:
    """Top up and early-stop the active studies (:func:`jobs.studies.schedule_studies`)."""
    try:
        from jobs.studies import schedule_studies

        schedule_studies(settings=settings, store=store)
    except Exception:  # a study's trouble never stops the run maintenance
        log.warning("scheduling the studies failed", exc_info=True)


def held_run_ids() -> set[int]:
    """Runs whose task this worker holds (received and not yet finished), from the worker parent's own
    request tables."""
    from celery.worker import state as worker_state

    from jobs.celery_app import TASK_NAME

    held = set()
    for request in [*worker_state.reserved_requests, *worker_state.active_requests]:
        if request.task_name == TASK_NAME and request.args:
            held.add(int(request.args[0]))
    return held


def job_death_cause(exception: BaseException | None) -> str:
    """A readable cause from Celery's ``WorkerLostError`` (``Worker exited prematurely: signal 9
    (SIGKILL) Job: 0.``)."""
    text = str(exception or "")
    signal = re.search(r"signal (\d+) \((\w+)\)", text)
    if signal:
        return (f"its job process was killed by signal {signal.group(1)} ({signal.group(2)}): by hand, or by "
                "the system when out of memory")
    code = re.search(r"exitcode (\d+)", text)
    if code:
        return f"its job process exited with code {code.group(1)} before ending the run"
    return f"its job process died: {text.split(' Job:')[0] or 'no reason given'}"


def settle_lost_job(run_id: int, cause: str, settings: Settings | None = None) -> str | None:
    """Settle run ``run_id`` whose job process this worker knows is gone: the state its job left in
    its job file, else ``lost`` with ``cause`` (``stopped`` when it was being stopped). Returns its
    state afterwards; None when the database could not be reached (the next pass tries again)."""
    settings = settings or get_settings()
    try:
        with Store(settings.resolved_database_url) as store:
            run = store.get_run(run_id)
            if run.status not in states.LIVE_STATUSES:
                return run.status
            return settle_dead_job(store, settings, run, cause, jobfile.probe(settings.data_dir, run_id))
    except Exception:
        log.warning("could not settle run %s after its job process was lost", run_id, exc_info=True)
        return None


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
            with fork_guard.bookkeeping(), self._store() as store:
                self.settle_orphans(store)
                current = active_run_id()
                if current is not None and store.get_run(current).status not in states.LIVE_STATUSES:
                    current = None  # its job process died; the pool has not noticed yet
                store.upsert_worker(self.name, host=socket.gethostname(), devices=self.queues,
                                    queues=self.queues, pid=os.getpid(), current_run_id=current)
                return run_maintenance(self.settings, store=store, app=self.app, enforcer=self.enforcer)
        except Exception:  # keep the timer alive through transient database errors
            log.warning("worker maintenance pass failed", exc_info=True)
            return None

    def settle_orphans(self, store: Store) -> list[int]:
        """Settle the live runs recorded on this worker that it no longer holds: their job process
        ended without writing the run's end (it died, or left its end in its job file)."""
        held = held_run_ids()
        settled = []
        for run in store.list_runs(statuses=states.LIVE_STATUSES, limit=10_000):
            if run.worker != self.name or run.id in held:
                continue
            state = jobfile.probe(self.settings.data_dir, run.id)
            if state is not None and state.held:
                continue  # some process still holds it: not for this worker to judge
            status = settle_dead_job(store, self.settings, run, "its job process ended without ending the run",
                                     state)
            if status in states.TERMINAL_STATUSES:
                settled.append(run.id)
        return settled

    def watch_jobs(self) -> list[int]:
        """Settle at once the runs this worker holds whose job process died (its job file is held by no
        process): a cheap check, run every second, with no database access unless a job died."""
        settled = []
        try:
            with fork_guard.bookkeeping():
                settled = self._settle_dead_jobs()
        except Exception:  # keep the timer alive
            log.warning("watching the job processes failed", exc_info=True)
        return settled

    def _settle_dead_jobs(self) -> list[int]:
        settled = []
        for run_id in held_run_ids():
            state = jobfile.probe(self.settings.data_dir, run_id)
            if job_is_gone(state) and settle_lost_job(run_id, dead_job_cause(state), self.settings) is not None:
                settled.append(run_id)
        return settled

    def unregister(self) -> None:
        try:
            with self._store() as store:
                store.mark_worker_offline(self.name)
        except Exception:
            log.warning("could not mark worker %s offline", self.name, exc_info=True)


def active_run_ids() -> list[int]:
    """The runs this worker's job processes are executing (one per slot), from the worker parent's own
    request table (so a killed job process stops being reported at the next pass)."""
    from celery.worker import state as worker_state

    from jobs.celery_app import TASK_NAME

    return [int(request.args[0]) for request in list(worker_state.active_requests)
            if request.task_name == TASK_NAME and request.args]


def active_run_id() -> int | None:
    """The first of :func:`active_run_ids` (what the worker registry shows as its current run)."""
    found = active_run_ids()
    return found[0] if found else None


class Repeater:
    """Calls ``work`` every ``interval_s`` seconds on a daemon thread of its own (the next call is
    ``interval_s`` after the previous one ended), until :meth:`stop`. ``work`` must not raise."""

    def __init__(self, name: str, interval_s: float, work: Callable[[], object]) -> None:
        self.interval_s = interval_s
        self.work = work
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def _loop(self) -> None:
        while not self._stopped.wait(self.interval_s):
            self.work()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Stop calling ``work``; waits up to ``timeout`` s for a call in progress to end."""
        self._stopped.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)


class MaintenanceStep(bootsteps.StartStopStep):
    """Celery worker bootstep: registers the worker and runs :class:`WorkerMaintenance` on the timer."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        # Import now, in the main thread before the pool forks, what the timer thread's passes import
        # lazily: a job process forked while another thread holds a module's import lock would hang
        # the first time it imports that module (jobs.studies pulls in the run-config schema).
        import jobs.reconcile  # noqa: F401
        import jobs.studies  # noqa: F401

        # Whatever a later pass imports or locks, a job process is forked between passes, never during one.
        fork_guard.install()

        self.maintenance: WorkerMaintenance | None = None
        self.passes: Repeater | None = None
        self.watch_tref: Any = None

    def start(self, worker: Any) -> None:
        settings = get_settings()
        queues = sorted(worker.app.amqp.queues.consume_from or worker.app.amqp.queues)
        self.maintenance = WorkerMaintenance(settings, worker.app, name=worker.hostname, queues=queues)
        self.maintenance.register()
        self.passes = Repeater("cooplab-maintenance", settings.maintenance_interval_s, self.maintenance.tick)
        self.passes.start()
        self.watch_tref = worker.timer.call_repeatedly(JOB_WATCH_INTERVAL_S, self.maintenance.watch_jobs)

    def stop(self, worker: Any) -> None:
        if self.watch_tref is not None:
            self.watch_tref.cancel()
        self.watch_tref = None
        if self.passes is not None:
            self.passes.stop(timeout=10.0)  # a pass stuck on the database must not hold up shutdown
            self.passes = None
        if self.maintenance is not None:
            self.maintenance.unregister()
            self.maintenance = None
