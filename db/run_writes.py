"""The writes a submit makes, on SQLAlchemy Core: get or create an experiment, create a run, record a
run's execution details.

:class:`RunWrites` declares these three operations once; :class:`db.store.Store` inherits them (inside
:meth:`~db.engine.StoreBase.within` they run in the caller's transaction, after its pending ORM
changes are flushed), and ``RunWrites(engine)`` alone runs them each in a Core write transaction of
its own (:func:`db.engine.write_connection`: begun, bounded and committed as a store's). That is what
``cooplab submit`` and :func:`cooplab.api.submit` use on a database URL that the writers without
SQLAlchemy do not take (those make the same writes with ``sqlite3`` on a SQLite file,
:mod:`db.sqlite_writes`, and with ``psycopg2`` on PostgreSQL, :mod:`db.postgres_writes`): they import
the two tables they write (:mod:`db.tables`) and never ``sqlalchemy.orm``, the ORM models or the
store's other operations (about a tenth of a CPU-second of a submit's start-up).

Rows written and records returned are the ORM's: the same columns and defaults (the tables are the
ORM classes' own ``__table__``), the same validation errors, and a returned record holds what was
written (as a flushed ORM object does).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from db import convert
from db.clock import server_now
from db.convert import check_experiment_name
from db.engine import StoreBase, write_connection
from db.errors import NotFoundError
from db.records import Experiment, Run
from db.tables import experiments, runs, utcnow

if TYPE_CHECKING:
    from sqlalchemy import Connection, CursorResult, Engine


def _inserted_id(result: CursorResult[Any]) -> int:
    key = result.inserted_primary_key
    assert key is not None  # a single-row INSERT
    return int(key[0])


def _experiment_named(conn: Connection, name: str) -> Experiment | None:
    row = conn.execute(select(experiments).where(experiments.c.name == name)).first()
    return convert.experiment(row) if row is not None else None


def _run_row(conn: Connection, run_id: int) -> Any:
    row = conn.execute(select(runs).where(runs.c.id == run_id)).first()
    if row is None:
        raise NotFoundError(f"no run with id {run_id}")
    return row


class RunWrites(StoreBase):
    """A submit's writes on ``engine``, each one write transaction, without the ORM; the same methods
    of a :class:`db.store.Store` (which inherits them)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def _core_write(self) -> Iterator[Connection]:
        """A Core write transaction (:func:`db.engine.write_connection`), or, bound by
        :meth:`~db.engine.StoreBase.within`, the caller's one with its pending ORM changes flushed."""
        if self._session is not None:
            self._session.flush()
            yield self._session.connection()
            return
        with write_connection(self.engine) as conn:
            yield conn

    def get_or_create_experiment(self, name: str, *, description: str = "", tags: Iterable[str] = (),
                                 config: Mapping[str, Any] | None = None) -> Experiment:
        """The experiment named ``name``, created with the given fields when there is none yet (the
        fields of an existing one are left as they are). Parallel callers all get the same experiment,
        never :class:`DuplicateNameError`: SQLite's write transactions run one at a time; on PostgreSQL a
        concurrent insert that wins the unique name makes this one read the winner's row."""
        with self._core_write() as conn:
            name = check_experiment_name(name)
            found = _experiment_named(conn, name)
            if found is not None:
                return found
            now = utcnow()
            values = {"name": name, "description": description or "", "tags": convert.clean_tags(tags),
                      "config": convert.json_config(config), "created_at": now, "updated_at": now}
            try:
                with conn.begin_nested():
                    new_id = _inserted_id(conn.execute(insert(experiments).values(values)))
            except IntegrityError:  # a concurrent insert won the unique name: read the winner's row
                found = _experiment_named(conn, name)
                if found is None:
                    raise
                return found
            return convert.experiment(SimpleNamespace(id=new_id, **values))

    def create_run(self, experiment_id: int, config: Mapping[str, Any], queue: str,
                   total_steps: int | None = None, resumed_from: int | None = None, *,
                   device: str | None = None, tags: Iterable[str] = (), notes: str = "") -> Run:
        """Store a new ``queued`` run with a snapshot of ``config``. ``attempt`` is 1, or one more than
        the run it resumes (``resumed_from``, which must belong to the same experiment)."""
        with self._core_write() as conn:
            if conn.scalar(select(experiments.c.id).where(experiments.c.id == experiment_id)) is None:
                raise NotFoundError(f"no experiment with id {experiment_id}")
            resumed = None if resumed_from is None else _run_row(conn, resumed_from)
            values = convert.new_run_values(experiment_id, config, queue, total_steps, resumed=resumed, device=device,
                                            tags=tags, notes=notes, created_at=server_now(conn))
            new_id = _inserted_id(conn.execute(insert(runs).values(values)))
            written = dict.fromkeys(runs.c.keys())  # the columns not given are NULL, as the ORM writes them
            written.update(values, id=new_id)
            return convert.run(SimpleNamespace(**written))

    def update_run(self, run_id: int, *, celery_task_id: str | None = None, worker: str | None = None,
                   log_path: str | None = None, output_dir: str | None = None,
                   total_steps: int | None = None, device: str | None = None) -> Run:
        """Record execution details (None leaves a field as it is)."""
        with self._core_write() as conn:
            row = _run_row(conn, run_id)
            changed = convert.run_changes(row, celery_task_id=celery_task_id, worker=worker, log_path=log_path,
                                          output_dir=output_dir, total_steps=total_steps, device=device)
            if changed:
                conn.execute(update(runs).where(runs.c.id == run_id).values(changed))
            return convert.run(SimpleNamespace(**{**row._mapping, **changed}))

    def ensure_schema(self) -> bool:
        """Migrate the database to the head revision unless it is there already
        (:func:`db.schema_version.ensure_schema`); True when alembic ran."""
        from db.schema_version import ensure_schema

        return ensure_schema(self.engine)


__all__ = ["RunWrites", "check_experiment_name"]
