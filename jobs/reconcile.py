"""Re-sending queued runs whose message the broker lost.

A Redis restarted without persistence (or a flushed database, or a lost broker folder) forgets the
messages of runs that were waiting: they would stay ``queued`` forever. :func:`reconcile` compares the
database's queued runs with the task ids the broker holds (waiting in a queue, or delivered to a
worker and not yet acknowledged) and sends again the runs that are missing from it.

Sending a run twice is safe: a job claims its run with a compare-and-set ``queued → starting``
(:func:`jobs.executor.execute_run`), so a second message for the same run finds it no longer queued
and does nothing. To avoid pointless duplicates, a run is re-sent only when it has been queued for a
while (``min_age_s``) and was missing at two looks ``confirm_s`` apart (a message is briefly in neither
place while a worker takes it).

Workers and ``cooplab up`` reconcile on their maintenance timer; ``cooplab requeue`` does it on demand.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from celery import Celery

from db import states
from db.records import Run
from db.store import Store
from jobs.celery_app import is_redis_url
from jobs.settings import Settings

log = logging.getLogger(__name__)

MIN_AGE_S = 10.0
"""A run queued for less than this is never re-sent (its message may still be on its way); the timer's
passes use ``COOPLAB_RESEND_AFTER_S`` (:attr:`jobs.settings.Settings.resend_after_s`, the same default)."""


class BrokerUnreadable(RuntimeError):
    """The broker's contents cannot be listed (unreachable, or a transport this module cannot read)."""


def _task_id(message: Any) -> str | None:
    """The task id in a kombu message (a dict, or its JSON text)."""
    if isinstance(message, (bytes, str)):
        try:
            message = json.loads(message)
        except ValueError:
            return None
    if isinstance(message, list) and message:  # Redis 'unacked' entries: [message, exchange, routing_key]
        message = message[0]
        if isinstance(message, (bytes, str)):
            return _task_id(message)
    if not isinstance(message, dict):
        return None
    headers = message.get("headers") or {}
    found = headers.get("id") or (message.get("properties") or {}).get("correlation_id")
    return str(found) if found else None


def broker_task_ids(app: Celery, settings: Settings, queues: Iterable[str]) -> set[str]:
    """Task ids the broker holds for ``queues``: messages waiting, and (Redis) messages delivered and
    not yet acknowledged. Raises :class:`BrokerUnreadable` when the broker cannot be read."""
    url = settings.resolved_broker_url
    queues = sorted(set(queues))
    found: set[str] = set()
    if is_redis_url(url):
        try:
            with app.connection_for_read() as conn:
                conn.ensure_connection(max_retries=1)
                channel = conn.default_channel
                client = channel.client
                for queue in queues:
                    names = [channel._q_for_pri(queue, pri) for pri in channel.priority_steps]
                    for name in dict.fromkeys(names):
                        found.update(filter(None, map(_task_id, client.lrange(name, 0, -1))))
                found.update(filter(None, map(_task_id, client.hvals(channel.unacked_key))))
        except Exception as exc:
            raise BrokerUnreadable(f"cannot read the broker: {exc}") from exc
        return found
    if url.startswith("filesystem://"):
        folder = Path(app.conf.broker_transport_options["data_folder_in"])
        try:
            names = [p for p in folder.iterdir() if p.name.endswith(tuple(f".{q}.msg" for q in queues))]
        except OSError as exc:
            raise BrokerUnreadable(f"cannot read the broker folder {folder}: {exc}") from exc
        for path in names:
            try:
                found.update(filter(None, [_task_id(path.read_bytes())]))
            except OSError:
                continue  # taken by a worker meanwhile
        return found
    raise BrokerUnreadable(f"cannot list the messages of broker {url.split(':', 1)[0]}://")


@dataclass
class Reconciler:
    """Remembers since when each queued run has been missing from the broker (one per process)."""

    missing_since: dict[int, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def missing(self, store: Store, app: Celery, settings: Settings, *, min_age_s: float = MIN_AGE_S,
                confirm_s: float = 1.0, now: datetime | None = None) -> list[Run]:
        """Queued runs older than ``min_age_s`` absent from the broker at two looks ``confirm_s`` apart
        (this look and an earlier one)."""
        queued = self.queued_old_enough(store, min_age_s=min_age_s, now=now)
        with self.lock:
            if not queued:
                self.missing_since.clear()
                return []
            present = broker_task_ids(app, settings, {r.queue for r in queued})
            clock = time.monotonic()
            absent = [r for r in queued if not r.celery_task_id or r.celery_task_id not in present]
            self.missing_since = {r.id: self.missing_since.get(r.id, clock) for r in absent}
            return [r for r in absent if clock - self.missing_since[r.id] >= confirm_s]

    @staticmethod
    def queued_old_enough(store: Store, *, min_age_s: float, now: datetime | None = None) -> list[Run]:
        """Queued runs created at least ``min_age_s`` ago, on the database server's clock (the one
        ``created_at`` was stamped with; ``now`` overrides it)."""
        now = now or store.server_now()
        return [r for r in store.list_runs(statuses=[states.QUEUED], limit=10_000)
                if now - r.created_at >= timedelta(seconds=min_age_s)]

    def resend(self, store: Store, settings: Settings, runs: list[Run]) -> list[int]:
        """Send ``runs`` again (each with a new task id); returns the ids sent. A run that stopped
        being queued meanwhile is skipped."""
        from jobs.client import resend_run

        sent = []
        for run in runs:
            try:
                if resend_run(run.id, settings=settings):
                    sent.append(run.id)
                    log.warning("run %s was queued but missing from the broker: sent again", run.id)
            except Exception as exc:  # the broker went away again: the next pass retries
                log.warning("could not send run %s again: %s", run.id, exc)
                break
            with self.lock:
                self.missing_since.pop(run.id, None)
        return sent

    def reconcile(self, store: Store, app: Celery, settings: Settings, *, min_age_s: float = MIN_AGE_S,
                  confirm_s: float = 1.0) -> list[int]:
        """One pass: re-send the queued runs the broker has lost; returns their ids."""
        return self.resend(store, settings, self.missing(store, app, settings, min_age_s=min_age_s,
                                                          confirm_s=confirm_s))


_DEFAULT = Reconciler()


def reconcile(store: Store, app: Celery, settings: Settings, *, reconciler: Reconciler | None = None,
              min_age_s: float = MIN_AGE_S, confirm_s: float = 1.0) -> list[int]:
    """One reconcile pass with this process's :class:`Reconciler` (see the module docstring)."""
    return (reconciler or _DEFAULT).reconcile(store, app, settings, min_age_s=min_age_s, confirm_s=confirm_s)
