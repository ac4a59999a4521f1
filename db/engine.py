"""Engines and sessions from a database URL.

SQLite is set up for one writer per run and many readers: WAL journal, foreign keys on, a busy
timeout, and write transactions that start with ``BEGIN IMMEDIATE`` so a writer waits for the write
lock up front instead of failing halfway through (a deferred transaction that reads first and then
writes cannot wait for the lock; SQLite answers "database is locked" at once). Readers use plain
deferred transactions and never block the writer. Other URLs (PostgreSQL) get a pre-pinged pool.

Write transactions are short and bounded (the bounds are declared in :mod:`db.write_bounds`). On
PostgreSQL each one sets, for itself only (``set_config(..., true)``): ``lock_timeout``
(:data:`WRITE_LOCK_TIMEOUT_S`: a write that waits longer for a row lock fails with a transient error its
caller retries, instead of hanging its thread),
``statement_timeout`` (:data:`WRITE_STATEMENT_TIMEOUT_S`) and ``idle_in_transaction_session_timeout``
(:data:`WRITE_IDLE_TIMEOUT_S`: a process hung or stopped inside a write transaction has its session
ended by the server, which releases its locks; no CoopLab write transaction waits on its client that
long). Readers are left unbounded (an export streams for as long as it takes) and are never blocked by
a writer's lock (MVCC). On SQLite a writer waits for the write lock at most
:data:`SQLITE_BUSY_TIMEOUT_MS`.

A SQLite database file is its owner's alone (0600; SQLite gives its ``-wal`` and ``-shm`` the mode of
the database file), and so is a folder created for it (0700); an existing database file that other
users can read is tightened when an engine is made for it, with a warning.
"""

from __future__ import annotations

import copy
import importlib.util
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import StaticPool

from db.sqlite_files import private_sqlite_files as _private_sqlite_files
from db.sqlite_locks import describe_write_lock_holders
from db.urls import redact_url
from db.write_bounds import (  # noqa: F401 - re-exported: the engine's bounds
    BOUND_WRITE,
    CONNECT_TIMEOUT_S,
    SQLITE_BUSY_TIMEOUT_MS,
    WRITE_IDLE_TIMEOUT_S,
    WRITE_LOCK_TIMEOUT_S,
    WRITE_STATEMENT_TIMEOUT_S,
)

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

log = logging.getLogger(__name__)

_WRITE_OPTION = "cooplab_write"
_LOCK_WAIT_OPTION = "cooplab_lock_wait_ms"
_UNBOUNDED_OPTION = "cooplab_unbounded"


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


def make_engine(url: str, *, echo: bool = False, busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS,
                connect_timeout_s: int = CONNECT_TIMEOUT_S) -> Engine:
    """Create an engine for ``url`` (``sqlite:///file.db``, ``sqlite://`` in memory, ``postgresql://...``).

    For a SQLite file the parent folder is created, and the file, owner-only
    (:func:`_private_sqlite_files`). A PostgreSQL connection gives up after ``connect_timeout_s``
    (at least 2, libpq's minimum) unless the URL sets ``connect_timeout``. Raises ``ValueError`` naming
    the URL when it is not a database URL.
    """
    parsed = resolve_url(url)
    if parsed.get_backend_name() != "sqlite":
        connect_args: dict[str, Any] = {}
        if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
            connect_args["connect_timeout"] = max(2, int(connect_timeout_s))
        engine = create_engine(parsed, echo=echo, pool_pre_ping=True, future=True, connect_args=connect_args)
        if engine.dialect.name == "postgresql":
            _bound_postgresql_writes(engine)
        return engine

    database = parsed.database or ""
    in_memory = database in ("", ":memory:") or database.startswith("file::memory:")
    kwargs: dict[str, Any] = {"echo": echo, "future": True}
    if in_memory:
        # One shared connection, or every checkout would see its own empty database.
        kwargs.update(poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        _private_sqlite_files(Path(database).expanduser())
        kwargs.update(connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000})
    engine = create_engine(parsed, **kwargs)
    _configure_sqlite(engine, in_memory=in_memory, busy_timeout_ms=busy_timeout_ms)
    if not in_memory:
        _name_lock_holders(engine, Path(database).expanduser())
    return engine


def _name_lock_holders(engine: Engine, path: Path) -> None:
    """Log which process holds the write lock when a statement on ``path`` fails with "database is
    locked" (see :mod:`db.sqlite_locks`), so a lock held too long points at its holder."""
    @event.listens_for(engine, "handle_error")
    def _on_error(context: Any) -> None:
        if "database is locked" in str(context.original_exception):
            holders = describe_write_lock_holders(path)
            log.warning("%s: database is locked%s", path, f"; {holders}" if holders else "")


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
        options = conn.get_execution_options()
        write = options.get(_WRITE_OPTION, False)
        if write:  # this transaction's wait for the write lock: its own bound, else the engine's
            conn.exec_driver_sql(f"PRAGMA busy_timeout={int(options.get(_LOCK_WAIT_OPTION, busy_timeout_ms))}")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _bound_postgresql_writes(engine: Engine) -> None:
    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        options = conn.get_execution_options()
        if options.get(_WRITE_OPTION, False) and not options.get(_UNBOUNDED_OPTION, False):
            conn.exec_driver_sql(BOUND_WRITE)  # local to this transaction (see the module docstring)
            if _LOCK_WAIT_OPTION in options:
                conn.exec_driver_sql(f"SELECT set_config('lock_timeout', '{int(options[_LOCK_WAIT_OPTION])}ms', true)")


def writer(engine: Engine, *, lock_wait_s: float | None = None, bounded: bool = True) -> Engine:
    """A view of ``engine`` whose transactions take SQLite's write lock at BEGIN (same pool). With
    ``lock_wait_s`` a transaction waits at most that long for a lock (SQLite's write lock, a
    PostgreSQL row lock), then fails with "database is locked" / ``LockNotAvailable``.
    ``bounded=False`` drops PostgreSQL's write timeouts (a migration may run for minutes)."""
    options: dict[str, Any] = {_WRITE_OPTION: True, _UNBOUNDED_OPTION: not bounded}
    if lock_wait_s is not None:
        if lock_wait_s <= 0:
            raise ValueError(f"lock_wait_s must be > 0 seconds, got {lock_wait_s}")
        options[_LOCK_WAIT_OPTION] = max(1, int(lock_wait_s * 1000))
    return engine.execution_options(**options)


@contextmanager
def write_session(engine: Engine, *, lock_wait_s: float | None = None) -> Iterator[Session]:
    """One write transaction: commits when the block ends, rolls back if it raises. ``lock_wait_s``
    bounds its wait for a lock (see :func:`writer`)."""
    # imported here: what only writes Core tables (cooplab submit, db.run_writes) never imports the ORM
    from sqlalchemy.orm import Session

    with Session(writer(engine, lock_wait_s=lock_wait_s), expire_on_commit=False) as session, session.begin():
        yield session


@contextmanager
def write_connection(engine: Engine, *, lock_wait_s: float | None = None) -> Iterator[Connection]:
    """One write transaction on a Core connection, begun, bounded and ended as :func:`write_session`'s
    (what :mod:`db.run_writes` runs in outside a store)."""
    with writer(engine, lock_wait_s=lock_wait_s).begin() as conn:
        yield conn


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
    from sqlalchemy.orm import Session

    with Session(reader(engine), expire_on_commit=False) as session:
        try:
            yield session
        finally:
            session.rollback()


class StoreBase:
    """What every store class stands on: its ``engine`` and how its methods open their transaction.

    Each public method of a store is one operation and one transaction: it opens its session itself
    (``with self._write() as session:`` or ``with self._read() as session:``) and holds the operation's
    body. :meth:`within` runs the same methods inside a transaction the caller already holds, so several
    operations compose into one (a study's claim creates its runs under the study's row lock)."""

    engine: Engine
    _session: Session | None = None

    @contextmanager
    def _write(self, *, lock_wait_s: float | None = None) -> Iterator[Session]:
        """A write transaction (:func:`write_session`), or the caller's one when bound by :meth:`within`."""
        if self._session is not None:
            yield self._session
            return
        with write_session(self.engine, lock_wait_s=lock_wait_s) as session:
            yield session

    @contextmanager
    def _read(self) -> Iterator[Session]:
        """A read transaction (:func:`read_session`), or the caller's one when bound by :meth:`within`."""
        if self._session is not None:
            yield self._session
            return
        with read_session(self.engine) as session:
            yield session

    def within(self, session: Session) -> Self:
        """This store with every method running inside ``session``, an open transaction that the caller
        commits or rolls back (no method of the view begins, commits or bounds a transaction itself)."""
        view = copy.copy(self)
        view._session = session
        return view
