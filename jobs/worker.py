"""Starting a worker for one device: ``cooplab worker --device cuda:0``.

One worker process per device consumes that device's queue with one prefork child at a time, a fresh
child per run. A ``cuda:N`` worker pins its GPU with ``CUDA_VISIBLE_DEVICES=N`` before anything can
initialise CUDA (the job then sees it as ``cuda:0``); a ``cpu`` worker hides the GPUs. On start the
worker upgrades the database schema; on shutdown it first asks its current run to stop, so the run
checkpoints and ends ``stopped`` instead of ``lost``.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from celery.signals import worker_shutting_down

from jobs.celery_app import create_app, validate_device
from jobs.settings import Settings, apply_engine_settings, get_settings

log = logging.getLogger(__name__)


def node_name(device: str, host: str | None = None) -> str:
    """The worker's Celery node name, unique per device and host: ``cooplab-cuda0@myhost``."""
    return f"cooplab-{validate_device(device).replace(':', '')}@{host or socket.gethostname()}"


def pin_device(device: str, environ: dict[str, str] | None = None) -> None:
    """Set ``CUDA_VISIBLE_DEVICES`` for ``device`` (``cuda:3`` → ``3``; ``cpu`` → no GPU visible)."""
    environ = os.environ if environ is None else environ
    device = validate_device(device)
    environ["CUDA_VISIBLE_DEVICES"] = "" if device == "cpu" else device.split(":", 1)[1]


def worker_argv(device: str, *, loglevel: str, name: str | None = None) -> list[str]:
    """The ``celery worker`` arguments: the device's queue, prefork with one child, a fresh child per task."""
    return [
        "worker",
        "--queues", device,
        "--hostname", name or node_name(device),
        "--pool", "prefork",
        "--concurrency", "1",
        "--prefetch-multiplier", "1",
        "--max-tasks-per-child", "1",
        "--loglevel", loglevel,
        "--without-gossip",
        "--without-mingle",
    ]


def start_worker(device: str = "cpu", *, settings: Settings | None = None, loglevel: str | None = None,
                 name: str | None = None) -> None:
    """Run a worker for ``device`` in this process until it is shut down (blocks)."""
    validate_device(device)
    pin_device(device)
    settings = settings or get_settings()
    settings.ensure_dirs()
    apply_engine_settings(settings)  # each job applies them again from its own settings
    from db.migrate import upgrade

    upgrade(settings.resolved_database_url)
    app = create_app(settings, devices=(device,))
    worker_shutting_down.connect(_stop_active_run, weak=False)
    app.worker_main(worker_argv(device, loglevel=loglevel or settings.log_level, name=name))


def _stop_active_run(sig: Any = None, how: str = "", exitcode: int = 0, **kwargs: Any) -> None:
    """On worker shutdown, ask the run in progress to stop (checkpoint, then ``stopped``)."""
    from jobs.maintenance import active_run_id

    run_id = active_run_id()
    if run_id is None:
        return
    try:
        from db.store import Store

        with Store(get_settings().resolved_database_url) as store:
            store.request_stop(run_id)
        log.warning("worker shutting down (%s): asked run %s to stop", how, run_id)
    except Exception:
        log.warning("could not ask run %s to stop on shutdown", run_id, exc_info=True)
