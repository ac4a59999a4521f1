"""A SQLite database file is its owner's alone: the file 0600, a folder created for it 0700.

Used by :func:`db.engine.make_engine` and by the submit's SQLite writes (:mod:`db.sqlite_writes`),
which import no SQLAlchemy.
"""

from __future__ import annotations

import logging
import os
import stat
from contextlib import suppress
from pathlib import Path

log = logging.getLogger("db.engine")


def private_sqlite_files(path: Path) -> None:
    """Create ``path``'s folder (0700) and the empty database file (0600) when missing, so SQLite, which
    gives its ``-wal`` and ``-shm`` the database file's mode, never makes any of them readable by other
    users; take group and other access from those that exist, with one warning."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with suppress(FileExistsError, PermissionError):  # SQLite names an unwritable folder itself
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    tightened = []
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            mode = stat.S_IMODE(file.stat().st_mode)
            if mode & 0o077:
                file.chmod(mode & ~0o077)
                tightened.append(f"{file} ({mode:04o})")
        except FileNotFoundError:
            continue
        except PermissionError as exc:  # another user's file: say so, SQLite decides whether it opens
            log.warning("%s is readable by other users and cannot be made owner-only: %s", file, exc)
    if tightened:
        log.warning("SQLite files were readable by other users: %s; now owner-only (0600)", ", ".join(tightened))


__all__ = ["private_sqlite_files"]
