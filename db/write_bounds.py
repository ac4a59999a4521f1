"""How long a write transaction may wait or run: declared once for the engine (:mod:`db.engine`) and for
the submit's writers without SQLAlchemy (:mod:`db.sqlite_writes`, :mod:`db.postgres_writes`).

On PostgreSQL each write transaction sets, for itself only (``set_config(..., true)``, the statement
:data:`BOUND_WRITE`), ``lock_timeout``, ``statement_timeout`` and ``idle_in_transaction_session_timeout``
(see :mod:`db.engine`); on SQLite a writer waits for the write lock at most
:data:`SQLITE_BUSY_TIMEOUT_MS`.
"""

from __future__ import annotations

SQLITE_BUSY_TIMEOUT_MS = 30_000
WRITE_LOCK_TIMEOUT_S = 5
"""PostgreSQL: the longest a write waits for a lock another transaction holds."""
WRITE_STATEMENT_TIMEOUT_S = 300
"""PostgreSQL: the longest one statement of a write transaction may run (deleting a run of millions of
metric rows included)."""
WRITE_IDLE_TIMEOUT_S = 10
"""PostgreSQL: a write transaction idle this long (its process hung or stopped) is ended by the server.
Keep it below the heartbeat timeout, so a run whose job hung holding its row is reaped in time."""
CONNECT_TIMEOUT_S = 10
"""PostgreSQL: the longest opening a connection may take (libpq's ``connect_timeout``, unless the URL
sets one), so a database whose host drops packets fails in seconds instead of the system's TCP timeout
(minutes)."""

BOUND_WRITE = (f"SELECT set_config('lock_timeout', '{WRITE_LOCK_TIMEOUT_S}s', true), "
               f"set_config('statement_timeout', '{WRITE_STATEMENT_TIMEOUT_S}s', true), "
               f"set_config('idle_in_transaction_session_timeout', '{WRITE_IDLE_TIMEOUT_S}s', true)")
"""PostgreSQL: the first statement of a bounded write transaction."""

__all__ = ["BOUND_WRITE", "CONNECT_TIMEOUT_S", "SQLITE_BUSY_TIMEOUT_MS", "WRITE_IDLE_TIMEOUT_S",
           "WRITE_LOCK_TIMEOUT_S", "WRITE_STATEMENT_TIMEOUT_S"]
