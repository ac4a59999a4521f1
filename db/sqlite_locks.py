"""Who holds a SQLite database's write lock (Linux): the processes behind "database is locked".

In WAL mode SQLite's write lock is a POSIX advisory lock on one byte of the ``-shm`` file
(``WAL_WRITE_LOCK``, byte 120), taken by the connection inside a write transaction. The kernel lists
every such lock in ``/proc/locks`` with the holder's pid and the file's device and inode, so a write
that waited out its busy timeout can name the process that kept the lock instead of leaving the
reader to guess. Elsewhere (no ``/proc/locks``, or a rollback-journal database) nothing is named.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

WAL_WRITE_LOCK_BYTE = 120
"""The ``-shm`` byte whose exclusive lock is SQLite's WAL write lock (``WALINDEX_LOCK_OFFSET + 0``)."""

PROC_LOCKS = Path("/proc/locks")


@dataclass(frozen=True)
class LockHolder:
    pid: int
    command: str  # the holder's command line, "" when it cannot be read


def parse_proc_locks(text: str, device: tuple[int, int], inode: int, byte: int) -> list[int]:
    """Pids holding a POSIX write lock over ``byte`` of the file (``device`` = (major, minor), ``inode``)
    in the text of ``/proc/locks``. Lines look like ``3: POSIX  ADVISORY  WRITE 4711 00:2a:1234 120 120``
    (a blocked request carries ``->`` and is not a holder; ``EOF`` ends a range that runs to the end)."""
    pids: list[int] = []
    for line in text.splitlines():
        fields = line.split()
        if "->" in fields or len(fields) < 8:
            continue
        kind, mode, pid, where, start, end = fields[1], fields[3], fields[4], fields[5], fields[6], fields[7]
        if kind != "POSIX" or mode != "WRITE":
            continue
        major, minor, ino = where.split(":")
        if (int(major, 16), int(minor, 16)) != device or int(ino) != inode:
            continue
        if int(start) <= byte and (end == "EOF" or byte <= int(end)):
            pids.append(int(pid))
    return pids


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)


def write_lock_holders(database: str | Path) -> list[LockHolder]:
    """The processes holding ``database``'s WAL write lock now; empty when none does, the database is
    not in WAL mode, or the system does not list its locks."""
    shm = Path(f"{database}-shm")
    try:
        info = shm.stat()
        text = PROC_LOCKS.read_text()
    except OSError:
        return []
    device = (os.major(info.st_dev), os.minor(info.st_dev))
    pids = parse_proc_locks(text, device, info.st_ino, WAL_WRITE_LOCK_BYTE)
    return [LockHolder(pid, _command(pid)) for pid in dict.fromkeys(pids)]


def describe_write_lock_holders(database: str | Path) -> str:
    """One clause for a log line or an error: ``"the write lock is held by pid 4711 (cooplab worker ...)"``,
    or "" when no holder can be named."""
    holders = write_lock_holders(database)
    if not holders:
        return ""
    named = ", ".join(f"pid {h.pid}" + (f" ({h.command[:300]})" if h.command else "") for h in holders)
    return f"the write lock is held by {named}"
