"""Worker rows: each worker process registers itself, reports its current run, and goes offline.

Sightings (``last_seen``) are stamped and judged with the database server's clock (:mod:`db.clock`);
each registration also records how far the worker's own clock is from it (``clock_skew_s``)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from db import convert
from db.clock import db_now, measure_skew, server_now
from db.errors import NotFoundError
from db.models import WorkerRow
from db.ops_runs import ts
from db.records import Worker


def _strings(values: Iterable[str], what: str) -> list[str]:
    if isinstance(values, str):
        raise TypeError(f"{what} must be a list of strings, not the string {values!r}; use [{values!r}]")
    return [str(v) for v in values]


def upsert_worker(session: Session, *, name: str, host: str, devices: Iterable[str], queues: Iterable[str],
                  pid: int | None, current_run_id: int | None) -> Worker:
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


def set_worker_run(session: Session, name: str, run_id: int | None) -> None:
    result = session.execute(update(WorkerRow).where(WorkerRow.name == name)
                             .values(current_run_id=run_id, last_seen=db_now(), online=True)
                             .execution_options(synchronize_session=False))
    if result.rowcount != 1:
        raise NotFoundError(f"no worker named {name!r}; register it with upsert_worker first")


def list_workers(session: Session, *, online_only: bool) -> list[Worker]:
    query = select(WorkerRow).order_by(WorkerRow.name)
    if online_only:
        query = query.where(WorkerRow.online.is_(True))
    return [convert.worker(row) for row in session.scalars(query)]


def mark_worker_offline(session: Session, name: str) -> None:
    result = session.execute(update(WorkerRow).where(WorkerRow.name == name)
                             .values(online=False, current_run_id=None)
                             .execution_options(synchronize_session=False))
    if result.rowcount != 1:
        raise NotFoundError(f"no worker named {name!r}")


def mark_stale_workers_offline(session: Session, *, timeout_s: float, now: datetime | None) -> list[str]:
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s}")
    cutoff = (now or server_now(session)) - timedelta(seconds=timeout_s)
    stale = list(session.scalars(select(WorkerRow.name).where(WorkerRow.online.is_(True),
                                                                WorkerRow.last_seen < ts(cutoff))))
    if stale:
        session.execute(update(WorkerRow).where(WorkerRow.name.in_(stale)).values(online=False, current_run_id=None)
                        .execution_options(synchronize_session=False))
    return stale
