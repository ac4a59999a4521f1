"""Settling runs whose job is gone, by whoever looks next.

Two ways to know a run's job is gone:

- **On this machine, at once**: the run is live in the database (starting, running, stopping) but no
  process holds its job file (:mod:`jobs.jobfile`); the kernel released the lock when the job died.
  A job that could not write its final state left it (and the reason) in that file: the run ends in
  that state with that reason. Otherwise it becomes ``lost`` (``stopped`` when it was being stopped).
- **Anywhere, after the heartbeat timeout**: :meth:`db.store.Store.reap_lost`, on the database
  server's clock (:mod:`db.clock`). The reaper of a machine spares the runs whose job there still
  pulses its job file (:func:`alive_here`): their heartbeat was held up (another job's lock), not
  their job; and it waits for the write lock at most :data:`LIVENESS_LOCK_WAIT_S`.

:func:`look` does both; ``cooplab runs``, ``cooplab stop``, the dashboard's reads (throttled, see
:func:`look_now`) and every maintenance pass call it, so a run whose worker died is settled even when no
worker is left alive. The worker itself settles the run of a job process it lost from Celery's own
signal (:mod:`jobs.tasks`). Torch-free and Celery-free.
"""

from __future__ import annotations

import logging
import shutil
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from db import states
from db.records import Run
from db.states import InvalidTransition
from db.store import Store
from jobs import jobfile
from jobs.settings import Settings

log = logging.getLogger(__name__)


def finish_run(store: Store, run_id: int, to: str, *, error: str | None = None,
               expected_from: str | None = None) -> str:
    """Move the run to the final state ``to`` through the steps the state machine requires (``running``
    → ``stopping`` → ``stopped``, ``starting`` → ``running`` → ``succeeded``), each a compare-and-set.
    ``expected_from`` makes the first step conditional on the state the caller saw. When someone else
    settled the run first (or it moved on), their state is kept and returned."""
    try:
        current = expected_from or store.get_run(run_id).status
        if to == states.STOPPED and current == states.RUNNING:
            store.transition(run_id, states.STOPPING, expected_from=states.RUNNING)
            current = expected_from = states.STOPPING
        elif to == states.SUCCEEDED and current == states.STARTING:
            store.transition(run_id, states.RUNNING, expected_from=states.STARTING)
            current = expected_from = states.RUNNING
        return store.transition(run_id, to, error=error, expected_from=expected_from).status
    except InvalidTransition as exc:
        if exc.current != to:
            log.info("run %s was not moved to %s: it is %s", run_id, to, exc.current)
        return exc.current


def cleanup_partial_writes(output_dir: str | Path | None, *, export: bool = False) -> list[Path]:
    """Remove temporary checkpoint folders a dead or failed job left in its run folder (they hold
    disk space and are never used); with ``export`` also the final-model export ``model/``, which a
    run that failed on a full disk may have left half-written. Returns what was removed."""
    if not output_dir:
        return []
    removed = []
    if export and (Path(output_dir) / "model").is_dir():
        shutil.rmtree(Path(output_dir) / "model", ignore_errors=True)
        removed.append(Path(output_dir) / "model")
    folder = Path(output_dir) / "checkpoints"
    for pattern in (".tmp-*", ".old-*"):
        for partial in folder.glob(pattern):
            shutil.rmtree(partial, ignore_errors=True)
            removed.append(partial)
    if removed:
        log.info("removed partial writes %s", ", ".join(str(p) for p in removed))
    return removed


def dead_job_end(run: Run, state: jobfile.JobState | None, cause: str, *, grace_s: float,
                 now: datetime | None = None) -> tuple[str, str | None]:
    """The final state and error of live ``run`` whose job process is gone: the job's last words when
    it left some, else ``stopped`` for a run being stopped, else ``lost`` with ``cause``."""
    if state is not None and state.status in states.TERMINAL_STATUSES:
        return state.status, state.reason
    if run.status == states.STOPPING and run.stop_requested:
        now = now or datetime.now(UTC)
        asked = run.stop_requested_at
        if asked is not None and now - asked >= timedelta(seconds=grace_s):
            return states.STOPPED, f"did not stop within the {grace_s:g} s grace period; its job was terminated"
        return states.STOPPED, f"its job process ended while stopping: {cause}"
    return states.LOST, cause


def settle_dead_job(store: Store, settings: Settings, run: Run, cause: str,
                    state: jobfile.JobState | None = None) -> str:
    """Settle live ``run`` whose job process is known to be gone (compare-and-set on the state it was
    seen in); removes its partial writes and job file. Returns the state the run is in afterwards.
    When the kernel's OOM killer killed in the job's memory cgroup since the job started, the cause
    says "out of memory" (:mod:`jobs.oom`; its job file is on this machine)."""
    if state is not None and state.host == socket.gethostname():
        cause = state.oom_cause() or cause
    now = store.server_now() if run.status == states.STOPPING else None
    to, error = dead_job_end(run, state, cause, grace_s=settings.stop_grace_s, now=now)
    status = finish_run(store, run.id, to, error=error, expected_from=run.status)
    if status in states.TERMINAL_STATUSES:
        if status == to:
            log.warning("run %s %s: %s", run.id, status, error or "its job ended")
        cleanup_partial_writes(run.output_dir)
        jobfile.remove(settings.data_dir, run.id)
    return status


def settle_local_dead_jobs(store: Store, settings: Settings, runs: list[Run] | None = None) -> list[int]:
    """Settle the live runs whose job file on this machine is held by no process; returns their ids.
    Runs without a job file here (another machine, another data directory) are left to the heartbeat."""
    host = socket.gethostname()
    if runs is None:
        runs = store.list_runs(statuses=states.LIVE_STATUSES, limit=10_000)
    settled = []
    for run in runs:
        if run.status not in states.LIVE_STATUSES:
            continue
        state = jobfile.probe(settings.data_dir, run.id)
        if not job_is_gone(state, host):
            continue
        if settle_dead_job(store, settings, run, dead_job_cause(state), state) in states.TERMINAL_STATUSES:
            settled.append(run.id)
    return settled


def job_is_gone(state: jobfile.JobState | None, host: str | None = None) -> bool:
    """True when a job file of this machine is held by no process: its job died (or left its last words)."""
    return state is not None and not state.held and state.host == (host or socket.gethostname())


def dead_job_cause(state: jobfile.JobState) -> str:
    """Why a run whose job file nobody holds is over, for its error."""
    who = f"pid {state.pid} on {state.host}" if state.pid else f"on {state.host}"
    return (f"its job process ({who}) is gone: it died without ending the run (killed, out of memory, "
            f"or its worker was killed)")


LIVENESS_LOCK_WAIT_S = 2.0
"""How long a look (a reader's, a maintenance pass's) waits for the database's write lock to mark runs
lost or workers offline. A job hung inside a write transaction holds that lock (all of SQLite, or its
run's row on PostgreSQL); the look leaves its verdicts to the next one instead of hanging behind it."""


def alive_here(store: Store, settings: Settings) -> set[int]:
    """Live runs whose job runs on this machine and pulsed within the heartbeat timeout (its job file is
    held and was touched, :meth:`jobs.jobfile.JobFile.start_pulse`): alive, even when the database did
    not take its heartbeat (a lock held by another, hung, job). The reaper spares them, so such a run
    ends the way its job ends it (the first true cause), not with the reaper's guess. A job that is
    stopped or frozen stops pulsing, and is judged by its heartbeat as before."""
    host = socket.gethostname()
    now = time.time()  # the job file's time is this machine's clock, like this
    alive = set()
    for run in store.list_runs(statuses=states.LIVE_STATUSES, limit=10_000):
        state = jobfile.probe(settings.data_dir, run.id)
        if (state is not None and state.held and state.host == host and state.touched_at is not None
                and now - state.touched_at < settings.heartbeat_timeout_s):
            alive.add(run.id)
    return alive


def reap_lost_briefly(store: Store, settings: Settings, now: datetime | None = None) -> list[int]:
    """:meth:`db.store.Store.reap_lost` with the write lock waited for at most :data:`LIVENESS_LOCK_WAIT_S`;
    a locked or unreachable database reaps nothing this time (logged) instead of raising."""
    from jobs.faults import first_line, transient_database_error

    try:
        return store.reap_lost(settings.heartbeat_timeout_s, now=now, lock_wait_s=LIVENESS_LOCK_WAIT_S,
                               spare=alive_here(store, settings))
    except Exception as exc:
        if not transient_database_error(exc):
            raise
        log.warning("runs not checked for lost heartbeats: the database is locked or unreachable (%s); "
                    "the next look tries again", first_line(str(exc)))
        return []


def look(store: Store, settings: Settings) -> list[int]:
    """Settle every run whose job is gone: at once for jobs of this machine (job files), after the
    heartbeat timeout for the others; a lost one with attempts left under its retry policy is queued
    again (:mod:`jobs.retries`). Returns the ids it settled."""
    settled = settle_local_dead_jobs(store, settings)
    for run_id in reap_lost_briefly(store, settings):
        log.warning("run %s lost: no heartbeat for %g s", run_id, settings.heartbeat_timeout_s)
        settled.append(run_id)
    if settled:
        from jobs.retries import retry_lost_runs

        retry_lost_runs(store, settings, settled)
    return settled


_LAST_LOOK: dict[str, float] = {}
_LOOK_LOCK = threading.Lock()


def look_now(store: Store, settings: Settings, *, min_interval_s: float = 2.0) -> list[int]:
    """:func:`look`, at most once per ``min_interval_s`` per database in this process (for readers
    that refresh often, like the dashboard). Never raises: a reader must still show what it has."""
    now = time.monotonic()
    with _LOOK_LOCK:
        if now - _LAST_LOOK.get(store.url, float("-inf")) < min_interval_s:
            return []
        _LAST_LOOK[store.url] = now
    try:
        return look(store, settings)
    except Exception as exc:  # a read-only, unreachable or emptied database: the reader goes on
        from jobs.faults import first_line

        log.warning("could not look for dead runs: %s", first_line(str(getattr(exc, "orig", None) or exc)))
        log.debug("looking for dead runs failed", exc_info=True)
        return []


def heartbeat_age(run: Run, now: datetime | None = None) -> float | None:
    """Seconds since the run's last heartbeat (None when it never sent one). Pass the database
    server's time as ``now`` (:meth:`db.store.Store.server_now`): the heartbeat is on its clock."""
    if run.heartbeat_at is None:
        return None
    return max(0.0, ((now or datetime.now(UTC)) - run.heartbeat_at).total_seconds())
