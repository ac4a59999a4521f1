"""Submit, stop, resume and cancel runs: what the dashboard and the CLI call.

Sending is bounded: a broker that does not answer is given up on within a few seconds; no result
backend is involved in sending. A new run whose message the broker could not take (it is down, or its
folder's disk is full) stays ``queued``: the reconciler of every worker and of ``cooplab up``
(:mod:`jobs.reconcile`) sends it when the broker takes messages again, and the id returned
(:class:`QueuedRun`) says why it is not sent yet (``unsent``). Re-sending an existing run
(:func:`resend_run`) raises :class:`BrokerUnavailable` naming the broker instead.

Importing this module never imports torch or the task module: configs are validated with the
torch-free :mod:`engine.schema.run_config` and pre-flight checked (:mod:`jobs.preflight`) before anything is
stored, and the task is sent by name (``jobs.run_training``) to the queue of
the chosen device: on the filesystem broker as the message file Celery would write, without loading
Celery (:mod:`jobs.broker_fs_write`), on Redis as the commands kombu would send, without loading Celery,
kombu or redis-py (:mod:`jobs.broker_redis_write`; other broker URLs through Celery's sending app).
Calls return as soon as the database and the broker have the request; stopping a run that ignores its
stop flag is finished later by the stop enforcer (see :mod:`jobs.maintenance`).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from db import states
from db.records import Run
from db.states import InvalidTransition
from db.urls import redact_url
from engine.schema.run_config import RunConfig
from jobs.devices import validate_device
from jobs.faults import first_line, resource_reason
from jobs.lineage import resume_checkpoint
from jobs.preflight import check_run_config
from jobs.settings import Settings, get_settings

if TYPE_CHECKING:
    from db.postgres_writes import PostgresRunWrites
    from db.run_writes import RunWrites
    from db.sqlite_writes import SqliteRunWrites
    from db.store import Store

    SubmitWrites = Store | RunWrites | SqliteRunWrites | PostgresRunWrites

log = logging.getLogger(__name__)

TASK_NAME = "jobs.run_training"
"""As :data:`jobs.celery_app.TASK_NAME` (a test holds the two equal): sent by name."""

_STORES: dict[str, SubmitWrites] = {}
"""Per database URL, this process's store, or only a submit's writes until a store is asked for (one
engine per URL either way)."""
_STORES_LOCK = threading.Lock()


class ResumeError(ValueError):
    """A run cannot be resumed (still active, or no checkpoint); the message says what to do."""


class BrokerUnavailable(ConnectionError):
    """The broker did not take the message; the message names the broker (password hidden).
    ``unsent`` says the same for a run that stays queued (see :class:`QueuedRun`)."""

    def __init__(self, message: str, *, unsent: str = "") -> None:
        super().__init__(message)
        self.unsent = unsent or message


class QueuedRun(int):
    """A new run's id (an ``int``), stored ``queued``. ``unsent`` is None when the broker has its message,
    else why not yet (the broker is unreachable, its disk is full): the run then stays queued and the
    reconciler (:mod:`jobs.reconcile`) sends it once the broker takes messages again."""

    unsent: str | None

    def __new__(cls, run_id: int, unsent: str | None = None) -> QueuedRun:
        made = super().__new__(cls, run_id)
        made.unsent = unsent
        return made

    def describe(self, device: str) -> str:
        """``queued on DEVICE``, and when the broker has not got it yet, why and what happens next."""
        return f"queued on {device}" + (f"; {self.unsent}" if self.unsent else "")


SEND_RETRY_POLICY = {"max_retries": 1, "interval_start": 0.5, "interval_step": 0.5, "interval_max": 1.0}
"""Two tries of the broker's connect timeout (``jobs.celery_app.SEND_CONNECT_TIMEOUT_S``) each: a
broker that is down fails a send within about 5 s."""


def get_store(settings: Settings | None = None) -> Store:
    """A store for the settings' database, shared by the client calls of this process."""
    from db.store import Store  # the ORM: not imported by a submit (get_run_writes)

    url = (settings or get_settings()).resolved_database_url
    with _STORES_LOCK:
        held = _STORES.get(url)
        if not isinstance(held, Store):  # none yet, or a submit's writes: a store (on their engine, if any)
            if held is not None and not hasattr(held, "engine"):
                held.close()  # a submit's sqlite3 connection: the store has its own
            _STORES[url] = held = Store(url, engine=getattr(held, "engine", None))
        return held


def get_run_writes(settings: Settings | None = None) -> SubmitWrites:
    """What a submit writes with: the settings' database's shared store when this process has one, else,
    for a SQLite file, its writes with ``sqlite3`` (:mod:`db.sqlite_writes`, no SQLAlchemy), for PostgreSQL
    through ``psycopg2`` its writes with ``psycopg2`` (:mod:`db.postgres_writes`, no SQLAlchemy), for
    another URL its Core writes (:mod:`db.run_writes`, no ORM) (``cooplab submit``, :mod:`cooplab.api`).
    Each has ``ensure_schema()``, the migration check a submit makes first."""
    url = (settings or get_settings()).resolved_database_url
    with _STORES_LOCK:
        held = _STORES.get(url)
        if held is None:
            from db.postgres_writes import PostgresRunWrites, postgres_connect_args
            from db.sqlite_writes import SqliteRunWrites, plain_sqlite_file

            path = plain_sqlite_file(url)
            connect_args = None if path is not None else postgres_connect_args(url)
            if path is not None:
                _STORES[url] = held = SqliteRunWrites(url, path)
            elif connect_args is not None:
                _STORES[url] = held = PostgresRunWrites(url, connect_args)
            else:
                from db.engine import make_engine
                from db.run_writes import RunWrites

                _STORES[url] = held = RunWrites(make_engine(url))
        return held


def _total_steps(config: dict[str, Any]) -> int | None:
    return config.get("trainer", {}).get("max_steps")


def _disk_words(reason: str) -> str:
    """What a filesystem reason means for a send: a full disk, or a folder that takes no writes."""
    full = reason.startswith(("no space", "disk quota"))
    return "the disk is full" if full else "the broker folder is not writable"


def _send(run: Run, task_id: str, settings: Settings) -> None:
    """Send the run's task to its queue (bounded; see :data:`SEND_RETRY_POLICY`), or raise
    :class:`BrokerUnavailable` naming the broker."""
    if settings.resolved_broker_url.startswith("filesystem://"):  # the file Celery would write, without it
        from jobs.broker_fs_write import make_folders, send_task_file

        make_folders(settings)  # outside the try, as making Celery's sending app was

        def send() -> None:
            send_task_file(settings, TASK_NAME, [run.id], task_id, queue=validate_device(run.queue))
    else:
        from jobs.broker_redis_write import redis_address, send_task_redis

        address = redis_address(settings.resolved_broker_url)
        if address is not None:  # the commands kombu would send, without Celery, kombu or redis-py

            def send() -> None:
                send_task_redis(address, TASK_NAME, [run.id], task_id, queue=validate_device(run.queue))
        else:
            from jobs.celery_app import device_queue, get_sender_app

            app = get_sender_app(settings)  # a broker URL it refuses (no broadcast) is an error, not a broker down

            def send() -> None:
                app.send_task(TASK_NAME, args=[run.id], task_id=task_id, queue=device_queue(run.queue),
                              ignore_result=True, retry=True, retry_policy=SEND_RETRY_POLICY)
    try:
        send()
    except Exception as exc:
        broker = redact_url(settings.resolved_broker_url)
        disk = resource_reason(exc)
        if disk is not None:  # the filesystem broker's folder is full (or read-only): not a broker that is down
            raise BrokerUnavailable(
                f"could not send run {run.id} to the broker {broker} (queue {run.queue!r}): {_disk_words(disk)}: "
                f"{disk}. Free space (or fix the permissions) in the data directory {settings.data_dir}, then "
                f"submit again",
                unsent=f"the broker {broker} could not take it: {_disk_words(disk)}: {disk}. Free space (or fix the "
                       f"permissions) in the data directory {settings.data_dir}: it will be sent then") from exc
        said = first_line(str(exc)).rstrip('.') or type(exc).__name__
        raise BrokerUnavailable(
            f"could not send run {run.id} to the broker {broker} (queue {run.queue!r}): {said}. Is the broker "
            f"running and is COOPLAB_BROKER_URL right?",
            unsent=f"the broker {broker} is unreachable ({said}): it will be sent when it answers") from exc


def _enqueue(store: SubmitWrites, run: Run, settings: Settings) -> QueuedRun:
    """Record a fresh task id on the run, then send the task. A broker that does not take it leaves the
    run ``queued`` (the reconciler sends it when the broker is back: the task id is one the broker does
    not hold); the returned id's ``unsent`` says why."""
    task_id = str(uuid.uuid4())
    run = store.update_run(run.id, celery_task_id=task_id)
    try:
        _send(run, task_id, settings)
    except BrokerUnavailable as exc:
        log.info("run %s stays queued: %s", run.id, exc)
        return QueuedRun(run.id, exc.unsent)
    return QueuedRun(run.id)


def enqueue_run(run_id: int, *, settings: Settings | None = None) -> str:
    """Send an existing ``queued`` run to its device's queue (e.g. one stored without being sent);
    returns the new task id. Raises ``ValueError`` for a run that is not queued and
    :class:`BrokerUnavailable` when the broker does not take it (the run stays queued)."""
    settings = settings or get_settings()
    store = get_store(settings)
    run = store.get_run(run_id)
    if run.status != states.QUEUED:
        raise ValueError(f"run {run_id} is {run.status}, not queued; resume it instead to train again")
    task_id = str(uuid.uuid4())
    _send(store.update_run(run.id, celery_task_id=task_id), task_id, settings)
    return task_id


def resend_run(run_id: int, *, settings: Settings | None = None, store: Store | None = None) -> bool:
    """Send a ``queued`` run to its queue again with a new task id (its message was lost); the run stays
    queued when the broker is down (raises :class:`BrokerUnavailable`). Returns False, sending nothing,
    when the run is no longer queued. ``store`` defaults to this process's shared one."""
    settings = settings or get_settings()
    store = store or get_store(settings)
    run = store.get_run(run_id)
    if run.status != states.QUEUED:
        return False
    task_id = str(uuid.uuid4())
    _send(run, task_id, settings)  # sent first: a message for a run that is then claimed is harmless
    store.update_run(run.id, celery_task_id=task_id)
    return True


def submit_run(config: RunConfig | Mapping[str, Any], *, experiment_id: int, device: str = "cpu",
               settings: Settings | None = None) -> QueuedRun:
    """Validate and pre-flight check ``config`` (:func:`jobs.preflight.check_run_config`), store a
    ``queued`` run of ``experiment_id`` and enqueue it on ``device``'s queue.

    Raises :class:`engine.schema.run_config.ConfigError` (one line per bad field: a task off the allowlist, a
    missing model, ``max_new_tokens`` beyond a model's context, bad task parameters, a size over the
    budget, a CUDA device the job on ``device``'s queue will not have...) before anything is stored,
    and ``ValueError`` for an unknown device. Returns the new run's id (:class:`QueuedRun`: its
    ``unsent`` says when the broker could not take it yet; the run stays queued and is sent later).
    """
    settings = settings or get_settings()
    validate_device(device)
    return _store_and_enqueue(check_run_config(config, settings=settings, device=device), experiment_id, device,
                              settings)


def submit_to_experiment(config: RunConfig | Mapping[str, Any], *, experiment: str | None = None,
                         device: str = "cpu", settings: Settings | None = None,
                         checked: bool = False) -> tuple[QueuedRun, str]:
    """Validate ``config`` and submit it into the experiment named ``experiment`` (default: the
    config's name), created when it does not exist yet; parallel submits into a new experiment all land
    in one. Nothing is stored when the config or the device is refused. Returns the run id
    (:class:`QueuedRun`) and the experiment's name. ``checked``: ``config`` is a :class:`RunConfig` that
    already passed :func:`check_run_config` for ``device`` under these settings (not checked again)."""
    settings = settings or get_settings()
    validate_device(device)
    if checked and isinstance(config, RunConfig):
        parsed = config
    else:
        parsed = check_run_config(config, settings=settings, device=device)
    found = get_run_writes(settings).get_or_create_experiment(
        experiment or parsed.name, description=parsed.description, tags=parsed.tags,
        config=parsed.model_dump(mode="json"))
    return _store_and_enqueue(parsed, found.id, device, settings), found.name


def _store_and_enqueue(config: RunConfig, experiment_id: int, device: str, settings: Settings) -> QueuedRun:
    """Store a checked config as a ``queued`` run of ``experiment_id`` and send it to ``device``'s queue."""
    store = get_run_writes(settings)
    run = store.create_run(experiment_id, config.model_dump(mode="json"), device,
                           total_steps=config.trainer.max_steps)
    queued = _enqueue(store, run, settings)
    log.info("run %s %s", run.id, queued.describe(device))
    return queued


def cancel_queued(run_id: int, *, settings: Settings | None = None) -> None:
    """Cancel a run that has not started yet (``queued → cancelled``); its message is revoked, and a
    worker that still receives it does not run it. Raises ``InvalidTransition`` if it already started."""
    settings = settings or get_settings()
    store = get_store(settings)
    run = store.transition(run_id, states.CANCELLED, expected_from=states.QUEUED)
    _revoke(run, settings, terminate=False)


def stop_run(run_id: int, *, settings: Settings | None = None, store: Store | None = None) -> str:
    """Ask a run to stop and return its state right after.

    A queued run is cancelled. A starting or running run gets the stop flag and becomes
    ``stopping``: the trainer checkpoints and stops at the next step boundary (``stopped``); if it has
    not stopped after ``stop_grace_s`` seconds, the stop enforcer terminates its job process and marks
    it ``stopped``. A run that is already final is left as it is. ``store`` defaults to this process's
    shared one.
    """
    settings = settings or get_settings()
    store = store or get_store(settings)
    run = store.request_stop(run_id)
    if run.status == states.CANCELLED:
        _revoke(run, settings, terminate=False)
    return run.status


def resume_run(run_id: int, *, settings: Settings | None = None) -> QueuedRun:
    """Start a new attempt of a finished run that continues from its last checkpoint; returns the new
    run's id (:class:`QueuedRun`: ``unsent`` when the broker could not take it yet). Raises
    :class:`ResumeError` when the run is still active or has no checkpoint."""
    settings = settings or get_settings()
    store = get_store(settings)
    run = store.get_run(run_id)
    if run.is_active:
        raise ResumeError(f"run {run_id} is still {run.status}; stop it first, then resume it")
    if resume_checkpoint(store, run, include_self=True) is None:
        raise ResumeError(
            f"run {run_id} has no checkpoint to resume from; set trainer.checkpoint_interval to save "
            "checkpoints during training, or submit its config again to start over"
        )
    config = dict(run.config)
    new = store.create_run(run.experiment_id, config, run.queue, total_steps=_total_steps(config),
                           resumed_from=run.id, tags=run.tags)
    queued = _enqueue(store, new, settings)
    log.info("run %s queued as attempt %s, resuming run %s", new.id, new.attempt, run_id)
    return queued


def _revoke(run: Run, settings: Settings, *, terminate: bool) -> None:
    if not run.celery_task_id:
        return
    try:
        from jobs.celery_app import get_app

        get_app(settings).control.revoke(run.celery_task_id, terminate=terminate)
    except Exception:  # the run's state already says cancelled; the executor will not start it
        log.warning("could not revoke task %s of run %s", run.celery_task_id, run.id, exc_info=True)


__all__ = ["check_run_config", "submit_run", "submit_to_experiment", "enqueue_run", "resend_run", "stop_run",
           "resume_run", "cancel_queued", "get_store", "get_run_writes", "QueuedRun", "ResumeError", "BrokerUnavailable",
           "InvalidTransition"]
