"""Worker rows (:class:`WorkerOps`, part of :class:`db.store.Store`): each worker process registers
itself, reports its current run, and goes offline.

Sightings (``last_seen``) are stamped and judged with the database server's clock (:mod:`db.clock`);
each registration also records how far the worker's own clock is from it (``clock_skew_s``)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, select, update

from db import convert
from db.clock import db_now, measure_skew, server_now
from db.engine import StoreBase
from db.errors import NotFoundError
from db.models import WorkerRow
from db.ops_runs import ts
from db.records import Worker


def _strings(values: Iterable[str], what: str) -> list[str]:
    if isinstance(values, str):
        raise TypeError(f"{what} must be a list of strings, not the string {values!r}; use [{values!r}]")
    return [str(v) for v in values]


class WorkerOps(StoreBase):
    """Worker rows: the operations of :class:`db.store.Store` on them, each one transaction."""

    def upsert_worker(self, name: str, *, host: str, devices: Iterable[str] = (), queues: Iterable[str] = (),
                      pid: int | None = None, current_run_id: int | None = None) -> Worker:
        """Create or refresh a worker row: marks it online and seen now."""
        with self._write() as session:
            if not name:
                raise ValueError("a worker needs a non-empty name (Celery's hostname, e.g. 'cpu@myhost')")
            row = session.get(WorkerRow, name)
            if row is None:
                row = WorkerRow(name=name)
                session.add(row)
            row.host = host
            row.devices = _strings(devices, "devices")
            row.queues = _strings(queues, "queues")
            row.pid = pid
            row.online = True
            row.clock_skew_s = measure_skew(session)
            row.last_seen = server_now(session)
            row.current_run_id = current_run_id
            session.flush()
            return convert.worker(row)

    def set_worker_run(self, name: str, run_id: int | None) -> None:
        """Record which run the worker is executing (None when idle) and that it was seen now."""
        with self._write() as session:
            result = session.execute(update(WorkerRow).where(WorkerRow.name == name)
                                     .values(current_run_id=run_id, last_seen=db_now(), online=True)
                                     .execution_options(synchronize_session=False))
            if cast(CursorResult[Any], result).rowcount != 1:
                raise NotFoundError(f"no worker named {name!r}; register it with upsert_worker first")

    def list_workers(self, *, online_only: bool = False) -> list[Worker]:
        """Known workers by name."""
        with self._read() as session:
            query = select(WorkerRow).order_by(WorkerRow.name)
            if online_only:
                query = query.where(WorkerRow.online.is_(True))
            return [convert.worker(row) for row in session.scalars(query)]

    def mark_worker_offline(self, name: str) -> None:
        """Mark a worker offline (it shut down) and clear its current run."""
        with self._write() as session:
            result = session.execute(update(WorkerRow).where(WorkerRow.name == name)
                                     .values(online=False, current_run_id=None)
                                     .execution_options(synchronize_session=False))
            if cast(CursorResult[Any], result).rowcount != 1:
                raise NotFoundError(f"no worker named {name!r}")

    def mark_stale_workers_offline(self, timeout_s: float, now: datetime | None = None, *,
                                   lock_wait_s: float | None = None) -> list[str]:
        """Mark online workers not seen for ``timeout_s`` seconds offline; returns their names.
        ``lock_wait_s`` bounds the wait for the write lock (see :meth:`db.store.Store.reap_lost`)."""
        with self._write(lock_wait_s=lock_wait_s) as session:
            if timeout_s <= 0:
                raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s}")
            cutoff = (now or server_now(session)) - timedelta(seconds=timeout_s)
            stale = list(session.scalars(select(WorkerRow.name).where(WorkerRow.online.is_(True),
                                                                        WorkerRow.last_seen < ts(cutoff))))
            if stale:
                session.execute(update(WorkerRow).where(WorkerRow.name.in_(stale)).values(online=False, current_run_id=None)
                                .execution_options(synchronize_session=False))
            return stale
