"""The sink a job hands to the trainer: every report goes to the database.

Each training step's metrics and sampled episodes are written by one ``Store.log_step`` call (one
transaction, which also records progress and the heartbeat); the episodes go to the store as the
engine reported them (:mod:`transcripts` records, the type the store's readers return too). A background thread keeps the heartbeat
fresh between steps, so a step that spends minutes generating is not mistaken for a dead worker. The
stop flag is read from the database at every step boundary (and cached by the heartbeat thread).

**A database outage pauses training, it does not end it.** Each write that fails with a transient
database error (the server unreachable or restarting, a connection cut, a lock held too long; see
:func:`jobs.faults.transient_database_error`) is tried again after 0.5, 1, 2, 4, then every 5 s, for
up to ``outage_s`` seconds (``COOPLAB_DB_OUTAGE_S``, 60 s), while the trainer waits. A step stays one
transaction: a failed attempt wrote nothing, and a retry skips a step whose commit went through but
whose answer was lost. After ``outage_s`` the error is raised and the run fails with it.

**A settled run takes no more writes.** A step and a heartbeat are written only while the run is
starting, running or stopping, checked in the same UPDATE; when one is refused (the run was marked
``lost`` or ``stopped`` elsewhere) the job stops at once (``on_settled``), or the write raises
:class:`db.errors.RunSettledError`.

**Checkpoints in the artifact store.** With ``uploads`` (a
:class:`~jobs.artifacts.uploads.CheckpointUploads`, when ``COOPLAB_ARTIFACTS_URL`` names a shared
store), each recorded checkpoint is handed to the upload thread; its row gets its ``artifact_url``
only once the upload completed and was checked. A pruned checkpoint's stored copy is deleted too. An
upload that failed after the store's retries fails the run at its next step.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from db import states
from db.errors import RunSettledError
from db.states import InvalidTransition
from db.store import Store
from engine.sinks.base import BaseSink
from engine.transcripts import Episode
from jobs.db_identity import DatabaseFile, DatabaseFileGone
from jobs.faults import first_line, transient_database_error

if TYPE_CHECKING:
    from jobs.artifacts.uploads import CheckpointUploads

log = logging.getLogger(__name__)
# One line per step, evaluation and checkpoint, for the run's own log file (the dashboard's Logs tab).
# It does not propagate: the worker's console stays quiet; the executor attaches the run's file to it.
progress = logging.getLogger("cooplab.progress")
progress.propagate = False
progress.setLevel(logging.INFO)


def step_summary(metrics: dict[str, float]) -> str:
    """``team reward 0.412 · loss first 0.120, second 0.090 · 0.84 s/step``: a step in one line."""
    parts = []
    if "train/reward_mean" in metrics:
        parts.append(f"team reward {metrics['train/reward_mean']:.3f}")
    losses = [(k.split("/")[1], v) for k, v in metrics.items() if k.startswith("agent/") and k.endswith("/loss")
              and k.count("/") == 2]
    if losses:
        parts.append("loss " + ", ".join(f"{name} {value:.3f}" for name, value in losses))
    if "perf/step_time_s" in metrics:
        parts.append(f"{metrics['perf/step_time_s']:.2f} s/step")
    return " · ".join(parts) or f"{len(metrics)} metrics"


RETRY_DELAYS_S = (0.5, 1.0, 2.0, 4.0)
"""Pauses before the first retries of a write; every later one waits :data:`RETRY_MAX_DELAY_S`."""
RETRY_MAX_DELAY_S = 5.0


def retry_delays(outage_s: float) -> list[float]:
    """The pauses between attempts of one write, adding up to at most ``outage_s`` seconds:
    ``retry_delays(10) == [0.5, 1.0, 2.0, 4.0, 2.5]``."""
    delays: list[float] = []
    left = float(outage_s)
    index = 0
    while left > 1e-9:
        pause = min(RETRY_DELAYS_S[index] if index < len(RETRY_DELAYS_S) else RETRY_MAX_DELAY_S, left)
        delays.append(pause)
        left -= pause
        index += 1
    return delays


class DatabaseOutage(ConnectionError):
    """The database did not take a job's write within the stated outage; the message says for how long."""


class DbSink(BaseSink):
    """Writes one run's metrics, transcripts, progress, checkpoints and heartbeat to the store.

    ``start`` moves the run from ``starting`` to ``running`` (the trainer calls it once agents and
    task are built) and starts the heartbeat thread; ``close`` (or ``finish``) stops the thread.
    """

    def __init__(self, store: Store, run_id: int, *, worker: str | None = None,
                 heartbeat_interval_s: float = 5.0, on_settled: Callable[[str], None] | None = None,
                 outage_s: float = 60.0, sleep: Callable[[float], None] = time.sleep,
                 database_file: DatabaseFile | None = None, uploads: CheckpointUploads | None = None) -> None:
        """``on_settled(status)`` is called when the run has been settled elsewhere while this process
        still trains (the stop enforcer marked it ``stopped`` after the grace period, or the reaper
        ``lost``): from the heartbeat thread, or from the step whose write was refused; the job process
        uses it to exit at once. ``outage_s``: how long a write retries a database that does not answer.
        ``database_file``: the SQLite file the job opened; every write and heartbeat first checks that its
        path still leads to it (:mod:`jobs.db_identity`), and a write raises
        :class:`~jobs.db_identity.DatabaseFileGone` once it does not. ``uploads``: where recorded
        checkpoints go to be stored in the artifact store (None: they stay in the data directory)."""
        self.uploads = uploads
        self.database_file = database_file
        self._database_gone: str | None = None
        self.store = store
        self.outage_s = float(outage_s)
        self._sleep = sleep
        self.on_settled = on_settled
        self.run_id = run_id
        self.worker = worker
        self.heartbeat_interval_s = heartbeat_interval_s
        self.steps_logged = 0
        self.last_step = 0  # the step of the last step logged: where resource samples are drawn
        self.total_steps: int | None = None
        self._stop_flag = False
        self._running_marked = False
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------------- heartbeat

    def start_heartbeat(self) -> None:
        """Start the background heartbeat (idempotent)."""
        if self._thread is not None:
            return
        self._beat()
        self._thread = threading.Thread(target=self._heartbeat_loop, name=f"heartbeat-run-{self.run_id}",
                                        daemon=True)
        self._thread.start()

    def _check_database_file(self) -> None:
        """Raise :class:`DatabaseFileGone` once the job's SQLite file is no longer at its path."""
        if self._database_gone is None and self.database_file is not None:
            self._database_gone = self.database_file.problem()
            if self._database_gone is not None:
                self._stop_flag = True
                log.error("run %s: %s", self.run_id, self._database_gone)
        if self._database_gone is not None:
            raise DatabaseFileGone(self._database_gone)

    def _beat(self) -> None:
        try:
            self._check_database_file()
        except DatabaseFileGone:
            return  # nothing written to a deleted file; the next step's write fails the run
        try:
            self._stop_flag = self.store.heartbeat(self.run_id, worker=self.worker, live_only=True) or self._stop_flag
        except RunSettledError as exc:
            self._settled(exc)
        except Exception:  # a transient database error must not kill training; the next beat retries
            log.warning("heartbeat for run %s failed", self.run_id, exc_info=True)

    def _settled(self, exc: RunSettledError) -> None:
        """The run was settled elsewhere: stop training now (exit the job process when it asked to)."""
        self._stop_flag = True
        log.error("run %s: %s", self.run_id, exc)
        if self.on_settled is not None and exc.status in states.TERMINAL_STATUSES:
            self.on_settled(exc.status)

    def _write(self, what: str, write: Callable[[bool], Any]) -> Any:
        """``write(again)`` with retries while the database has a transient fault (``again`` is True
        from the second attempt on); raises :class:`DatabaseOutage` once ``outage_s`` has passed, and
        stops the job when the run was settled elsewhere."""
        delays = retry_delays(self.outage_s)
        started = time.monotonic()
        for attempt in range(len(delays) + 1):
            self._check_database_file()
            try:
                result = write(attempt > 0)
            except RunSettledError as exc:
                self._settled(exc)
                raise
            except Exception as exc:
                if not transient_database_error(exc):
                    raise
                if attempt == len(delays):
                    raise DatabaseOutage(
                        f"the database did not take {what} of run {self.run_id} for {time.monotonic() - started:.0f} s "
                        f"(COOPLAB_DB_OUTAGE_S={self.outage_s:g}): {first_line(str(getattr(exc, 'orig', None) or exc))}"
                    ) from exc
                log.warning("run %s: writing %s failed (%s); trying again in %g s (training waits)", self.run_id,
                            what, first_line(str(getattr(exc, "orig", None) or exc)), delays[attempt])
                self._sleep(delays[attempt])
                continue
            if attempt:
                log.warning("run %s: %s written after %.1f s of database trouble", self.run_id, what,
                            time.monotonic() - started)
            return result
        raise AssertionError("unreachable")

    def _heartbeat_loop(self) -> None:
        while not self._halt.wait(self.heartbeat_interval_s):
            self._beat()

    def close(self) -> None:
        """Stop the heartbeat thread and wait for it."""
        self._halt.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 2 * self.heartbeat_interval_s))
            self._thread = None

    # ------------------------------------------------------------------------- the Sink

    def _mark_running(self) -> None:
        """Move the run ``starting → running``. When that is refused because a stop arrived while the
        job was starting (the run is ``stopping``) or the run was settled elsewhere, the stop flag is
        raised here, so the trainer stops before its first step (checkpointing what it has) and the
        run ends ``stopped`` instead of training."""
        if self._running_marked:
            return
        self._running_marked = True
        try:
            self._write("its start", lambda again: self.store.transition(
                self.run_id, states.RUNNING, expected_from=states.STARTING, worker=self.worker))
        except InvalidTransition as exc:
            if exc.current == states.RUNNING:  # a second sink of the same job marked it; nothing to do
                return
            self._stop_flag = True
            log.info("run %s is %s before training started: stopping now without training", self.run_id,
                     exc.current)

    def start(self, total_steps: int | None, config: dict[str, Any]) -> None:
        if total_steps is not None:
            self.total_steps = int(total_steps)
            self._write("its step count", lambda again: self.store.update_run(self.run_id, total_steps=int(total_steps)))
        self.start_heartbeat()
        self._mark_running()
        progress.info("run %s: training starts (%s steps)", self.run_id, total_steps if total_steps is not None
                      else "unknown number of")

    def log_step(self, step: int, env_step: int, metrics: dict[str, float], episodes: list[Episode]) -> None:
        if self.uploads is not None:
            self.uploads.raise_if_failed()  # a checkpoint that could not be stored fails the run now
        self._mark_running()
        values, records, wall_time = _floats(metrics), list(episodes), time.time()
        stop = self._write(f"step {step}", lambda again: self.store.log_step(
            self.run_id, int(step), int(env_step), values, records, wall_time=wall_time, live_only=True, again=again))
        self._stop_flag = self._stop_flag or bool(stop)
        self.steps_logged += 1
        self.last_step = int(step)
        total = f"/{self.total_steps}" if self.total_steps else ""
        progress.info("step %s%s · %s", step, total, step_summary(_floats(metrics)))

    def log_metrics(self, step: int, env_step: int, metrics: dict[str, float]) -> None:
        values, wall_time = _floats(metrics), time.time()
        self._write(f"metrics at step {step}", lambda again: self.store.log_metrics(
            self.run_id, int(step), None if env_step is None else int(env_step), values, wall_time=wall_time))
        shown = ", ".join(f"{k} {v:.3f}" for k, v in list(values.items())[:6])
        progress.info("metrics at step %s: %s%s", step, shown, " ..." if len(values) > 6 else "")

    def log_resources(self, values: dict[str, float]) -> None:
        """A resource sample (:mod:`jobs.resource_metrics`) at the last step logged (none before the first
        step: a resumed attempt has no step of its own yet): one write, no retries and no progress line
        (the next sample comes soon; a failure is the sampler's to log)."""
        if not self.steps_logged:
            return
        self._check_database_file()
        self.store.log_metrics(self.run_id, self.last_step, None, _floats(values), wall_time=time.time())

    def log_transcripts(self, step: int, episodes: Sequence[Episode]) -> None:
        if episodes:
            records = list(episodes)
            self._write(f"episodes of step {step}", lambda again: self.store.log_episodes(self.run_id, int(step), records))

    def log_checkpoint(self, step: int, path: str) -> None:
        checkpoint = self._write(f"checkpoint {step}",
                                 lambda again: self.store.add_checkpoint(self.run_id, int(step), str(path)))
        progress.info("checkpoint at step %s: %s", step, path)
        if self.uploads is not None:
            self.uploads.raise_if_failed()
            self.uploads.submit(int(step), path, stored=lambda url: self._record_artifact(checkpoint.id, step, url))

    def _record_artifact(self, checkpoint_id: int, step: int, url: str) -> None:
        """From the upload thread: the checkpoint's stored copy is complete and checked."""
        self._write(f"the stored copy of checkpoint {step}",
                    lambda again: self.store.set_checkpoint_artifact(self.run_id, checkpoint_id, url))
        progress.info("checkpoint at step %s stored: %s", step, url)

    def log_checkpoint_pruned(self, step: int, path: str) -> None:
        """The trainer removed an older checkpoint folder (``checkpoint_total_limit``): its row goes too,
        so the run's checkpoint rows list what is on disk."""
        def forget(again: bool) -> int:
            gone = [c.id for c in self.store.list_checkpoints(self.run_id) if c.path == str(path)]
            return self.store.delete_checkpoints(self.run_id, gone) if gone else 0

        self._write(f"the removal of checkpoint {step}", forget)
        progress.info("checkpoint at step %s removed (checkpoint_total_limit): %s", step, path)
        if self.uploads is not None:
            self.uploads.prune(int(step))

    def should_stop(self) -> bool:
        if not self._stop_flag:
            try:
                self._stop_flag = self.store.stop_requested(self.run_id)
            except Exception as exc:  # the next read (or the heartbeat) tells; training must not die of it
                if not transient_database_error(exc):
                    raise
                log.warning("run %s: could not read the stop flag (%s); asking again at the next step", self.run_id,
                            first_line(str(exc)))
        return self._stop_flag

    def finish(self, status: str) -> None:
        self.close()


def _floats(metrics: dict[str, Any]) -> dict[str, float]:
    """Metric values as plain floats (tensors and numpy scalars convert through ``float``); a metric
    without a value this step (None) is left out."""
    return {str(k): float(v) for k, v in metrics.items() if v is not None}
