"""A submit's writes to a SQLite file with the standard library's ``sqlite3``: no SQLAlchemy.

``cooplab submit`` and :func:`cooplab.api.submit` on the default database (a ``sqlite:///`` file) make
three writes: get or create the experiment, create the run, record its task id. Importing SQLAlchemy
for them costs about a quarter of a CPU-second, a third of a submit's start-up; :class:`SqliteRunWrites`
makes the same writes in the same way as :class:`db.run_writes.RunWrites` on a SQLite engine
(:mod:`db.engine`): WAL journal, foreign keys on, ``BEGIN IMMEDIATE`` write transactions that wait up to
:data:`db.write_bounds.SQLITE_BUSY_TIMEOUT_MS` for the write lock (naming its holder when they give up), an
owner-only database file. Values are stored as SQLAlchemy stores them on SQLite (times as naive-UTC
``YYYY-MM-DD HH:MM:SS.ffffff`` text, JSON as ``json.dumps`` text, booleans as 0/1) and read back by
the columns' declared types, so the rows, the errors and the records returned are the Core writes' own
(``tests/db/test_db_run_writes.py`` runs both through the same checks). The tables' columns are read
from the database (``PRAGMA table_info``): the schema stays declared once, in :mod:`db.tables` and its
migrations. The writes themselves, and the schema check that reads ``alembic_version``, are shared with
PostgreSQL's writer (:mod:`db.dbapi_writes`).

Other URLs (SQLite in memory or with URL options) keep :class:`db.run_writes.RunWrites`
(:func:`plain_sqlite_file`); PostgreSQL has its own (:mod:`db.postgres_writes`).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from db.dbapi_writes import DbapiRunWrites
from db.write_bounds import SQLITE_BUSY_TIMEOUT_MS

log = logging.getLogger("db.engine")

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


class SqliteRunWrites(DbapiRunWrites):
    """:class:`db.run_writes.RunWrites`'s three writes on the SQLite file ``path`` (its URL ``url``), each
    one ``BEGIN IMMEDIATE`` transaction on one ``sqlite3`` connection (:class:`db.dbapi_writes.DbapiRunWrites`)."""

    driver = sqlite3
    now_sql = _NOW

    def __init__(self, url: str, path: Path, *, busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS) -> None:
        super().__init__(url)
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._types: dict[str, dict[str, str]] = {}

    def _connect(self) -> sqlite3.Connection:
        from db.sqlite_files import private_sqlite_files

        private_sqlite_files(self.path)
        conn = sqlite3.connect(self.path, timeout=self._busy_timeout_ms / 1000, isolation_level=None,
                               check_same_thread=False)
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON",
                       f"busy_timeout={int(self._busy_timeout_ms)}"):
            conn.execute(f"PRAGMA {pragma}")
        return conn

    def _begin(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")  # the write lock up front

    def _failed(self, exc: Exception) -> None:
        if isinstance(exc, sqlite3.OperationalError) and "database is locked" in str(exc):
            from db.sqlite_locks import describe_write_lock_holders

            holders = describe_write_lock_holders(self.path)
            log.warning("%s: database is locked%s", self.path, f"; {holders}" if holders else "")

    def _column_types(self, conn: sqlite3.Connection, table: str) -> dict[str, str]:
        if table not in self._types:
            found = {row[1]: str(row[2]).upper() for row in conn.execute(f"PRAGMA table_info({table})")}
            if not found:  # as the Core writes fail on a database without CoopLab's tables
                raise sqlite3.OperationalError(f"no such table: {table}")
            self._types[table] = found
        return self._types[table]

    def _row(self, conn: Any, table: str, where: str, value: Any) -> SimpleNamespace | None:
        self._column_types(conn, table)  # read before the row: a missing table is SQLite's own error
        return super()._row(conn, table, where, value)

    def _from_db(self, table: str, name: str, value: Any) -> Any:
        return _from_db(self._types[table].get(name, ""), value)

    def _to_db(self, value: Any) -> Any:
        return _to_db(value)

    def _insert(self, conn: Any, table: str, values: Mapping[str, Any]) -> int:
        names = list(values)
        cursor = conn.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                              [_to_db(values[name]) for name in names])
        assert cursor.lastrowid is not None
        return int(cursor.lastrowid)

    def _schema_changed(self) -> None:
        self._types.clear()


__all__ = ["SqliteRunWrites", "plain_sqlite_file"]
