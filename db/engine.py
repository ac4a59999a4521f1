"""Engines and sessions from a database URL.

SQLite is set up for one writer per run and many readers: WAL journal, foreign keys on, a busy
timeout, and write transactions that start with ``BEGIN IMMEDIATE`` so a writer waits for the write
lock up front instead of failing halfway through (a deferred transaction that reads first and then
writes cannot wait for the lock; SQLite answers "database is locked" at once). Readers use plain
deferred transactions and never block the writer. Other URLs (PostgreSQL) get a pre-pinged pool.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session
from sqlalchemy.pool import StaticPool

from db.urls import redact_url

SQLITE_BUSY_TIMEOUT_MS = 30_000
_WRITE_OPTION = "cooplab_write"


def resolve_url(url: str) -> URL:
    """Parse ``url``; a bare ``postgresql://`` gets whichever PostgreSQL driver is installed
    (psycopg 3, else psycopg2). Raises ``ValueError`` naming the URL when it is not a database URL."""
    try:
        parsed = make_url(url)
    except ArgumentError as err:
        raise ValueError(f"not a database URL: {redact_url(url)!r}; use e.g. sqlite:///path/to/cooplab.db or "
                         f"postgresql://user@host:5432/dbname") from err
    if parsed.drivername == "postgresql":
        for module, driver in (("psycopg", "postgresql+psycopg"), ("psycopg2", "postgresql+psycopg2")):
            if importlib.util.find_spec(module) is not None:
                return parsed.set(drivername=driver)
        raise ValueError(f"no PostgreSQL driver for {redact_url(url)!r}: "
                         "pip install psycopg2-binary (or cooplab[postgres])")
    return parsed


def make_engine(url: str, *, echo: bool = False, busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS) -> Engine:
    """Create an engine for ``url`` (``sqlite:///file.db``, ``sqlite://`` in memory, ``postgresql://...``).

    For a SQLite file the parent folder is created. Raises ``ValueError`` naming the URL when it is
    not a database URL.
    """
    parsed = resolve_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed, echo=echo, pool_pre_ping=True, future=True)

    database = parsed.database or ""
    in_memory = database in ("", ":memory:") or database.startswith("file::memory:")
    kwargs: dict[str, Any] = {"echo": echo, "future": True}
    if in_memory:
        # One shared connection, or every checkout would see its own empty database.
        kwargs.update(poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        kwargs.update(connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000})
    engine = create_engine(parsed, **kwargs)
    _configure_sqlite(engine, in_memory=in_memory, busy_timeout_ms=busy_timeout_ms)
    return engine


def _configure_sqlite(engine: Engine, *, in_memory: bool, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event decide how transactions start (see module docstring).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        if not in_memory:
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        write = conn.get_execution_options().get(_WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def writer(engine: Engine) -> Engine:
    """A view of ``engine`` whose transactions take SQLite's write lock at BEGIN (same pool)."""
    return engine.execution_options(**{_WRITE_OPTION: True})


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """One write transaction: commits when the block ends, rolls back if it raises."""
    with Session(writer(engine), expire_on_commit=False) as session, session.begin():
        yield session


def reader(engine: Engine) -> Engine:
    """A view of ``engine`` whose transactions read one snapshot: SQLite's deferred transactions do in
    WAL mode; PostgreSQL needs REPEATABLE READ (its default READ COMMITTED takes a new snapshot per
    statement, so a read made of several statements could see half of a step)."""
    if engine.dialect.name == "postgresql":
        return engine.execution_options(isolation_level="REPEATABLE READ")
    return engine


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """One read transaction (a consistent snapshot); anything written in it is rolled back."""
    with Session(reader(engine), expire_on_commit=False) as session:
        try:
            yield session
        finally:
            session.rollback()
