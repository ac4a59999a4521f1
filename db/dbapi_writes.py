"""A submit's three writes on one plain DB-API connection, without SQLAlchemy: what the SQLite file's
writer (:mod:`db.sqlite_writes`, ``sqlite3``) and PostgreSQL's (:mod:`db.postgres_writes`, ``psycopg2``)
share.

``cooplab submit`` and :func:`cooplab.api.submit` make three writes: get or create the experiment,
create the run, record its task id. :class:`DbapiRunWrites` makes them as
:class:`db.run_writes.RunWrites` does on an engine (each one write transaction; a unique experiment
name taken by a concurrent insert is read back, not an error; the same validation, errors and
returned records, through :mod:`db.convert`), with SQL written here against the columns the tables
have: the schema stays declared once, in :mod:`db.tables` and its migrations. A subclass says how to
connect, how a write transaction begins, which parameter marker the driver takes, how the server's
current time is read and how values are stored and read back as SQLAlchemy stores and reads them.

The schema check (:meth:`DbapiRunWrites.ensure_schema`) reads ``alembic_version`` on the same
connection; a database that is not at the head revision (empty, behind, or ahead of this code) is
handed to alembic through a SQLAlchemy engine, exactly as :func:`db.schema_version.ensure_schema` does.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, TypeVar

from db import convert
from db.convert import check_experiment_name
from db.errors import NotFoundError
from db.records import Experiment, Run
from db.urls import redact_url

T = TypeVar("T")


class DbapiRunWrites(ABC):
    """:class:`db.run_writes.RunWrites`'s three writes, each one transaction on one DB-API connection
    (shared by this process's threads under a lock), opened on first use. Subclasses set ``driver`` (the
    DB-API module), ``marker`` (its parameter marker), ``now_sql`` (the server's time as the store
    stamps a new run) and implement :meth:`_connect` and :meth:`_begin`."""

    driver: Any
    marker = "?"
    now_sql = ""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ what a subclass says

    @abstractmethod
    def _connect(self) -> Any:
        """A new connection in autocommit mode: transactions are begun and ended by SQL statements."""

    @abstractmethod
    def _begin(self, conn: Any) -> None:
        """Begin a write transaction (statements: ``BEGIN ...`` and what bounds it)."""

    def _failed(self, exc: Exception) -> None:
        """A write transaction failed with the driver's ``exc`` (before it is raised); a hook, nothing here."""
        return None

    def _dropped(self, conn: Any) -> bool:
        """Whether the server has closed ``conn`` (it cannot be used again)."""
        return False

    def _to_db(self, value: Any) -> Any:
        """A value as SQLAlchemy binds it for its column."""
        return value

    def _from_db(self, table: str, name: str, value: Any) -> Any:
        """A stored value as SQLAlchemy returns it for the column ``name`` of ``table``."""
        return value

    def _insert(self, conn: Any, table: str, values: Mapping[str, Any]) -> int:
        """Insert one row; its id."""
        names = list(values)
        cursor = self._execute(conn, f"INSERT INTO {table} ({', '.join(names)}) VALUES "
                                     f"({', '.join([self.marker] * len(names))}) RETURNING id",
                               [self._to_db(values[name]) for name in names])
        return int(cursor.fetchone()[0])

    # ------------------------------------------------------------------ shared

    def _connection(self) -> Any:
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def _on_live_connection(self, action: Callable[[Any], T]) -> T:
        """``action(conn)`` on this writer's connection. One the server closed since its last use (a
        restart, an idle timeout) is replaced and ``action`` tried once more on the new one, as the
        engine's pool pings a connection before handing it out; a new connection is not tried twice."""
        reused = self._conn is not None
        conn = self._connection()
        try:
            return action(conn)
        except self.driver.Error:
            if not self._dropped(conn):
                raise
            self._conn = None
            if not reused:
                raise
        return action(self._connection())

    def _rollback(self, conn: Any) -> None:
        """End the open transaction, if any; a connection that broke off has none left to end (its error,
        not the rollback's, is the one raised)."""
        with suppress(self.driver.Error):
            self._execute(conn, "ROLLBACK")

    def _begun(self, conn: Any) -> Any:
        """``conn`` in a write transaction begun by :meth:`_begin`, or none open when beginning fails."""
        try:
            self._begin(conn)
        except self.driver.Error:
            self._rollback(conn)  # BEGIN may have run before what bounds the transaction failed
            raise
        return conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _execute(self, conn: Any, sql: str, params: Iterable[Any] = ()) -> Any:
        cursor = conn.cursor()
        cursor.execute(sql, tuple(params))
        return cursor

    @contextmanager
    def _write(self) -> Iterator[Any]:
        """One write transaction, begun as the engine begins one (:meth:`_begin`), committed or rolled back."""
        with self._lock:
            try:
                conn = self._on_live_connection(self._begun)
                try:
                    yield conn
                    self._execute(conn, "COMMIT")
                except BaseException:
                    self._rollback(conn)
                    raise
            except self.driver.Error as exc:
                if self._conn is not None and self._dropped(self._conn):  # connect again next time
                    self._conn = None
                self._failed(exc)
                raise

    def _row(self, conn: Any, table: str, where: str, value: Any) -> SimpleNamespace | None:
        cursor = self._execute(conn, f"SELECT * FROM {table} WHERE {where} = {self.marker}", (value,))
        row = cursor.fetchone()
        if row is None:
            return None
        names = [column[0] for column in cursor.description]
        return SimpleNamespace(**{name: self._from_db(table, name, v) for name, v in zip(names, row, strict=True)})

    def _run_row(self, conn: Any, run_id: int) -> SimpleNamespace:
        row = self._row(conn, "runs", "id", run_id)
        if row is None:
            raise NotFoundError(f"no run with id {run_id}")
        return row

    def get_or_create_experiment(self, name: str, *, description: str = "", tags: Iterable[str] = (),
                                 config: Mapping[str, Any] | None = None) -> Experiment:
        """As :meth:`db.run_writes.RunWrites.get_or_create_experiment`."""
        with self._write() as conn:
            name = check_experiment_name(name)
            found = self._row(conn, "experiments", "name", name)
            if found is not None:
                return convert.experiment(found)
            now = datetime.now(UTC)  # as db.tables.utcnow
            values = {"name": name, "description": description or "", "tags": convert.clean_tags(tags),
                      "config": convert.json_config(config), "created_at": now, "updated_at": now}
            try:
                self._execute(conn, "SAVEPOINT new_experiment")
                new_id = self._insert(conn, "experiments", values)
                self._execute(conn, "RELEASE SAVEPOINT new_experiment")
            except self.driver.IntegrityError:  # the unique name, taken: read the row that has it
                self._execute(conn, "ROLLBACK TO SAVEPOINT new_experiment")
                self._execute(conn, "RELEASE SAVEPOINT new_experiment")
                found = self._row(conn, "experiments", "name", name)
                if found is None:
                    raise
                return convert.experiment(found)
            return convert.experiment(self._row(conn, "experiments", "id", new_id))  # type: ignore[arg-type]

    def create_run(self, experiment_id: int, config: Mapping[str, Any], queue: str,
                   total_steps: int | None = None, resumed_from: int | None = None, *,
                   device: str | None = None, tags: Iterable[str] = (), notes: str = "") -> Run:
        """As :meth:`db.run_writes.RunWrites.create_run`."""
        with self._write() as conn:
            found = self._execute(conn, f"SELECT id FROM experiments WHERE id = {self.marker}", (experiment_id,))
            if found.fetchone() is None:
                raise NotFoundError(f"no experiment with id {experiment_id}")
            resumed = None if resumed_from is None else self._run_row(conn, resumed_from)
            created_at = self._execute(conn, self.now_sql).fetchone()[0]
            values = convert.new_run_values(experiment_id, config, queue, total_steps, resumed=resumed, device=device,
                                            tags=tags, notes=notes, created_at=created_at)
            new_id = self._insert(conn, "runs", values)
            return convert.run(self._run_row(conn, new_id))

    def update_run(self, run_id: int, *, celery_task_id: str | None = None, worker: str | None = None,
                   log_path: str | None = None, output_dir: str | None = None,
                   total_steps: int | None = None, device: str | None = None) -> Run:
        """As :meth:`db.run_writes.RunWrites.update_run`."""
        with self._write() as conn:
            row = self._run_row(conn, run_id)
            changed = convert.run_changes(row, celery_task_id=celery_task_id, worker=worker, log_path=log_path,
                                          output_dir=output_dir, total_steps=total_steps, device=device)
            if changed:
                assignments = ", ".join(f"{name} = {self.marker}" for name in changed)
                self._execute(conn, f"UPDATE runs SET {assignments} WHERE id = {self.marker}",
                              [*changed.values(), run_id])
            return convert.run(SimpleNamespace(**{**vars(row), **changed}))

    def current_revisions(self) -> frozenset[str]:
        """The revisions the database is at (empty without an ``alembic_version`` table, or when it cannot
        be read: alembic then says what is wrong). A database that cannot be connected to raises the
        driver's error at once: alembic would only wait for the same connect timeout again."""
        with self._lock:
            return self._on_live_connection(self._revisions)

    def _revisions(self, conn: Any) -> frozenset[str]:
        try:
            rows = self._execute(conn, "SELECT version_num FROM alembic_version").fetchall()
        except self.driver.Error:
            if self._dropped(conn):  # not a missing table: the connection (see _on_live_connection)
                raise
            return frozenset()
        return frozenset(row[0] for row in rows)

    def ensure_schema(self) -> bool:
        """As :func:`db.schema_version.ensure_schema`: nothing when the database is at the head revision,
        else alembic migrates it (through a SQLAlchemy engine); True when alembic ran."""
        from db.schema_version import head_revisions

        if self.current_revisions() == head_revisions():
            return False
        from db.engine import make_engine
        from db.migrate import upgrade_engine

        engine = make_engine(self.url)
        try:
            upgrade_engine(engine)
        finally:
            engine.dispose()
        self._schema_changed()
        return True

    def _schema_changed(self) -> None:
        """Forget what was read of the tables: alembic has just changed them; a hook, nothing here."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({redact_url(self.url)!r})"


__all__ = ["DbapiRunWrites"]
