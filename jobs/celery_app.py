"""The Celery application: broker choice, queues per device and the one-run-per-device worker policy.

Broker: Redis when ``COOPLAB_BROKER_URL`` is a ``redis://`` URL (many machines), otherwise kombu's
filesystem transport under the data directory (one machine, no server). Both support broadcast, so
``revoke(terminate=True)`` reaches the worker that runs a task. The SQLAlchemy transport does not
(revoke silently does nothing), so it is refused.

Worker policy: prefork pool, concurrency 1, prefetch 1, late acks and a fresh child process per task,
so each run gets a clean process (GPU memory freed when it exits); the parent imports torch before it
forks (``COOPLAB_WORKER_PRELOAD``, :mod:`jobs.worker`) but never initialises CUDA.
Each device has its own queue (``cpu``, ``cuda:0``, ...) on one direct exchange; the task is sent by
name (``jobs.run_training``), so senders never import the task module.
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from kombu import Exchange, Queue

from db.urls import redact_url
from jobs.broker_redis_write import CONNECT_TIMEOUT_S, SOCKET_TIMEOUT_S
from jobs.devices import validate_device  # re-exported: senders and workers check names with it
from jobs.settings import Settings, get_settings

TASK_NAME = "jobs.run_training"
EXCHANGE = Exchange("cooplab", type="direct", durable=True)


def device_queue(device: str) -> Queue:
    """The queue a worker for ``device`` consumes; the queue name is the device name."""
    device = validate_device(device)
    return Queue(device, EXCHANGE, routing_key=device)


def is_redis_url(url: str) -> bool:
    return url.startswith(("redis://", "rediss://", "unix://"))


def broker_options(settings: Settings) -> dict[str, Any]:
    """Celery settings that depend on the broker: folders for the filesystem transport, timeouts for Redis."""
    url = settings.resolved_broker_url
    if url.startswith("sqla+") or url.startswith("sqlalchemy"):
        raise ValueError(
            f"broker {redact_url(url)!r} is kombu's SQLAlchemy transport, which has no broadcast: stopping a run would "
            "silently fail. Use a redis:// URL or leave COOPLAB_BROKER_URL unset for the filesystem broker."
        )
    if is_redis_url(url):
        # A run can train for hours; the message stays unacked until it ends (late acks). Redelivery
        # after the visibility timeout is harmless (the executor only starts queued runs), but a long
        # timeout avoids pointless duplicate deliveries (COOPLAB_VISIBILITY_TIMEOUT_S, docs/jobs.md).
        return {"broker_transport_options": {"visibility_timeout": settings.visibility_timeout_s}}
    if not url.startswith("filesystem://"):
        return {}
    settings.ensure_dirs()
    folder = settings.broker_dir
    (folder / "control").mkdir(parents=True, exist_ok=True)
    return {
        # kombu's filesystem transport, except that an unreadable message file is quarantined (not a
        # worker-stopping error) and a failed write leaves no partial file (jobs/broker_fs.py)
        "broker_transport": "jobs.broker_fs:Transport",
        "broker_transport_options": {
            "data_folder_in": str(folder / "in"),
            "data_folder_out": str(folder / "in"),
            "processed_folder": str(folder / "processed"),
            "control_folder": str(folder / "control"),
            "store_processed": False,
            "polling_interval": 0.2,
        }
    }


def create_app(settings: Settings | None = None, *, devices: tuple[str, ...] = ("cpu",)) -> Celery:
    """Build a configured Celery app from settings (read from the environment when not given).

    ``devices`` are the queues the app declares (a worker declares the one it consumes)."""
    settings = settings or get_settings()
    backend = settings.resolved_result_backend
    if backend.startswith("file://"):
        settings.ensure_dirs()
    app = Celery("cooplab", broker=settings.resolved_broker_url, backend=backend, include=["jobs.tasks"])
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,  # outcomes live in the database, not in the result backend
        task_acks_late=True,
        task_reject_on_worker_lost=False,  # a killed child means a lost run, never a silent rerun
        worker_prefetch_multiplier=1,
        worker_concurrency=1,
        worker_pool="prefork",
        worker_max_tasks_per_child=1,
        worker_send_task_events=False,
        task_default_exchange=EXCHANGE.name,
        task_default_exchange_type=EXCHANGE.type,
        task_default_queue="cpu",
        task_default_routing_key="cpu",
        task_queues=[device_queue(d) for d in dict.fromkeys(("cpu", *devices))],
        task_routes={TASK_NAME: {"queue": "cpu"}},
        task_create_missing_queues=False,
        broker_connection_retry_on_startup=True,
        timezone="UTC",
        **broker_options(settings),
    )
    # by name: Celery loads the step when a worker starts, and this module does not import the
    # maintenance module (which imports this one)
    app.steps["worker"].add("jobs.maintenance:MaintenanceStep")
    return app


SEND_CONNECT_TIMEOUT_S = CONNECT_TIMEOUT_S
"""How long a sender waits for the broker to accept a connection (per try); declared with the Redis
push that does without this app (:mod:`jobs.broker_redis_write`), as is how long an answer may take."""


def create_sender_app(settings: Settings) -> Celery:
    """A Celery app that only sends (submit, resume, requeue): the same broker and queues as the
    workers, no result backend (outcomes live in the database), and short broker timeouts so a broker
    that is down fails a send within seconds instead of blocking."""
    app = Celery("cooplab-sender", broker=settings.resolved_broker_url, backend=None)
    options = broker_options(settings)
    transport = dict(options.pop("broker_transport_options", {}))
    if is_redis_url(settings.resolved_broker_url):
        transport.update(socket_connect_timeout=SEND_CONNECT_TIMEOUT_S, socket_timeout=SOCKET_TIMEOUT_S)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        task_default_exchange=EXCHANGE.name,
        task_default_exchange_type=EXCHANGE.type,
        task_default_queue="cpu",
        task_default_routing_key="cpu",
        task_create_missing_queues=False,
        broker_connection_timeout=SEND_CONNECT_TIMEOUT_S,
        broker_connection_retry=False,
        broker_connection_max_retries=1,
        broker_transport_options=transport,
        timezone="UTC",
        **options,
    )
    return app


_APPS: dict[tuple[str, str, str], Celery] = {}
_SENDERS: dict[tuple[str, str], Celery] = {}


def get_sender_app(settings: Settings | None = None) -> Celery:
    """The sending app for these settings (default: the environment's), created once per broker and data dir."""
    settings = settings or get_settings()
    key = (settings.resolved_broker_url, str(settings.data_dir))
    if key not in _SENDERS:
        _SENDERS[key] = create_sender_app(settings)
    return _SENDERS[key]


def get_app(settings: Settings | None = None) -> Celery:
    """The Celery app for these settings (default: the environment's), created once per broker and data dir."""
    settings = settings or get_settings()
    key = (settings.resolved_broker_url, settings.resolved_result_backend, str(settings.data_dir))
    if key not in _APPS:
        _APPS[key] = create_app(settings)
    return _APPS[key]


def __getattr__(name: str) -> Any:
    # ``celery -A jobs.celery_app worker`` looks up ``app``; it is built on first use, not at import.
    if name in ("app", "celery"):
        return get_app()
    raise AttributeError(f"module 'jobs.celery_app' has no attribute {name!r}")
