"""Writing folders and files so that a failure leaves nothing half-written behind.

:func:`atomic_folder` yields a temporary folder next to the final one and renames it into place
only when the block succeeds (an older folder of the same name is moved aside, replaced, then
removed); a failed write removes its temporary folder, so a full disk is not left full, and a
failure caused by the filesystem (no space, quota, permissions) becomes a :class:`WriteError` whose
one-line message names what was written, where, and the free space when it failed.
:func:`atomic_text` does the same for one text file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_FILESYSTEM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS})
_NEARLY_FULL_BYTES = 1 << 20
"""A write that fails without an errno (torch's zip writer reports only ``unexpected pos`` or
``file write failed``) is taken for a full disk when less than this is left."""


def human_bytes(n: int) -> str:
    """``0 B``, ``512 B``, ``5.0 MiB``, ``1.2 GiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


class WriteError(OSError):
    """A folder or file could not be written because of its filesystem; nothing of it was left behind.

    ``errno`` is the cause (``ENOSPC``, ``EDQUOT``, ``EACCES``, ...), ``path`` what was written,
    ``what`` its kind (``checkpoint``, ``model export``, ...),
    ``free_bytes``/``total_bytes`` the space of its filesystem when the write failed (None if unknown).
    ``str()`` is one line, e.g. ``no space left on device writing checkpoint /d/checkpoint-3 (0 B free
    of 5.0 MiB when the write failed)``."""

    def __init__(self, code: int, path: str | Path, free_bytes: int | None, total_bytes: int | None,
                 what: str = "checkpoint") -> None:
        super().__init__(code, os.strerror(code), str(path))
        self.path = str(path)
        self.what = what
        self.free_bytes = free_bytes
        self.total_bytes = total_bytes

    def __str__(self) -> str:
        space = ""
        if self.free_bytes is not None and self.total_bytes is not None:
            space = f" ({human_bytes(self.free_bytes)} free of {human_bytes(self.total_bytes)} when the write failed)"
        return f"{os.strerror(self.errno or 0).lower()} writing {self.what} {self.path}{space}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.errno, self.path, self.free_bytes, self.total_bytes, self.what))


def _errno_in_text(message: str) -> int | None:
    """The errno a library error quotes without being an OSError (safetensors: ``No space left on
    device (os error 28)``), when it is a filesystem one."""
    found = re.search(r"\(os error (\d+)\)", message)
    if found and int(found.group(1)) in _FILESYSTEM_ERRNOS:
        return int(found.group(1))
    for code in _FILESYSTEM_ERRNOS:
        if os.strerror(code) in message:
            return code
    return None


def write_error(exc: BaseException, final: Path, what: str) -> BaseException:
    """What a failed write raises: a :class:`WriteError` when the filesystem is the cause (an errno
    that says so, or no errno and a nearly full disk), else ``exc`` itself."""
    if not isinstance(exc, Exception):
        return exc  # KeyboardInterrupt, SystemExit: not a write failure
    free: int | None
    total: int | None
    try:
        usage = shutil.disk_usage(final.parent)
        free, total = usage.free, usage.total
    except OSError:
        free = total = None  # unknown
    code = exc.errno if isinstance(exc, OSError) else _errno_in_text(str(exc))
    if code in _FILESYSTEM_ERRNOS:
        return WriteError(code, final, free, total, what)
    if code is None and free is not None and free < _NEARLY_FULL_BYTES:
        return WriteError(errno.ENOSPC, final, free, total, what)
    return exc



CheckpointWriteError = WriteError  # the name the trainers and jobs have used


@contextlib.contextmanager
def atomic_folder(path: str | Path, what: str) -> Iterator[Path]:
    """A temporary folder to fill; renamed to ``path`` when the block succeeds (see the module doc)."""
    final = Path(path)
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        yield tmp
        if final.exists():  # an older folder of the same name: moved aside, replaced, then removed
            old = final.parent / f".old-{final.name}-{os.getpid()}"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
    except BaseException as exc:
        error = write_error(exc, final, what)  # the free space as it was when the write failed
        shutil.rmtree(tmp, ignore_errors=True)
        if error is exc:
            raise
        raise error from exc


def written_folder(path: str | Path, marker: str, what: str) -> Path:
    """A folder :func:`atomic_folder` wrote, opened to read back: ``FileNotFoundError`` naming the
    folder and the ``marker`` file it lacks when it is not ``what`` (e.g. ``"a checkpoint"``)."""
    folder = Path(path)
    if not (folder / marker).is_file():
        raise FileNotFoundError(f"{folder} is not {what} (no {marker}); pass a checkpoint-N folder")
    return folder


def atomic_text(path: str | Path, text: str, what: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed into place."""
    final = Path(path)
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, final)
    except BaseException as exc:
        error = write_error(exc, final, what)
        tmp.unlink(missing_ok=True)
        if error is exc:
            raise
        raise error from exc
