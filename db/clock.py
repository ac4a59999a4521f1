"""The database server's clock: the one clock every liveness time is written and judged with.

Heartbeats, stop requests, worker sightings and run creation times are compared across processes and
machines (a reaper on one machine judges a heartbeat written on another). Each process's own clock may
be off, so none of them is used: :class:`db_now` is the server's current time as a SQL expression
(PostgreSQL's ``statement_timestamp()`` in UTC; for SQLite, whose "server" is the file's machine,
``strftime('%f', 'now')``), written in the same statement as the value it stamps, and
:func:`server_now` reads it for a comparison made in Python (a cutoff, a grace period).

:func:`measure_skew` is how far this process's clock is from the server's, in seconds (positive: ahead);
each worker stores its own (``workers.clock_skew_s``), and the Workers page shows it.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

from db.tables import UTCDateTime, utcnow

if TYPE_CHECKING:
    from sqlalchemy import Connection
    from sqlalchemy.orm import Session


class db_now(FunctionElement[datetime]):  # noqa: N801 - reads like the SQL function it renders
    """The database server's current UTC time, as a naive UTC value like the stored ones."""

    type = UTCDateTime()
    inherit_cache = True
    name = "db_now"


@compiles(db_now)
def _default_now(element: db_now, compiler: Any, **kw: Any) -> str:
    return "CURRENT_TIMESTAMP"


@compiles(db_now, "postgresql")
def _postgresql_now(element: db_now, compiler: Any, **kw: Any) -> str:
    # The statement's start, not the transaction's (now()): a write that waited for a lock is stamped
    # when it ran.
    return "(statement_timestamp() AT TIME ZONE 'UTC')"


@compiles(db_now, "sqlite")
def _sqlite_now(element: db_now, compiler: Any, **kw: Any) -> str:
    # 'YYYY-MM-DD HH:MM:SS.SSS' + '000': the text form SQLAlchemy stores datetimes in (microseconds),
    # so stored times and this one compare as text in the right order.
    return "(strftime('%Y-%m-%d %H:%M:%f', 'now') || '000')"


def server_now(session: Session | Connection) -> datetime:
    """The database server's current time (timezone-aware UTC), read in ``session`` (an ORM session or
    a Core connection)."""
    found = session.scalar(select(db_now()))
    if found is None:  # pragma: no cover - every backend answers
        raise RuntimeError("the database did not tell its current time")
    return found


def measure_skew(session: Session) -> float:
    """Seconds this process's clock is ahead of the database server's (negative: behind), from one
    round trip: the server's time is taken to fall halfway through it."""
    before = utcnow()
    server = server_now(session)
    after = utcnow()
    return round(((before + (after - before) / 2) - server).total_seconds(), 3)
