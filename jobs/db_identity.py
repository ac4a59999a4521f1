"""Is the SQLite file a job writes to still the database at its path?

A SQLite database is a file. Deleted (or replaced by another file) while a job runs, the job's open
connections keep writing to the old, unlinked file: every step "succeeds", and all of it is lost when
the job ends, while every other process sees the new file (or none). :class:`DatabaseFile` records the
file's identity when the job starts (device and inode, and the database id it holds, see
:meth:`db.store.Store.database_id`) and :meth:`DatabaseFile.problem` says, in one line naming the file
and both ids, when the path no longer leads to it. The job checks it before each write and at each
heartbeat (:class:`jobs.db_sink.DbSink`) and fails the run with that line. PostgreSQL has no such file:
nothing is checked there.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from db.store import Store


class DatabaseFileGone(RuntimeError):
    """The job's SQLite database file was deleted or replaced; the message names it and the ids."""


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (None for another database, or SQLite in memory)."""
    parsed = make_url(url)
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database).expanduser().resolve()


def read_database_id(path: Path) -> str | None:
    """The database id stored in the SQLite file at ``path``, read-only (None when there is none)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)) as conn:
            row = conn.execute("SELECT value FROM cooplab_meta WHERE key = 'database_id'").fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row and row[0] else None


@dataclass(frozen=True)
class DatabaseFile:
    """The identity of the SQLite file a job opened: its path, device and inode, and database id."""

    path: Path
    device: int
    inode: int
    database_id: str

    @classmethod
    def of(cls, store: Store) -> DatabaseFile | None:
        """The identity of ``store``'s SQLite file now (None for PostgreSQL or an in-memory database)."""
        path = sqlite_path(store.url)
        if path is None:
            return None
        found = os.stat(path)
        return cls(path=path, device=found.st_dev, inode=found.st_ino, database_id=store.database_id())

    def problem(self) -> str | None:
        """None while ``path`` still leads to this file; else why not, in one line."""
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            return self._deleted("")
        if (found.st_dev, found.st_ino) == (self.device, self.inode):
            return None
        now = read_database_id(self.path)
        if now is None:  # a connection opened after the deletion created an empty file there
            return self._deleted(f" (an empty file, inode {found.st_ino}, has been created at its path since)")
        return (f"the database file {self.path} was replaced while the run trained: it is now another file "
                f"(inode {found.st_ino}, database id {now}), not the one the job opened (inode {self.inode}, "
                f"database id {self.database_id}); what the job wrote since is in the old file and is lost. "
                f"Put the old file back, or submit the run again")

    def _deleted(self, since: str) -> str:
        return (f"the database file {self.path} (database id {self.database_id}) was deleted while the run "
                f"trained{since}: what the job wrote since went to the deleted file and is lost. Restore the "
                f"file (with its -wal file) from a backup, or submit the run again")
