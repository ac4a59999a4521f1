"""Execute one stored run from start to its truthful final state.

:func:`execute_run` is the plain function behind the Celery task (the task only passes the run id).
It claims the run with a compare-and-set ``queued → starting`` (so a redelivered message never runs a
finished, stopped or lost run again), validates the stored config, trains through
``engine.build.run.run_training`` with a :class:`~jobs.db_sink.DbSink`, and ends in ``succeeded``,
``stopped`` or ``failed`` (with the error and traceback). torch and the engine are imported inside the
function, so the worker parent that forks job processes never loads them (nor initialises CUDA).

Before the claim the job locks its job file (:mod:`jobs.jobfile`), so a job that dies is noticed at
once by anyone on its machine (:mod:`jobs.liveness`). When training fails on a full disk (or a quota,
or permissions), the stored error's first line says so, naming the path and the free space
(:mod:`jobs.faults`), and the temporary folders the failed writes left are removed first. The final
state is written with retries; if the database still cannot take it, the job leaves the state and the
reason in its job file, where whoever settles the run next finds them. The data directory must belong
to the run's database (:mod:`jobs.datadir`), or the run fails before it writes anything there.
The stored config is checked again against the operator's budget (:mod:`engine.schema.budget`), and the
engine gets the data directory as the only place besides the run's folder that the config's folders
may name (:mod:`engine.policy.write_paths`); it checks that the devices the config names exist in this job.

A stop requested while the run is ``starting`` moves it to ``stopping``; the job then never trains:
before building it ends the run ``stopped`` at once, and when the stop arrives while agents and task
are being built, the sink's refused ``starting → running`` raises the stop flag, so the trainer stops
before its first step (saving a checkpoint of the state it was given) and the run ends ``stopped``.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from db import states
from db.errors import NotFoundError, RunSettledError
from db.records import Run
from db.states import InvalidTransition
from db.store import Store
from jobs import jobfile
from jobs.datadir import DataDirOwnedError, claim_data_dir
from jobs.db_identity import DatabaseFileGone
from jobs.faults import describe_failure, resource_reason
from jobs.lineage import resume_checkpoint
from jobs.liveness import cleanup_partial_writes, finish_run
from jobs.settings import Settings, apply_engine_settings, get_settings

log = logging.getLogger(__name__)

TrainFn = Callable[..., Any]
"""``run_training(config, *, output_dir, sink, resume_from=None) -> TrainResult``."""


def local_device(queue: str) -> str:
    """The torch device a job on ``queue`` uses inside its worker.

    A ``cuda:N`` worker pins its GPU with ``CUDA_VISIBLE_DEVICES=N``, so inside the job that GPU is
    ``cuda:0``; the ``cpu`` queue trains on the CPU.
    """
    return "cpu" if queue == "cpu" else "cuda:0"


def run_output_dir(settings: Settings, run_id: int) -> Path:
    """Where a run's checkpoints and exports go: ``<data dir>/runs/run-<id>``."""
    return settings.runs_dir / f"run-{run_id}"


def run_log_path(settings: Settings, run_id: int) -> Path:
    """The run's own log file: ``<data dir>/logs/run-<id>.log``."""
    return settings.logs_dir / f"run-{run_id}.log"


FINISH_RETRY_DELAYS_S = (0.2, 0.5, 1.0, 2.0, 3.0, 3.0)
"""Pauses between attempts to write a run's final state (about 10 s in all) before the job gives up and
leaves it in its job file."""


def _finish(store: Store, run_id: int, to: str, *, error: str | None = None,
            job: jobfile.JobFile | None = None) -> str:
    """Move the run to a final state; if someone else settled it first (the stop enforcer, the
    reaper), keep theirs and return it. A database error is retried; when every attempt fails, the
    state and the reason go into the job file (``job``) for whoever settles the run next."""
    for attempt, delay in enumerate((*FINISH_RETRY_DELAYS_S, None)):
        try:
            status = finish_run(store, run_id, to, error=error)
            if status != to:
                log.warning("run %s ended as %s, but it is already %s; keeping that", run_id, to, status)
            return status
        except Exception as exc:  # the database is unreachable, locked or its disk is full
            if delay is None:
                log.error("run %s: could not record its end (%s) after %d attempts: %s", run_id, to, attempt + 1,
                          exc)
                reason = error or f"the job ended {to}"
                if job is not None and job.last_words(to, reason):
                    log.error("run %s: its end (%s) is left in %s for whoever settles it next", run_id, to, job.path)
                return to
            log.warning("run %s: writing its end (%s) failed (%s); trying again in %g s", run_id, to, exc, delay)
            time.sleep(delay)
    return to


class _RunLogFile:
    """Attach a file handler for one run to the root logger while the run executes."""

    def __init__(self, path: Path, level: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.handler = logging.FileHandler(path, encoding="utf-8")
        self.handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self.handler.setLevel(level.upper())
        self.root = logging.getLogger()
        self.old_level = self.root.level

    def __enter__(self) -> _RunLogFile:
        self.root.addHandler(self.handler)
        logging.getLogger("cooplab.progress").addHandler(self.handler)  # step lines: the file only
        if self.root.level > self.handler.level or self.root.level == logging.NOTSET:
            self.root.setLevel(self.handler.level)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("cooplab.progress").removeHandler(self.handler)
        self.root.removeHandler(self.handler)
        self.root.setLevel(self.old_level)
        self.handler.close()


def execute_run(run_id: int, *, settings: Settings | None = None, store: Store | None = None,
                worker: str | None = None, train_fn: TrainFn | None = None,
                exit_when_settled: bool = False) -> str:
    """Run stored run ``run_id`` to completion and return the state it ended in.

    ``train_fn`` defaults to ``engine.build.run.run_training``. A run that is not ``queued`` is left
    alone (its state is returned), which makes redelivered task messages harmless. With
    ``exit_when_settled`` (job processes) the process exits at once if the run is marked ``stopped``
    by the stop enforcer while it still trains, so a terminated run never keeps computing.
    """
    settings = settings or get_settings()
    own_store = store is None
    store = store or Store(settings.resolved_database_url)
    try:
        return _execute(store, settings, run_id, worker=worker, train_fn=train_fn,
                        exit_when_settled=exit_when_settled)
    finally:
        if own_store:
            store.close()


def _execute(store: Store, settings: Settings, run_id: int, *, worker: str | None,
             train_fn: TrainFn | None, exit_when_settled: bool) -> str:
    try:
        run = store.get_run(run_id)
    except NotFoundError:
        log.error("run %s does not exist (deleted before it started?); nothing to do", run_id)
        return "missing"
    if run.status != states.QUEUED:
        log.warning("run %s is %s, not queued: not running it again", run_id, run.status)
        return run.status
    try:
        claim_data_dir(settings, store)
    except DataDirOwnedError as exc:
        log.error("run %s: %s", run_id, exc)
        return finish_run(store, run_id, states.FAILED, error=str(exc), expected_from=states.QUEUED)
    except Exception as exc:  # the data directory cannot be written: fail the run, never leave it queued
        log.exception("run %s: the data directory %s cannot be used", run_id, settings.data_dir)
        error = describe_failure(exc, output_path=settings.data_dir, database_url=settings.resolved_database_url)
        return finish_run(store, run_id, states.FAILED, error=error, expected_from=states.QUEUED)
    job = jobfile.JobFile.acquire(settings.data_dir, run_id)  # before the claim: a live claim always has a holder
    if job is None:
        log.warning("run %s is being executed by another process on this machine: not running it again", run_id)
        return store.get_run(run_id).status
    job.start_pulse(settings.heartbeat_interval_s)  # alive, whether or not the database takes its heartbeat
    try:
        return _claimed(store, settings, run, job=job, worker=worker, train_fn=train_fn,
                        exit_when_settled=exit_when_settled)
    finally:
        job.release(remove=not job.keep)  # kept when it holds the run's last words


def _claimed(store: Store, settings: Settings, run: Run, *, job: jobfile.JobFile, worker: str | None,
             train_fn: TrainFn | None, exit_when_settled: bool) -> str:
    run_id = run.id
    try:
        store.transition(run_id, states.STARTING, expected_from=states.QUEUED, worker=worker)
    except InvalidTransition as exc:  # another delivery or a cancel won the race
        log.warning("run %s could not be claimed: %s", run_id, exc)
        return exc.current
    # A run queued long ago has no heartbeat yet; beat now so the reaper does not count from creation.
    store.heartbeat(run_id, worker=worker)

    log_path = run_log_path(settings, run_id)
    output_dir = run_output_dir(settings, run_id)
    device = local_device(run.queue)
    if worker:
        _set_worker_run(store, worker, run_id)
    try:
        store.update_run(run_id, log_path=str(log_path), output_dir=str(output_dir), device=run.queue)
        with _RunLogFile(log_path, settings.log_level):
            log.info("run %s (experiment %s, attempt %s) starting on %s as %s", run_id, run.experiment_id,
                     run.attempt, run.queue, device)
            return _train(store, settings, run, device=device, output_dir=output_dir, worker=worker,
                          train_fn=train_fn, exit_when_settled=exit_when_settled, job=job)
    except Exception as exc:  # anything after the claim must still end the run truthfully
        log.exception("run %s could not be started", run_id)
        error = describe_failure(exc, output_path=output_dir, database_url=settings.resolved_database_url)
        cleanup_partial_writes(output_dir)
        return _finish(store, run_id, states.FAILED, error=error, job=job)
    finally:
        if worker:
            _set_worker_run(store, worker, None)


def _train(store: Store, settings: Settings, run: Run, *, device: str, output_dir: Path,
           worker: str | None, train_fn: TrainFn | None, exit_when_settled: bool,
           job: jobfile.JobFile | None = None) -> str:
    from engine.schema.budget import budget_problems
    from engine.schema.run_config import ConfigError, parse_run_config
    from jobs.preflight import run_budget

    apply_engine_settings(settings)  # the operator's task module allowlist, for parsing and building
    try:
        data = dict(run.config)
        data["trainer"] = {**dict(data.get("trainer") or {}), "device": device}
        config = parse_run_config(data)
        over = budget_problems(config, run_budget(settings))  # a config stored before, or checked elsewhere
        if over:
            raise ConfigError("\n".join(f"{field}: {message}" for field, message in over))
    except ConfigError as exc:
        message = f"invalid run config:\n{exc}\nFix the config and submit it again."
        log.error("run %s: %s", run.id, message)
        return _finish(store, run.id, states.FAILED, error=message, job=job)

    sink = _job_sink(store, run.id, worker=worker, heartbeat_interval_s=settings.heartbeat_interval_s,
                     on_settled=_exit_job_process if exit_when_settled else None, outage_s=settings.db_outage_s,
                     database_file=_database_file(store))
    try:
        sink.start_heartbeat()
        if sink.should_stop():
            # A stop arrived while the job was starting: nothing has been trained, so nothing is built.
            log.info("run %s was asked to stop before training started: ending it stopped", run.id)
            return _finish(store, run.id, states.STOPPED, job=job)
        resume_from = _resume_from(store, run)
        if train_fn is None:  # the run's folders for writing: its own and the data directory
            from engine.build.run import run_training

            train_fn = functools.partial(run_training, write_roots=(settings.data_dir,))
        output_dir.mkdir(parents=True, exist_ok=True)
        result = train_fn(config, output_dir=str(output_dir), sink=sink, resume_from=resume_from)
    except RunSettledError as exc:  # settled elsewhere (lost, stopped): its end is written; nothing to add
        log.error("run %s: training stopped: %s", run.id, exc)
        return exc.status
    except DatabaseFileGone as exc:  # writing the end into the deleted file would only lose it too
        log.error("run %s failed: %s", run.id, exc)
        if job is not None and job.last_words(states.FAILED, str(exc)):
            log.error("run %s: its end (failed) is left in %s", run.id, job.path)
        return states.FAILED
    except Exception as exc:
        log.exception("run %s failed", run.id)
        # the reason first (the free space as the failure left it), then the partial writes go: the
        # temporary checkpoint folders, and on a filesystem fault the export it may have cut short
        error = describe_failure(exc, output_path=output_dir, database_url=settings.resolved_database_url)
        fault = resource_reason(exc, output_path=output_dir, database_url=settings.resolved_database_url)
        cleanup_partial_writes(output_dir, export=fault is not None)
        return _finish(store, run.id, states.FAILED, error=error, job=job)
    finally:
        sink.close()
        sink.forget_pruned_checkpoints()
    status = getattr(result, "status", "completed")
    log.info("run %s: training returned %s at step %s", run.id, status, getattr(result, "step", "?"))
    return _finish(store, run.id, states.STOPPED if status == "stopped" else states.SUCCEEDED, job=job)


def _job_sink(store: Store, run_id: int, **kwargs: Any) -> Any:
    """The job's :class:`~jobs.db_sink.DbSink`, which also forgets the checkpoint rows whose folders the
    trainer pruned (``checkpoint_total_limit``), so the rows follow what is on disk."""
    from jobs.db_sink import DbSink

    class JobSink(DbSink):
        _prune_pending = False

        def log_checkpoint(self, step: int, path: str) -> None:
            super().log_checkpoint(step, path)
            self._prune_pending = True  # the trainer prunes right after reporting a checkpoint

        def log_step(self, *args: Any, **kw: Any) -> None:
            if self._prune_pending:
                self.forget_pruned_checkpoints()
            super().log_step(*args, **kw)

        def forget_pruned_checkpoints(self) -> None:
            self._prune_pending = False
            try:
                forget_pruned_checkpoints(self.store, self.run_id)
            except Exception:  # bookkeeping; never fails a run
                log.warning("run %s: could not forget pruned checkpoints", self.run_id, exc_info=True)

    return JobSink(store, run_id, **kwargs)


def forget_pruned_checkpoints(store: Store, run_id: int) -> int:
    """Delete the checkpoint rows of ``run_id`` whose folders are gone from disk; returns how many."""
    gone = [c.id for c in store.list_checkpoints(run_id) if not Path(c.path).exists()]
    return store.delete_checkpoints(run_id, gone) if gone else 0


def _resume_from(store: Store, run: Run) -> str | None:
    """The checkpoint folder a resumed run starts from (None for a first attempt); raises
    ``FileNotFoundError`` naming the problem when a resumed run has no usable checkpoint."""
    if run.resumed_from is None:
        return None
    path = resume_checkpoint(store, run)
    if path is None:
        raise FileNotFoundError(f"run {run.id} resumes run {run.resumed_from}, which recorded no checkpoint; "
                                "submit the config again to start over")
    if not Path(path).exists():
        raise FileNotFoundError(f"run {run.id} resumes from checkpoint {path}, which is not on this machine "
                                "(checkpoints stay where they were written: run resumed attempts on that "
                                "machine's worker, or share the data directory)")
    log.info("run %s resumes run %s from %s", run.id, run.resumed_from, path)
    return path


def _database_file(store: Store) -> Any:
    """The identity of the job's SQLite file (:mod:`jobs.db_identity`), None for PostgreSQL or when it
    cannot be read now."""
    from jobs.db_identity import DatabaseFile

    try:
        return DatabaseFile.of(store)
    except Exception:  # the check is a safeguard; it never fails a run by itself
        log.warning("run database file identity not recorded", exc_info=True)
        return None


def _exit_job_process(status: str) -> None:
    log.error("this run was marked %s elsewhere while still training: exiting the job process", status)
    logging.shutdown()
    os._exit(1)  # the kernel releases the job file; the run is already final, so nobody settles it again


def _set_worker_run(store: Store, worker: str, run_id: int | None) -> None:
    try:
        store.set_worker_run(worker, run_id)
    except Exception:  # the registry is informative; it must never fail a run
        log.warning("could not record run %s on worker %s", run_id, worker, exc_info=True)
