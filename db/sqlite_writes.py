"""A submit's writes to a SQLite file with the standard library's ``sqlite3``: no SQLAlchemy.

``cooplab submit`` and :func:`cooplab.api.submit` on the default database (a ``sqlite:///`` file) make
three writes: get or create the experiment, create the run, record its task id. Importing SQLAlchemy
for them costs about a quarter of a CPU-second, a third of a submit's start-up; :class:`SqliteRunWrites`
makes the same writes in the same way as :class:`db.run_writes.RunWrites` on a SQLite engine
(:mod:`db.engine`): WAL journal, foreign keys on, ``BEGIN IMMEDIATE`` write transactions that wait up to
:data:`db.engine.SQLITE_BUSY_TIMEOUT_MS` for the write lock (naming its holder when they give up), an
owner-only database file. Values are stored as SQLAlchemy stores them on SQLite (times as naive-UTC
``YYYY-MM-DD HH:MM:SS.ffffff`` text, JSON as ``json.dumps`` text, booleans as 0/1) and read back by
the columns' declared types, so the rows, the errors and the records returned are the Core writes' own
(``tests/db/test_db_run_writes.py`` runs both through the same checks). The tables' columns are read
from the database (``PRAGMA table_info``): the schema stays declared once, in :mod:`db.tables` and its
migrations.

The schema check (:meth:`SqliteRunWrites.ensure_schema`) reads ``alembic_version`` here too; a database
that is not at the head revision (empty, behind, or ahead of this code) is handed to alembic through a
SQLAlchemy engine, exactly as :func:`db.schema_version.ensure_schema` does. Other URLs (PostgreSQL,
SQLite in memory or with URL options) keep :class:`db.run_writes.RunWrites` (:func:`plain_sqlite_file`).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from db import convert
from db.convert import check_experiment_name
from db.errors import NotFoundError
from db.records import Experiment, Run
from db.urls import redact_url

log = logging.getLogger("db.engine")

SQLITE_BUSY_TIMEOUT_MS = 30_000
"""As :data:`db.engine.SQLITE_BUSY_TIMEOUT_MS` (a test holds the two equal)."""

_PREFIX = "sqlite:///"
# the server's time as SQLAlchemy's SQLite dialect stores times (db.clock.db_now on SQLite)
_NOW = "SELECT (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000')"


def plain_sqlite_file(url: str) -> Path | None:
    """The database file of a plain ``sqlite:///path`` URL, as :func:`db.engine.make_engine` opens it;
    None for anything else (another database, SQLite in memory, a URL with options or escapes), which
    is left to SQLAlchemy."""
    if not url.startswith(_PREFIX):
        return None
    database = url[len(_PREFIX):]
    if not database or database == ":memory:" or database.startswith("file:") or any(c in database for c in "?%#"):
        return None
    return Path(database).expanduser()


def _to_db_time(value: datetime) -> str:
    """A time as SQLAlchemy binds a :class:`db.tables.UTCDateTime` on SQLite: naive UTC, microseconds."""
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


def _from_db_time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value).replace(tzinfo=UTC)


def _from_db(kind: str, value: Any) -> Any:
    """A stored value as SQLAlchemy returns it for a column of declared type ``kind``."""
    if value is None:
        return None
    if kind == "DATETIME":
        return _from_db_time(value)
    if kind == "JSON":
        return json.loads(value)
    if kind == "BOOLEAN":
        return bool(value)
    return value


def _to_db(value: Any) -> Any:
    if isinstance(value, datetime):
        return _to_db_time(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return value


class SqliteRunWrites:
    """:class:`db.run_writes.RunWrites`'s three writes on the SQLite file ``path`` (its URL ``url``), each
    one ``BEGIN IMMEDIATE`` transaction on one ``sqlite3`` connection (shared by this process's threads
    under a lock)."""

    def __init__(self, url: str, path: Path, *, busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS) -> None:
        self.url = url
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self._types: dict[str, dict[str, str]] = {}

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            from db.sqlite_files import private_sqlite_files

            private_sqlite_files(self.path)
            conn = sqlite3.connect(self.path, timeout=self._busy_timeout_ms / 1000, isolation_level=None,
                                   check_same_thread=False)
            for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON",
                           f"busy_timeout={int(self._busy_timeout_ms)}"):
                conn.execute(f"PRAGMA {pragma}")
            self._conn = conn
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, begun with the write lock (``BEGIN IMMEDIATE``), committed or rolled back."""
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if "database is locked" in str(exc):
                    from db.sqlite_locks import describe_write_lock_holders

                    holders = describe_write_lock_holders(self.path)
                    log.warning("%s: database is locked%s", self.path, f"; {holders}" if holders else "")
                raise

    def _column_types(self, conn: sqlite3.Connection, table: str) -> dict[str, str]:
        if table not in self._types:
            found = {row[1]: str(row[2]).upper() for row in conn.execute(f"PRAGMA table_info({table})")}
            if not found:  # as the Core writes fail on a database without CoopLab's tables
                raise sqlite3.OperationalError(f"no such table: {table}")
            self._types[table] = found
        return self._types[table]

    def _row(self, conn: sqlite3.Connection, table: str, where: str, value: Any) -> SimpleNamespace | None:
        types = self._column_types(conn, table)
        cursor = conn.execute(f"SELECT * FROM {table} WHERE {where} = ?", (value,))
        row = cursor.fetchone()
        if row is None:
            return None
        names = [column[0] for column in cursor.description]
        return SimpleNamespace(**{name: _from_db(types.get(name, ""), v) for name, v in zip(names, row, strict=True)})

    def _insert(self, conn: sqlite3.Connection, table: str, values: Mapping[str, Any]) -> int:
        names = list(values)
        cursor = conn.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                              [_to_db(values[name]) for name in names])
        assert cursor.lastrowid is not None
        return int(cursor.lastrowid)

    def _run_row(self, conn: sqlite3.Connection, run_id: int) -> SimpleNamespace:
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
                conn.execute("SAVEPOINT new_experiment")
                new_id = self._insert(conn, "experiments", values)
                conn.execute("RELEASE new_experiment")
            except sqlite3.IntegrityError:  # the unique name, taken: read the row that has it
                conn.execute("ROLLBACK TO new_experiment")
                conn.execute("RELEASE new_experiment")
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
            if conn.execute("SELECT id FROM experiments WHERE id = ?", (experiment_id,)).fetchone() is None:
                raise NotFoundError(f"no experiment with id {experiment_id}")
            resumed = None if resumed_from is None else self._run_row(conn, resumed_from)
            values = convert.new_run_values(experiment_id, config, queue, total_steps, resumed=resumed, device=device,
                                            tags=tags, notes=notes, created_at=conn.execute(_NOW).fetchone()[0])
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
                conn.execute(f"UPDATE runs SET {', '.join(f'{name} = ?' for name in changed)} WHERE id = ?",
                             [*changed.values(), run_id])
            return convert.run(SimpleNamespace(**{**vars(row), **changed}))

    def current_revisions(self) -> frozenset[str]:
        """The revisions the database is at (empty without an ``alembic_version`` table, or when the
        file cannot be read: alembic then says what is wrong)."""
        try:
            with self._lock:
                rows = self._connection().execute("SELECT version_num FROM alembic_version").fetchall()
        except sqlite3.Error:
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
        self._types.clear()
        return True

    def __repr__(self) -> str:
        return f"SqliteRunWrites({redact_url(self.url)!r})"


__all__ = ["SqliteRunWrites", "plain_sqlite_file"]
