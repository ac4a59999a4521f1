"""Starting a worker for one device: ``cooplab worker --device cuda:0``, or for a set of GPUs it owns
together: ``cooplab worker --device cuda:0,1,2,3``.

One worker process per device consumes that device's queue with one prefork child at a time, a fresh
child per run. A worker that owns a GPU set consumes the set's queue (``cuda:0,1,2,3``): its jobs see
the set's GPUs as ``cuda:0`` to ``cuda:3``, and a ``parallel_training: fsdp`` run there launches up to
one rank per GPU (:mod:`jobs.fsdp_job`); a single-device run there trains on ``cuda:0`` and may place
agents on the others (``agent_devices``).

Before it forks any child, the worker imports torch, transformers, datasets and the trainer
(``COOPLAB_WORKER_PRELOAD``, on by default): every child starts with them loaded, copy-on-write,
instead of importing them again; importing them initialises no CUDA. The preload runs without the
garbage collector and ends with :func:`gc.freeze`, so no collection, in the worker or in a job, scans
what it built (nor writes to, and so copies, its pages). A ``cuda:N`` worker pins its
GPU (or GPUs) with ``CUDA_VISIBLE_DEVICES=N`` before anything can initialise CUDA (the job then sees it as
``cuda:0``); a ``cpu`` worker hides the GPUs. Before torch loads, the worker sets its job processes'
OpenMP threads to wait passively and gives each job its share of the worker's cores
(:mod:`jobs.cpu_threads`). On start the worker upgrades the database schema; on
shutdown it takes no new run (one it had taken and not started goes back to the queue,
:mod:`jobs.warm_shutdown`) and asks its current run to stop, so the run checkpoints and ends
``stopped`` instead of ``lost``.

Each worker has its own name (device, pid and host, or ``--name``), so two workers on one host are
two rows in the worker registry and each stops only its own runs; a name a live worker uses is
refused. A worker refuses a data directory that belongs to another database (:mod:`jobs.datadir`),
and an artifact store it cannot use (wrong credentials, a missing bucket).
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import socket
import time
import warnings
from typing import Any

from celery.signals import worker_ready, worker_shutting_down

from jobs import warm_shutdown
from jobs.celery_app import create_app, validate_device
from jobs.cpu_threads import configure_threads
from jobs.devices import device_gpus
from jobs.settings import Settings, get_settings

log = logging.getLogger(__name__)


def node_name(device: str, host: str | None = None, pid: int | None = None) -> str:
    """The worker's Celery node name, unique per process: device, pid and host, ``cooplab-cuda0-4242@myhost``
    (``cooplab-cuda0_1_2_3-4242@myhost`` for a GPU set; two workers on one host are two workers, in the
    registry and for ``cooplab up``)."""
    return (f"cooplab-{validate_device(device).replace(':', '').replace(',', '_')}-{pid or os.getpid()}"
            f"@{host or socket.gethostname()}")


def worker_name(device: str, name: str | None = None) -> str:
    """The node name to use: ``name`` (``NAME@host`` when it has no ``@``), else :func:`node_name`."""
    if not name:
        return node_name(device)
    name = name.strip()
    if not name or any(c.isspace() for c in name):
        raise ValueError(f"worker name {name!r} must be non-empty and without spaces")
    return name if "@" in name else f"{name}@{socket.gethostname()}"


class WorkerNameTaken(RuntimeError):
    """Another live worker already uses this name; the message says which."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_worker_name(store: Any, name: str, settings: Settings) -> None:
    """Refuse a name that a live worker uses: same host and its pid alive, or another host that reported
    within the heartbeat timeout. A name left behind by a dead worker may be taken over."""

    host = socket.gethostname()
    for worker in store.list_workers(online_only=True):
        if worker.name != name:
            continue
        if worker.host == host:
            alive = worker.pid is not None and worker.pid != os.getpid() and _pid_alive(worker.pid)
        else:
            alive = (store.server_now() - worker.last_seen).total_seconds() < settings.heartbeat_timeout_s
        if alive:
            raise WorkerNameTaken(f"a worker named {name!r} is already running (pid {worker.pid} on {worker.host}); "
                                  "give this one another --name, or leave --name out for a unique one")


def prepare_worker(settings: Settings, name: str) -> None:
    """Before a worker starts: the database is migrated, the data directory belongs to it
    (:func:`jobs.datadir.claim_data_dir`), no live worker has this name, and the artifact store
    (``COOPLAB_ARTIFACTS_URL``) takes this worker's credentials (:func:`check_artifact_store`). A
    database at the head revision is told by one ``SELECT``; alembic loads only to migrate."""
    from db.schema_version import ensure_schema
    from db.store import Store
    from jobs.datadir import claim_data_dir

    with Store(settings.resolved_database_url) as store:
        ensure_schema(store.engine)
        claim_data_dir(settings, store)
        check_worker_name(store, name, settings)
    check_artifact_store(settings)


def check_artifact_store(settings: Settings) -> None:
    """Refuse to start with a shared artifact store this worker cannot use: wrong credentials or a
    missing bucket raise :class:`jobs.artifacts.StoreRefused` (one line; the bucket is created instead
    with ``COOPLAB_ARTIFACTS_CREATE_BUCKET``), a store that does not answer ``StoreUnavailable``. The
    embedded store (unset) needs no check."""
    if not settings.artifacts_url.strip():
        return
    from jobs.artifacts import check_store

    store = check_store(settings)
    log.info("artifact store %s: checked", store.where)


def pin_device(device: str, environ: dict[str, str] | None = None) -> None:
    """Set ``CUDA_VISIBLE_DEVICES`` for ``device`` (``cuda:3`` → ``3``; a set ``cuda:4,5,6,7`` → ``4,5,6,7``,
    which its jobs see as ``cuda:0`` to ``cuda:3``; ``cpu`` → no GPU visible)."""
    environ = os.environ if environ is None else environ
    environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in device_gpus(device))


MAX_SLOTS = 8
"""The most jobs one worker runs at once on its device (``--slots``)."""


def check_slots(slots: int) -> int:
    """``slots`` if it is a whole number of jobs from 1 to :data:`MAX_SLOTS`, else ``ValueError`` saying so."""
    if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= MAX_SLOTS:
        raise ValueError(f"--slots must be a whole number from 1 to {MAX_SLOTS} (jobs at once on the device), "
                         f"got {slots!r}")
    return slots


def worker_argv(device: str, *, loglevel: str, name: str | None = None, slots: int = 1) -> list[str]:
    """The ``celery worker`` arguments: the device's queue, prefork with ``slots`` children (one by
    default; more packs small runs onto the device), a fresh child per task."""
    return [
        "worker",
        "--queues", device,
        "--hostname", name or node_name(device),
        "--pool", "prefork",
        "--concurrency", str(check_slots(slots)),
        "--prefetch-multiplier", "1",
        "--max-tasks-per-child", "1",
        "--loglevel", loglevel,
        "--without-gossip",
        "--without-mingle",
    ]


def quiet_progress_bars() -> None:
    """No progress bars in the jobs: Hugging Face's ("Writing model shards", "Loading weights") and any
    other tqdm bar would reach the console as WARNING lines of every job (Celery redirects the children's
    stderr to its log at WARNING); the run's log has its steps. tqdm and huggingface_hub read these
    variables when they are imported, so this runs before the worker preloads the engine (which imports
    them) and before any job process starts."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")


def quiet_console() -> None:
    """A quiet console: drop Celery's multi-line "running the worker with superuser privileges"
    warning (a container or a one-user machine runs as root; Celery only warns because the worker
    accepts JSON messages alone, it refuses to run as root with pickle; one log line says it instead),
    and the Hugging Face progress bars of the jobs."""
    from celery.exceptions import SecurityWarning

    quiet_progress_bars()
    warnings.filterwarnings("ignore", message=r".*superuser privileges", category=SecurityWarning)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        log.info("the worker runs as root; it accepts only JSON task messages")


PRELOADED_MODULES = ("torch", "transformers", "transformers.modeling_utils", "datasets", "engine.build.run",
                     "engine.tasks.builtin", "engine.models.loading", "jobs.executor")
"""What every job imports before it trains; a worker imports them once, before it forks job processes.
``datasets`` (with pandas and pyarrow) is here because every task holds its items in a ``Dataset``;
the task registry, the model loader and the executor because every run uses them."""


def preload_engine(settings: Settings) -> float | None:
    """Import :data:`PRELOADED_MODULES` in this (worker parent) process; returns the seconds it took,
    None when ``worker_preload`` is off. Call it before the pool forks, from the main thread."""
    if not settings.worker_preload:
        return None
    t0 = time.monotonic()
    collecting = gc.isenabled()
    gc.disable()  # imports build objects that live on: collections while importing are wasted work
    try:
        for name in PRELOADED_MODULES:
            importlib.import_module(name)
        gc.freeze()  # what the preload built: never scanned again, here or in the job processes
    finally:
        if collecting:
            gc.enable()
    seconds = time.monotonic() - t0
    torch = importlib.import_module("torch")
    if torch.cuda.is_initialized():  # a fork would hand the children a CUDA context they cannot use
        raise RuntimeError("preloading the engine initialised CUDA in the worker parent; set "
                           "COOPLAB_WORKER_PRELOAD=false and report this")
    log.info("preloaded torch, transformers, datasets and the trainer in %.1f s: job processes start with them",
             seconds)
    return seconds


def start_worker(device: str = "cpu", *, settings: Settings | None = None, loglevel: str | None = None,
                 name: str | None = None, slots: int = 1) -> None:
    """Run a worker for ``device`` in this process until it is shut down (blocks); it runs up to
    ``slots`` jobs at once (each in its own process, all on the device)."""
    validate_device(device)
    check_slots(slots)
    quiet_progress_bars()  # before the preload imports tqdm and huggingface_hub: they read it at import
    pin_device(device)
    settings = settings or get_settings()
    # before torch loads (preload, or each job process): waiting OpenMP threads sleep, each job its share of cores
    threads = configure_threads(settings.job_threads, slots=slots)
    settings.ensure_dirs()
    name = worker_name(device, name)
    prepare_worker(settings, name)
    preload_engine(settings)
    app = create_app(settings, devices=(device,))
    quiet_console()
    warm_shutdown.reset()  # mapped at import, before the pool forks: every job process shares the flag
    worker_ready.connect(warm_shutdown.remember_consumer, weak=False)
    worker_ready.connect(lambda **_: log.info("job processes: %s", threads.describe()), weak=False)
    worker_shutting_down.connect(_stop_active_run, weak=False)
    app.worker_main(worker_argv(device, loglevel=loglevel or settings.log_level, name=name, slots=slots))


def _stop_active_run(sig: Any = None, how: str = "", exitcode: int = 0, **kwargs: Any) -> None:
    """On worker shutdown, take no new run (:mod:`jobs.warm_shutdown`) and ask the runs in progress to
    stop (checkpoint, then ``stopped``). A run whose job process has not claimed it yet is left
    ``queued``: that job gives its message back to the queue instead of starting it."""
    from db import states
    from jobs.maintenance import active_run_ids

    warm_shutdown.mark()
    for run_id in active_run_ids():
        try:
            from db.store import Store

            with Store(get_settings().resolved_database_url) as store:
                if store.get_run(run_id).status == states.QUEUED:
                    log.warning("worker shutting down (%s): run %s was not started; it goes back to the queue",
                                how, run_id)
                    continue
                store.request_stop(run_id)
            log.warning("worker shutting down (%s): asked run %s to stop", how, run_id)
        except Exception:
            log.warning("could not ask run %s to stop on shutdown", run_id, exc_info=True)
