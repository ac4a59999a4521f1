"""Evaluation requests in the database: :class:`EvalRequestStore` works on a :class:`db.store.Store`'s
engine, each method one transaction returning frozen :class:`db.evaluation_records.EvalRequest` records.

A request moves ``queued → running → done | failed`` (a queued one may also fail: its message could
not be sent). Every move is a compare-and-set on the state it leaves, so a redelivered task message
never evaluates twice and a request settled by one party (the job, the worker that saw its job
process die, a reader that found its heartbeat stale) is never overwritten by another.

Every time is the database server's (:mod:`db.clock`): the job's heartbeats are judged by a reader on
another machine (:meth:`EvalRequestStore.reap_stale`), so neither the writer's clock nor the reader's is
used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, and_, func, select, text, update

from db.clock import db_now, server_now
from db.engine import StoreBase
from db.errors import NotFoundError, StoreError
from db.evaluation_records import (
    REQUEST_DONE,
    REQUEST_FAILED,
    REQUEST_QUEUED,
    REQUEST_RUNNING,
    EvalRequest,
)
from db.models import EvalRequestRow, RunRow
from db.ops_runs import ts
from db.store import Store

MAX_ERROR_CHARS = 500
"""A failed request's reason is one line of at most this many characters."""
ACTIVE = (REQUEST_QUEUED, REQUEST_RUNNING)
"""The states of a request that waits for or holds a worker."""
_PG_CREATE_LOCK = 0x636F_6F70_6576_616C  # "coopeval": serialises the count-then-insert of create() on PostgreSQL


class EvalRequestLimitError(StoreError, ValueError):
    """A new request was refused: ``active`` requests (queued or running) already reach ``limit``, of
    run ``run_id`` or (``run_id`` None) of all runs. The caller names the setting that raises it."""

    def __init__(self, run_id: int | None, active: int, limit: int) -> None:
        self.run_id, self.active, self.limit = run_id, active, limit
        whose = f"of run {run_id}" if run_id is not None else "of all runs"
        super().__init__(f"{active} evaluation requests {whose} are queued or running, the limit of {limit}")


def one_line(text: str) -> str:
    """``text`` on one line (whitespace runs become one space), cut to :data:`MAX_ERROR_CHARS`."""
    line = " ".join(str(text).split())
    return line if len(line) <= MAX_ERROR_CHARS else line[:MAX_ERROR_CHARS - 1] + "…"


def _record(row: EvalRequestRow) -> EvalRequest:
    return EvalRequest(id=row.id, run_id=row.run_id, status=row.status, checkpoint=row.checkpoint,
                       options=dict(row.options or {}), queue=row.queue, celery_task_id=row.celery_task_id,
                       worker=row.worker, error=row.error, evaluation_ids=tuple(row.evaluation_ids or ()),
                       created_at=row.created_at, started_at=row.started_at, finished_at=row.finished_at,
                       heartbeat_at=row.heartbeat_at)


class EvalRequestStore(StoreBase):
    """Evaluation requests of runs, on the database of ``store``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.engine = store.engine

    def create(self, run_id: int, *, checkpoint: str, options: Mapping[str, Any], queue: str,
               max_active_for_run: int | None = None, max_active: int | None = None) -> EvalRequest:
        """A new ``queued`` request to evaluate run ``run_id`` (else :class:`NotFoundError`). With
        ``max_active_for_run`` / ``max_active``, refused (:class:`EvalRequestLimitError`, nothing
        stored) when that many requests of the run / of all runs are already queued or running; the
        count and the insert are one transaction that no other create interleaves with (SQLite's write
        lock, a transaction-scoped advisory lock on PostgreSQL)."""
        with self._write() as s:
            if s.get(RunRow, run_id) is None:
                raise NotFoundError(f"no run with id {run_id}")
            if max_active_for_run is not None or max_active is not None:
                self._within_limits(s, run_id, max_active_for_run, max_active)
            row = EvalRequestRow(run_id=run_id, status=REQUEST_QUEUED, checkpoint=str(checkpoint),
                                 options=dict(options), queue=queue, evaluation_ids=[],
                                 created_at=server_now(s))
            s.add(row)
            s.flush()
            return _record(row)

    def _within_limits(self, s: Any, run_id: int, max_active_for_run: int | None, max_active: int | None) -> None:
        if self.engine.dialect.name == "postgresql":
            s.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_CREATE_LOCK})
        active = EvalRequestRow.status.in_(ACTIVE)
        if max_active_for_run is not None:
            mine = s.scalar(select(func.count()).select_from(EvalRequestRow)
                            .where(active, EvalRequestRow.run_id == run_id))
            if mine >= max_active_for_run:
                raise EvalRequestLimitError(run_id, mine, max_active_for_run)
        if max_active is not None:
            every = s.scalar(select(func.count()).select_from(EvalRequestRow).where(active))
            if every >= max_active:
                raise EvalRequestLimitError(None, every, max_active)

    def set_task_id(self, request_id: int, task_id: str) -> None:
        """Record the id of the task message sent for the request."""
        with self._write() as s:
            s.execute(update(EvalRequestRow).where(EvalRequestRow.id == request_id).values(celery_task_id=task_id))

    def get(self, request_id: int) -> EvalRequest:
        """The request with this id (else :class:`NotFoundError`)."""
        with self._read() as s:
            row = s.get(EvalRequestRow, request_id)
            if row is None:
                raise NotFoundError(f"no evaluation request with id {request_id}")
            return _record(row)

    def list_for_run(self, run_id: int, *, limit: int = 50) -> list[EvalRequest]:
        """A run's requests, newest first."""
        with self._read() as s:
            rows = s.scalars(select(EvalRequestRow).where(EvalRequestRow.run_id == run_id)
                             .order_by(EvalRequestRow.id.desc()).limit(limit))
            return [_record(row) for row in rows]

    def claim(self, request_id: int, *, worker: str | None = None) -> EvalRequest | None:
        """``queued → running`` for the job that will evaluate it; None (nothing changed) when the
        request is not queued any more (another delivery took it, or it was settled)."""
        with self._write() as s:
            result = s.execute(update(EvalRequestRow)
                               .where(and_(EvalRequestRow.id == request_id, EvalRequestRow.status == REQUEST_QUEUED))
                               .values(status=REQUEST_RUNNING, worker=worker, started_at=db_now(),
                                       heartbeat_at=db_now())
                               .execution_options(synchronize_session=False))
            if cast(CursorResult[Any], result).rowcount != 1:
                return None
            return _record(s.get_one(EvalRequestRow, request_id))

    def heartbeat(self, request_id: int) -> bool:
        """Refresh a running request's heartbeat; False when it is no longer running."""
        with self._write() as s:
            result = s.execute(update(EvalRequestRow)
                               .where(and_(EvalRequestRow.id == request_id, EvalRequestRow.status == REQUEST_RUNNING))
                               .values(heartbeat_at=db_now()).execution_options(synchronize_session=False))
            return cast(CursorResult[Any], result).rowcount == 1

    def finish(self, request_id: int, status: str, *, error: str | None = None,
               evaluation_ids: Iterable[int] = (), expected_from: Iterable[str] = (REQUEST_RUNNING,)) -> EvalRequest:
        """Settle the request as ``done`` (with the ids of the records it stored) or ``failed`` (with a
        reason, kept to one line) if it is in one of ``expected_from``; returns it as it is afterwards
        (someone else's final state is kept)."""
        if status not in (REQUEST_DONE, REQUEST_FAILED):
            raise ValueError(f"an evaluation request ends done or failed, not {status!r}")
        if status == REQUEST_FAILED and not error:
            raise ValueError("a failed evaluation request needs a reason (error)")
        with self._write() as s:
            s.execute(update(EvalRequestRow)
                      .where(and_(EvalRequestRow.id == request_id, EvalRequestRow.status.in_(tuple(expected_from))))
                      .values(status=status, error=one_line(error) if error else None,
                              evaluation_ids=[int(i) for i in evaluation_ids], finished_at=db_now())
                      .execution_options(synchronize_session=False))
            row = s.get(EvalRequestRow, request_id)
            if row is None:
                raise NotFoundError(f"no evaluation request with id {request_id}")
            s.refresh(row)
            return _record(row)

    def reap_stale(self, timeout_s: float, now: datetime | None = None) -> list[int]:
        """Fail the ``running`` requests whose job sent no heartbeat for ``timeout_s`` seconds (its worker
        died or hung); returns their ids. ``now`` defaults to the database server's time, the clock the
        heartbeats were stamped with."""
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s}")
        with self._write() as s:
            now = now or server_now(s)
            stale = (func.coalesce(EvalRequestRow.heartbeat_at, EvalRequestRow.created_at)
                     < ts(now - timedelta(seconds=timeout_s)))
            ids = list(s.scalars(select(EvalRequestRow.id).where(EvalRequestRow.status == REQUEST_RUNNING, stale)))
            changed = []
            for request_id in ids:
                result = s.execute(
                    update(EvalRequestRow)
                    .where(and_(EvalRequestRow.id == request_id, EvalRequestRow.status == REQUEST_RUNNING, stale))
                    .values(status=REQUEST_FAILED, finished_at=now,
                            error=f"no heartbeat for more than {timeout_s:g} s: its worker died or hung")
                    .execution_options(synchronize_session=False))
                if cast(CursorResult[Any], result).rowcount == 1:
                    changed.append(request_id)
            return changed
