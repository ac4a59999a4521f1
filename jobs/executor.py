"""Execute one stored run from start to its truthful final state.

:func:`execute_run` is the plain function behind the Celery task (the task only passes the run id).
It claims the run with a compare-and-set ``queued → starting`` (so a redelivered message never runs a
finished, stopped or lost run again), validates the stored config, trains through
``engine.build.run.run_training`` with a :class:`~jobs.db_sink.DbSink`, and ends in ``succeeded``,
``stopped`` or ``failed`` (with the error and traceback). torch and the engine are imported inside the
functions, so the worker parent that forks job processes never loads them (nor initialises CUDA).
Once the run is claimed, its steps share one frozen :class:`JobContext`, and one place, the job
boundary in :func:`_claimed`, turns any error into the run's ``failed`` end.

Before the claim the job locks its job file (:mod:`jobs.jobfile`), so a job that dies is noticed at
once by anyone on its machine (:mod:`jobs.liveness`). When training fails on a full disk (or a quota,
or permissions), the stored error's first line says so, naming the path and the free space
(:mod:`jobs.faults`), and the temporary folders the failed writes left are removed first. The final
state is written with retries; if the database still cannot take it, the job leaves the state and the
reason in its job file, where whoever settles the run next finds them. The data directory must belong
to the run's database (:mod:`jobs.datadir`), or the run fails before it writes anything there.
The stored config is parsed once, for the job's device, and checked again against the operator's
budget (:mod:`engine.schema.budget`); the engine gets the data directory as the only place besides the
run's folder that the config's folders may name (:mod:`engine.permissions.write_paths`), and whether to keep
freed host memory (``COOPLAB_KEEP_FREED_MEMORY``); it checks that the devices the config names exist in
this job. A checkpoint folder the trainer prunes (``checkpoint_total_limit``) is reported through the
sink, which deletes its row.

**The artifact store.** With ``COOPLAB_ARTIFACTS_URL`` naming a shared store (S3, a shared folder),
each checkpoint is uploaded by a thread of the job after it is written locally
(:mod:`jobs.artifacts.uploads`), and its row gets its ``artifact_url`` once the upload completed and
was checked. The run's end waits for the pending uploads, then stores the exported models, the best
checkpoint and the iteration files (:mod:`jobs.artifacts.run_outputs`) before it is written; a
failed upload fails the run naming the store and the cause. The run's log is stored after its end.
A resumed attempt whose checkpoint is not on this machine downloads it from the store
(:mod:`jobs.artifacts.resume`). With the embedded store (unset) nothing is copied.

A ``parallel_training: fsdp`` run trains in ranks that the job launches under torchrun and supervises
(:mod:`jobs.fsdp_job`): rank 0 writes the run's steps, the job keeps its heartbeat and writes its end.

A stop requested while the run is ``starting`` moves it to ``stopping``; the job then never trains:
before building it ends the run ``stopped`` at once, and when the stop arrives while agents and task
are being built, the sink's refused ``starting → running`` raises the stop flag, so the trainer stops
before its first step (saving a checkpoint of the state it was given) and the run ends ``stopped``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import SQLAlchemyError

from db import states
from db.errors import NotFoundError, RunSettledError
from db.records import Run
from db.states import InvalidTransition
from db.store import Store
from jobs import jobfile
from jobs.datadir import DataDirOwnedError, claim_data_dir
from jobs.db_identity import DatabaseFile, DatabaseFileGone
from jobs.devices import job_device
from jobs.faults import describe_failure, first_line, resource_reason
from jobs.liveness import cleanup_partial_writes, finish_run
from jobs.resource_metrics import ResourceSampler
from jobs.run_environment import capture_environment
from jobs.settings import Settings, apply_host_memory_setting, get_settings, operator_permissions

if TYPE_CHECKING:
    from engine.permissions.operator import OperatorPermissions
    from engine.schema.run_config import RunConfig
    from jobs.artifacts import ArtifactStore
    from jobs.artifacts.storing_marks import StoringMarks
    from jobs.artifacts.uploads import CheckpointUploads
    from jobs.db_sink import DbSink

log = logging.getLogger(__name__)

TrainFn = Callable[..., Any]
"""``run_training(config, *, output_dir, sink, resume_from=None) -> TrainResult``."""

STORE_FAULTS = (SQLAlchemyError, OSError)
"""What a store call raises when the database is unreachable, locked or its disk is full."""


def local_device(queue: str) -> str:
    """The torch device a job on ``queue`` uses inside its worker.

    A ``cuda:N`` worker pins its GPU with ``CUDA_VISIBLE_DEVICES=N``, so inside the job that GPU is
    ``cuda:0`` (a GPU set's first GPU for a ``cuda:0,1,2,3`` worker); the ``cpu`` queue trains on the CPU.
    """
    return job_device(queue)


def run_output_dir(settings: Settings, run_id: int) -> Path:
    """Where a run's checkpoints and exports go: ``<data dir>/runs/run-<id>``."""
    return settings.runs_dir / f"run-{run_id}"


def run_log_path(settings: Settings, run_id: int) -> Path:
    """The run's own log file: ``<data dir>/logs/run-<id>.log``."""
    return settings.logs_dir / f"run-{run_id}.log"


@dataclass(frozen=True)
class JobContext:
    """One job: the run it executes, the store and settings it uses, the job file it holds, and how
    it was started (``worker``, ``train_fn``, ``exit_when_settled``; see :func:`execute_run`)."""

    store: Store
    settings: Settings
    run: Run
    job: jobfile.JobFile
    worker: str | None = None
    train_fn: TrainFn | None = None
    exit_when_settled: bool = False
    leaving: Callable[[], bool] | None = None

    @property
    def run_id(self) -> int:
        return self.run.id

    @property
    def output_dir(self) -> Path:
        return run_output_dir(self.settings, self.run.id)

    @property
    def log_path(self) -> Path:
        return run_log_path(self.settings, self.run.id)

    @property
    def device(self) -> str:
        return local_device(self.run.queue)

    @functools.cached_property
    def artifacts(self) -> ArtifactStore | None:
        """The shared artifact store, or None for the embedded one (the data directory: nothing to copy)."""
        from jobs.artifacts import open_store

        store = open_store(self.settings)
        return None if store.in_data_dir else store


FINISH_RETRY_DELAYS_S = (0.2, 0.5, 1.0, 2.0, 3.0, 3.0)
"""Pauses between attempts to write a run's final state (about 10 s in all) before the job gives up and
leaves it in its job file."""


def _finish(ctx: JobContext, to: str, *, error: str | None = None) -> str:
    """Move the run to a final state; if someone else settled it first (the stop enforcer, the
    reaper), keep theirs and return it. A database error is retried; when every attempt fails, the
    state and the reason go into the job file for whoever settles the run next."""
    run_id = ctx.run_id
    for attempt, delay in enumerate((*FINISH_RETRY_DELAYS_S, None)):
        try:
            status = finish_run(ctx.store, run_id, to, error=error)
            if status != to:
                log.warning("run %s ended as %s, but it is already %s; keeping that", run_id, to, status)
            return status
        except STORE_FAULTS as exc:
            if delay is None:
                log.error("run %s: could not record its end (%s) after %d attempts: %s", run_id, to, attempt + 1,
                          exc)
                if ctx.job.last_words(to, error or f"the job ended {to}"):
                    log.error("run %s: its end (%s) is left in %s for whoever settles it next", run_id, to,
                              ctx.job.path)
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
                exit_when_settled: bool = False, leaving: Callable[[], bool] | None = None) -> str:
    """Run stored run ``run_id`` to completion and return the state it ended in.

    ``train_fn`` defaults to ``engine.build.run.run_training``. A run that is not ``queued`` is left
    alone (its state is returned), which makes redelivered task messages harmless. With
    ``exit_when_settled`` (job processes) the process exits at once if the run is marked ``stopped``
    by the stop enforcer while it still trains, so a terminated run never keeps computing.
    ``leaving`` (job processes: :func:`jobs.warm_shutdown.requested`) says that the worker began a warm
    shutdown; a run claimed as it began is stopped before it trains (it ends ``stopped``).
    """
    settings = settings or get_settings()
    own_store = store is None
    store = store or Store(settings.resolved_database_url)
    try:
        run = _queued_run(store, settings, run_id)
        if not isinstance(run, Run):
            return run
        job = jobfile.JobFile.acquire(settings.data_dir, run_id)  # before the claim: a live claim always has a holder
        if job is None:
            log.warning("run %s is being executed by another process on this machine: not running it again", run_id)
            return store.get_run(run_id).status
        job.start_pulse(settings.heartbeat_interval_s)  # alive, whether or not the database takes its heartbeat
        try:
            return _claimed(JobContext(store, settings, run, job, worker=worker, train_fn=train_fn,
                                       exit_when_settled=exit_when_settled, leaving=leaving))
        finally:
            job.release(remove=not job.keep)  # kept when it holds the run's last words
    finally:
        if own_store:
            store.close()


def _queued_run(store: Store, settings: Settings, run_id: int) -> Run | str:
    """The run when it is queued and the data directory can be used for it; else the state the run is
    left in (``missing`` when it does not exist, ``failed`` when the data directory cannot be used)."""
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
    except STORE_FAULTS as exc:  # the data directory cannot be written: fail the run, never leave it queued
        log.exception("run %s: the data directory %s cannot be used", run_id, settings.data_dir)
        error = describe_failure(exc, output_path=settings.data_dir, database_url=settings.resolved_database_url)
        return finish_run(store, run_id, states.FAILED, error=error, expected_from=states.QUEUED)
    return run


def _claimed(ctx: JobContext) -> str:
    """Claim the run (``queued → starting``) and train it. This is the job boundary: whatever goes
    wrong after the claim ends the run in a final state that says why."""
    store, run_id = ctx.store, ctx.run_id
    try:
        store.transition(run_id, states.STARTING, expected_from=states.QUEUED, worker=ctx.worker)
    except InvalidTransition as exc:  # another delivery or a cancel won the race
        log.warning("run %s could not be claimed: %s", run_id, exc)
        return exc.current
    if ctx.leaving is not None and ctx.leaving():
        # the worker's shutdown began as the run was claimed: it asked its runs to stop before this one
        # was live, so stop it here, before it trains (jobs.warm_shutdown)
        log.warning("run %s: the worker is shutting down as the run was claimed; it stops before training", run_id)
        store.request_stop(run_id)
    if ctx.worker:
        _set_worker_run(store, ctx.worker, run_id)
    with contextlib.ExitStack() as run_log:  # the run's log file, once open, also gets how the run failed
        run_log.callback(_store_log, ctx)  # runs last: after the run's end is written and its log closed
        try:
            # A run queued long ago has no heartbeat yet; beat now so the reaper does not count from creation.
            store.heartbeat(run_id, worker=ctx.worker)
            store.update_run(run_id, log_path=str(ctx.log_path), output_dir=str(ctx.output_dir), device=ctx.run.queue)
            run_log.enter_context(_RunLogFile(ctx.log_path, ctx.settings.log_level))
            log.info("run %s (experiment %s, attempt %s) starting on %s as %s", run_id, ctx.run.experiment_id,
                     ctx.run.attempt, ctx.run.queue, ctx.device)
            return _train(ctx)
        except RunSettledError as exc:  # settled elsewhere (lost, stopped): its end is written; nothing to add
            log.error("run %s: training stopped: %s", run_id, exc)
            return exc.status
        except DatabaseFileGone as exc:  # writing the end into the deleted file would only lose it too
            log.error("run %s failed: %s", run_id, exc)
            if ctx.job.last_words(states.FAILED, str(exc)):
                log.error("run %s: its end (failed) is left in %s", run_id, ctx.job.path)
            return states.FAILED
        except Exception as exc:  # the job boundary: anything after the claim must still end the run truthfully
            return _failed(ctx, exc)
        finally:
            if ctx.worker:
                _set_worker_run(store, ctx.worker, None)


def _failed(ctx: JobContext, exc: Exception) -> str:
    """End the run ``failed``: the reason first (the free space as the failure left it), then the
    partial writes go (the temporary checkpoint folders, and on a filesystem fault the export it may
    have cut short), then the state is written."""
    log.exception("run %s failed", ctx.run_id)
    database_url = ctx.settings.resolved_database_url
    error = describe_failure(exc, output_path=ctx.output_dir, database_url=database_url)
    fault = resource_reason(exc, output_path=ctx.output_dir, database_url=database_url)
    cleanup_partial_writes(ctx.output_dir, export=fault is not None)
    return _finish(ctx, states.FAILED, error=error)


def _train(ctx: JobContext) -> str:
    """Validate the stored config for this job, train it through the job's
    :class:`~jobs.db_sink.DbSink` and end the run ``succeeded`` or ``stopped``; a config that does not
    validate ends it ``failed`` with the fields named. The sink is closed (its heartbeat stopped)
    before any end is written, so a beat never lands on the settled run."""
    from engine.schema.run_config import ConfigError
    from jobs.db_sink import DbSink

    settings = ctx.settings
    # the operator's permissions, for parsing and building; the worker's COOPLAB_API_KEY_* variables are
    # the keys a run config may name
    permissions = operator_permissions(settings, os.environ)
    try:
        config = _job_config(ctx, permissions)
    except ConfigError as exc:
        message = f"invalid run config:\n{exc}\nFix the config and submit it again."
        log.error("run %s: %s", ctx.run_id, message)
        return _finish(ctx, states.FAILED, error=message)
    uploads = _checkpoint_uploads(ctx)
    sink = DbSink(ctx.store, ctx.run_id, worker=ctx.worker, heartbeat_interval_s=settings.heartbeat_interval_s,
                  on_settled=_exit_job_process if ctx.exit_when_settled else None, outage_s=settings.db_outage_s,
                  database_file=_database_file(ctx.store), uploads=uploads)
    sampler = ResourceSampler(sink.log_resources, interval_s=settings.resource_interval_s,
                              gpu=ctx.device.startswith("cuda"))
    try:
        sink.start_heartbeat()
        _record_environment(ctx)
        sampler.start()
        if sink.should_stop():
            # A stop arrived while the job was starting: nothing has been trained, so nothing is built.
            log.info("run %s was asked to stop before training started: ending it stopped", ctx.run_id)
            status = "stopped"
        else:
            status = _run_training(ctx, config, sink, permissions)
            _store_outputs(ctx, config, uploads)  # the heartbeat goes on while the uploads finish
    finally:
        sampler.stop()  # its last sample: the resources at the end of training
        if uploads is not None:
            uploads.close()  # a failed run: what was not started is dropped
        sink.close()
    return _finish(ctx, states.STOPPED if status == "stopped" else states.SUCCEEDED)


def _record_environment(ctx: JobContext) -> None:
    """Record what the run trains with (:mod:`jobs.run_environment`: git commit and dirty diff, package
    versions, host, command line); a failure is logged, never the run's end."""
    try:
        ctx.store.record_run_environment(ctx.run_id, capture_environment(worker=ctx.worker, device=ctx.device))
    except Exception as exc:
        log.warning("run %s: its environment could not be recorded: %s", ctx.run_id, first_line(str(exc)))


def _job_config(ctx: JobContext, permissions: OperatorPermissions) -> RunConfig:
    """The stored config parsed once (under the operator's task module allowlist), for this job's device, and
    checked again against the operator's budget (it was stored before, or checked elsewhere); raises
    ``ConfigError`` naming the fields."""
    from engine.schema.budget import budget_problems
    from engine.schema.run_config import ConfigError, parse_run_config
    from jobs.preflight import run_budget

    data = dict(ctx.run.config)
    data["trainer"] = {**dict(data.get("trainer") or {}), "device": ctx.device}
    config = parse_run_config(data, task_modules=permissions.task_modules)
    over = budget_problems(config, run_budget(ctx.settings))
    if over:
        raise ConfigError("\n".join(f"{field}: {message}" for field, message in over))
    return config


def _run_training(ctx: JobContext, config: RunConfig, sink: DbSink, permissions: OperatorPermissions) -> str:
    """Train ``config`` into the run's folder (from the checkpoint a resumed run continues); returns the
    trainer's status (``completed`` or ``stopped``)."""
    resume_from = _resume_from(ctx)
    train_fn = ctx.train_fn or _engine_training(ctx.settings, permissions)
    if ctx.train_fn is None and config.trainer.parallel_training == "fsdp":  # ranks under torchrun (jobs.fsdp_job)
        from jobs.fsdp_job import torchrun_training

        train_fn = torchrun_training(ctx.run_id, ctx.worker, ctx.settings)
    ctx.output_dir.mkdir(parents=True, exist_ok=True)
    result = train_fn(config, output_dir=str(ctx.output_dir), sink=sink, resume_from=resume_from)
    status = getattr(result, "status", "completed")
    log.info("run %s: training returned %s at step %s", ctx.run_id, status, getattr(result, "step", "?"))
    return status


def _engine_training(settings: Settings, permissions: OperatorPermissions) -> TrainFn:
    """``engine.build.run.run_training`` for this job: the engine keeps freed memory as the settings say,
    the run may write into its own folder and the data directory, read only inside the operator's
    read roots (``COOPLAB_DATA_ROOTS``, :mod:`engine.permissions.read_paths`) and do what the operator's
    ``permissions`` allow."""
    from engine.build.run import run_training

    apply_host_memory_setting(settings)
    return functools.partial(run_training, write_roots=(settings.data_dir,), read_roots=settings.read_roots,
                             permissions=permissions)


def _resume_from(ctx: JobContext) -> str | None:
    """The checkpoint folder a resumed run starts from (None for a first attempt): on this machine, or
    downloaded from the artifact store into this machine's cache (:mod:`jobs.artifacts.resume`).
    Raises ``FileNotFoundError`` naming the problem when a resumed run has no usable checkpoint, and
    the store's error naming it when a download fails. An attempt that the retry policy queued after a
    run lost before any checkpoint (:mod:`jobs.retries`) starts over, as its note says."""
    from jobs.artifacts.resume import resume_folder
    from jobs.lineage import newest_checkpoint

    run = ctx.run
    if (run.resumed_from is not None and ctx.store.get_run(run.resumed_from).retried_as == run.id
            and newest_checkpoint(ctx.store, run) is None):
        log.info("run %s starts over: run %s was lost before any checkpoint", run.id, run.resumed_from)
        return None
    return resume_folder(ctx.store, ctx.run, ctx.artifacts, ctx.settings.artifacts_cache_dir)


def _checkpoint_uploads(ctx: JobContext) -> CheckpointUploads | None:
    """The upload thread of the run's checkpoints, or None with the embedded store."""
    if ctx.artifacts is None:
        return None
    from jobs.artifacts.uploads import CheckpointUploads

    return CheckpointUploads(ctx.artifacts, ctx.run_id, progress=_storing_marks(ctx),
                             outage_s=ctx.settings.store_outage_s,
                             noted=lambda problem: ctx.store.note_store_outage(ctx.run_id, problem))


def _storing_marks(ctx: JobContext) -> StoringMarks:
    """The run's ``storing_at`` stamped as its files are stored: a stop's grace period counts from the
    last one (:mod:`jobs.artifacts.storing_marks`)."""
    from jobs.artifacts.storing_marks import StoringMarks

    return StoringMarks(lambda: ctx.store.note_storing(ctx.run_id))


def _store_outputs(ctx: JobContext, config: RunConfig, uploads: CheckpointUploads | None) -> None:
    """At the run's end, before it is written: wait for the checkpoints' uploads, then store the exported
    models, the best checkpoint and the iteration files (:mod:`jobs.artifacts.run_outputs`)."""
    if ctx.artifacts is None:
        return
    from jobs.artifacts.run_outputs import store_run_outputs

    if uploads is not None:
        waited = time.monotonic()
        uploads.finish()
        total = sum(t.size for t in uploads.times)
        log.info("run %s: %d checkpoint(s) stored in %s (%.1f MB, %.1f s of uploads, waited %.1f s at the end)",
                 ctx.run_id, len(uploads.times), ctx.artifacts.url, total / 1e6,
                 sum(t.seconds for t in uploads.times), time.monotonic() - waited)
        uploads.through_outage("storing the run's outputs", lambda: store_run_outputs(
            ctx.artifacts, ctx.run_id, ctx.output_dir, config.trainer, progress=_storing_marks(ctx)))
        return
    store_run_outputs(ctx.artifacts, ctx.run_id, ctx.output_dir, config.trainer, progress=_storing_marks(ctx))


def _store_log(ctx: JobContext) -> None:
    """After the run's end: its log file into the artifact store (a failure is only logged: the run's
    end is written already)."""
    try:
        if ctx.artifacts is None:
            return
        from jobs.artifacts.run_outputs import store_run_log

        store_run_log(ctx.artifacts, ctx.run_id, ctx.log_path)
    except Exception as exc:
        log.warning("run %s: its log %s could not be stored in the artifact store: %s", ctx.run_id, ctx.log_path,
                    exc)


def _database_file(store: Store) -> DatabaseFile | None:
    """The identity of the job's SQLite file (:mod:`jobs.db_identity`), None for PostgreSQL or when it
    cannot be read now (the check is a safeguard; it never fails a run by itself)."""
    try:
        return DatabaseFile.of(store)
    except STORE_FAULTS:
        log.warning("run database file identity not recorded", exc_info=True)
        return None


def _exit_job_process(status: str) -> None:
    log.error("this run was marked %s elsewhere while still training: exiting the job process", status)
    logging.shutdown()
    os._exit(1)  # the kernel releases the job file; the run is already final, so nobody settles it again


def _set_worker_run(store: Store, worker: str, run_id: int | None) -> None:
    """Record in the worker registry which run ``worker`` executes; the registry is informative, so a
    database fault (or a worker missing from it) only gets a warning."""
    try:
        store.set_worker_run(worker, run_id)
    except (NotFoundError, *STORE_FAULTS):
        log.warning("could not record run %s on worker %s", run_id, worker, exc_info=True)
