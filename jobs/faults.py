"""One-line reasons for the faults an operator must act on: a full disk, a quota, permissions.

A run that fails because a write hit ``ENOSPC``, ``EDQUOT`` or ``EACCES`` stores a first line that
names what happened, the path and the space left, e.g. ``no space left on device writing
/data/runs/run-3/checkpoints/checkpoint-2 (0 B free of 5.0 MiB on /data)``, instead of the bare
library error (torch's ``unexpected pos ...``, SQLite's ``database or disk is full``). The traceback
follows after a blank line. Torch-free and Celery-free.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import traceback
from collections.abc import Iterator
from pathlib import Path

from engine.schema.folders import human_bytes

FILESYSTEM_ERRNOS: dict[int, str] = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
}
_NEARLY_FULL_BYTES = 1 << 20
_WRITE_FAILURE = re.compile(r"unexpected pos|file write failed|iostream error|StorageFull|No space left|"
                            r"Disk quota exceeded|\(os error (\d+)\)")
_SQLITE_FULL = "database or disk is full"
_SQLITE_READONLY = "attempt to write a readonly database"


def mount_point(path: str | Path) -> Path:
    """The mount point of the filesystem holding ``path`` (or its nearest existing parent)."""
    current = Path(path).absolute()
    while not current.exists() and current != current.parent:
        current = current.parent
    while not os.path.ismount(current) and current != current.parent:
        current = current.parent
    return current


def space_note(path: str | Path) -> str:
    """``0 B free of 5.0 MiB on /data`` for the filesystem holding ``path`` ('' when unknown)."""
    try:
        where = mount_point(path)
        usage = shutil.disk_usage(where)
    except OSError:
        return ""
    return f"{human_bytes(usage.free)} free of {human_bytes(usage.total)} on {where}"


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or during, each once, outermost first."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def sqlite_path(database_url: str | None) -> str | None:
    """The file of a ``sqlite:///`` URL, else None."""
    if not database_url or not database_url.startswith("sqlite:///"):
        return None
    path = database_url[len("sqlite:///"):].split("?", 1)[0]
    return path or None


_SQLITE_VAGUE = ("disk I/O error", "unable to open database file")
"""What SQLite says when its file cannot be written for a reason it does not name."""


def sqlite_file_cause(path: str | Path) -> str | None:
    """Why the SQLite file at ``path`` (or its -wal/-shm files) cannot be written, read from its
    filesystem: read-only, full, or its folder gone; None when none of these holds."""
    folder = Path(path).parent
    try:
        found = os.statvfs(folder)
    except FileNotFoundError:
        return f"the folder {folder} is gone"
    except OSError:
        return None
    if found.f_flag & os.ST_RDONLY:
        return FILESYSTEM_ERRNOS[errno.EROFS]
    if found.f_bavail * found.f_frsize < _NEARLY_FULL_BYTES:
        return FILESYSTEM_ERRNOS[errno.ENOSPC]
    if not os.access(folder, os.W_OK) or (Path(path).exists() and not os.access(path, os.W_OK)):
        return "permission denied (read-only)"
    return None


def resource_reason(exc: BaseException, *, output_path: str | Path | None = None,
                    database_url: str | None = None) -> str | None:
    """A one-line reason when ``exc`` (or an exception it came from) is a filesystem fault, else None.

    ``output_path`` is named when the error does not say which file it was writing (torch, safetensors);
    ``database_url`` when SQLite reports its disk full or the file read-only."""
    for error in exception_chain(exc):
        if getattr(error, "free_bytes", None) is not None and isinstance(error, OSError):
            return str(error)  # the engine's CheckpointWriteError: already one line, space measured at the failure
        if isinstance(error, OSError) and error.errno in FILESYSTEM_ERRNOS:
            path = error.filename or output_path
            return _line(FILESYSTEM_ERRNOS[error.errno], path)
        text = str(error)
        if _SQLITE_FULL in text or _SQLITE_READONLY in text:
            path = sqlite_path(database_url) or "the database"
            what = "no space left on device" if _SQLITE_FULL in text else "permission denied (read-only)"
            return _line(what, path, prefix="the database ")
        if any(words in text for words in _SQLITE_VAGUE):
            path = sqlite_path(database_url)
            cause = sqlite_file_cause(path) if path else None
            if cause is not None:
                return _line(cause, path, prefix="the database ")
        found = _WRITE_FAILURE.search(text)
        if found and output_path is not None:
            code = int(found.group(1)) if found.group(1) else None
            if code in FILESYSTEM_ERRNOS:
                return _line(FILESYSTEM_ERRNOS[code], output_path)
            if "quota" in text.lower():
                return _line(FILESYSTEM_ERRNOS[errno.EDQUOT], output_path)
            try:
                free = shutil.disk_usage(mount_point(output_path)).free
            except OSError:
                free = None
            if "No space left" in text or "StorageFull" in text or (free is not None and free < _NEARLY_FULL_BYTES):
                return _line(FILESYSTEM_ERRNOS[errno.ENOSPC], output_path)
    return None


def _line(what: str, path: str | Path | None, *, prefix: str = "") -> str:
    if path is None:
        return what
    note = space_note(path)
    return f"{what} writing {prefix}{path}" + (f" ({note})" if note else "")


def first_line(text: str) -> str:
    """The message's first non-empty line, whitespace folded (what a one-line error shows)."""
    for line in str(text).splitlines():
        if line.strip():
            return " ".join(line.split())
    return ""


def describe_failure(exc: BaseException, *, output_path: str | Path | None = None,
                     database_url: str | None = None) -> str:
    """What a failed run stores: a first line a person can act on (a filesystem reason when that is the
    cause, else ``Type: message``), then the full traceback after a blank line."""
    head = resource_reason(exc, output_path=output_path, database_url=database_url)
    if head is None:
        head = f"{type(exc).__name__}: {exc}"
    trace = "".join(traceback.format_exception(exc))
    return f"{head}\n\n{trace}"


_PERMANENT_DB_ERRORS = (_SQLITE_FULL, _SQLITE_READONLY, "no such table", "no such column", "disk I/O error",
                        "file is not a database", "UndefinedTable", "does not exist")


def transient_database_error(exc: BaseException) -> bool:
    """True when ``exc`` is a database error that waiting can cure: the server unreachable or
    restarting, a connection cut, a lock held too long. A full disk, a read-only or deleted file and a
    missing table are not (retrying would only hide them)."""
    from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

    if not isinstance(exc, DBAPIError):
        return False
    text = str(exc)
    if any(marker in text for marker in _PERMANENT_DB_ERRORS):
        return False
    return isinstance(exc, (OperationalError, InterfaceError)) or bool(exc.connection_invalidated)
