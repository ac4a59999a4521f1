"""A store in a folder: the local data directory (files stay in place) or a shared filesystem.

Everyone who can write the shared folder can plant things in it, so the folder is confined to its
root: every path below the root is walked one folder at a time from open folder descriptors with
``O_NOFOLLOW``, files are opened with ``O_NOFOLLOW`` too, and a listing never enters a linked folder
nor reports a linked file. A symbolic link met on the way to an object raises ``StoreRefused`` naming
it: a link planted at ``runs/run-5/checkpoints/checkpoint-2`` can neither receive a checkpoint nor
have its target's files deleted by pruning. Only the root itself may be a link (the operator's
``COOPLAB_ARTIFACTS_URL`` names it). The local data directory (``in_place``, no
``COOPLAB_ARTIFACTS_URL``) is this machine's own and nobody else writes it, so there links an operator
made (``runs`` on a bigger disk) are followed.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from jobs.artifacts.backend import ObjectInfo
from jobs.artifacts.errors import StoreRefused

_TRANSIENT_ERRNOS = frozenset({errno.EIO, errno.ESTALE, errno.ETIMEDOUT, errno.EAGAIN, errno.EINTR})
_COPY = 1 << 20
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class FolderBackend:
    """Objects as files under ``root``. ``in_place``: the root is this machine's data directory, so a
    folder already at its key is not copied and downloads are not needed."""

    def __init__(self, root: Path, url: str, *, in_place: bool = False) -> None:
        self.root, self.url, self.in_place = Path(root), url, in_place
        follow = os.O_NOFOLLOW if in_place else 0  # the flag cleared from the masks where links are followed
        self._dir_flags, self._read_flags = _DIR & ~follow, _READ & ~follow

    # ------------------------------------------------------------------ confined paths

    def _parts(self, key: str) -> list[str]:
        parts = key.split("/")
        if any(part in ("", ".", "..") or "\0" in part for part in parts):
            raise ValueError(f"artifact key {key!r} is not a relative path inside the store")
        return parts

    def _link(self, parts: list[str], at: int, folder: int | None = None) -> OSError | StoreRefused:
        """The error for ``parts[at]`` (in the open ``folder``), which could not be opened as a folder
        without following links: a link is refused, a plain file is ``NotADirectoryError``."""
        where = self.root.joinpath(*parts[: at + 1])
        if folder is not None:
            try:
                is_link = stat.S_ISLNK(os.stat(parts[at], dir_fd=folder, follow_symlinks=False).st_mode)
            except OSError:
                is_link = False
            if not is_link:
                return NotADirectoryError(errno.ENOTDIR, "a file where the store needs a folder", str(where))
        return StoreRefused(
            f"artifact store {self.url}: {where} is a symbolic link; the store's folders hold no links (one "
            "planted there would send writes and deletes elsewhere): remove it")

    @contextmanager
    def _folder(self, parts: list[str], *, create: bool = False) -> Iterator[int | None]:
        """An open descriptor of the folder ``root/parts`` reached without following any link below
        the root; None when it does not exist (and ``create`` is false)."""
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            if not create:
                yield None
                return
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for at, name in enumerate(parts):
                try:
                    nxt = os.open(name, self._dir_flags, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        yield None
                        return
                    with suppress(FileExistsError):
                        os.mkdir(name, dir_fd=fd)
                    try:
                        nxt = os.open(name, self._dir_flags, dir_fd=fd)
                    except OSError as exc:
                        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                            raise self._link(parts, at, fd) from None
                        raise
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise self._link(parts, at, fd) from None
                    raise
                os.close(fd)
                fd = nxt
            yield fd
        finally:
            os.close(fd)

    @contextmanager
    def _open(self, key: str) -> Iterator[int | None]:
        """An open descriptor of the object ``key`` for reading, or None when there is none."""
        parts = self._parts(key)
        with self._folder(parts[:-1]) as folder:
            if folder is None:
                yield None
                return
            try:
                fd = os.open(parts[-1], self._read_flags, dir_fd=folder)
            except FileNotFoundError:
                yield None
                return
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise self._link(parts, len(parts) - 1) from None
                raise
            try:
                yield fd
            finally:
                os.close(fd)

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*self._parts(key))

    # ------------------------------------------------------------------ objects

    def put_file(self, local: Path, key: str) -> str | None:
        parts = self._parts(key)
        with self._folder(parts[:-1], create=True) as folder:
            assert folder is not None
            try:
                here = os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
            except FileNotFoundError:
                here = None
            if here is not None and stat.S_ISLNK(here.st_mode):
                if not self.in_place:
                    raise self._link(parts, len(parts) - 1)
                here = os.stat(parts[-1], dir_fd=folder)
            mine = os.stat(local)
            if here is not None and (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino):
                return None  # already in place (the local data directory)
            with open(local, "rb") as src:
                self._write(folder, parts[-1], lambda out: shutil.copyfileobj(src, out, _COPY))
            digest = hashlib.md5()
            with os.fdopen(os.open(parts[-1], self._read_flags, dir_fd=folder), "rb") as handle:  # what the disk holds
                while block := handle.read(_COPY):
                    digest.update(block)
            return digest.hexdigest()

    def put_bytes(self, key: str, data: bytes) -> None:
        parts = self._parts(key)
        with self._folder(parts[:-1], create=True) as folder:
            assert folder is not None
            self._write(folder, parts[-1], lambda out: out.write(data))

    @staticmethod
    def _write(folder: int, name: str, fill) -> None:
        """Write ``name`` in the open ``folder`` through a new temporary file renamed over it (a link
        in its place is replaced, never followed)."""
        tmp = f".tmp-{name}-{os.getpid()}"
        with suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=folder)
        try:
            with os.fdopen(os.open(tmp, _NEW, 0o666, dir_fd=folder), "wb") as out:
                fill(out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
        finally:
            with suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=folder)

    def get_bytes(self, key: str) -> bytes | None:
        with self._open(key) as fd:
            if fd is None:
                return None
            with os.fdopen(os.dup(fd), "rb") as handle:
                return handle.read()

    def head(self, key: str) -> ObjectInfo | None:
        parts = self._parts(key)
        with self._folder(parts[:-1]) as folder:
            if folder is None:
                return None
            try:
                info = os.stat(parts[-1], dir_fd=folder, follow_symlinks=self.in_place)
            except FileNotFoundError:
                return None
        if stat.S_ISLNK(info.st_mode):
            raise self._link(parts, len(parts) - 1)
        return ObjectInfo(key, info.st_size, None) if stat.S_ISREG(info.st_mode) else None

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        base, _, _start = prefix.rpartition("/")
        parts = self._parts(base) if base else []
        with self._folder(parts) as folder:
            if folder is None:
                return
            for current, dirs, files, current_fd in os.fwalk(".", dir_fd=folder, follow_symlinks=self.in_place):
                dirs.sort()
                rel = current[2:] if current.startswith("./") else ""
                for name in sorted(files):
                    if name.startswith(".tmp-"):
                        continue
                    try:
                        info = os.stat(name, dir_fd=current_fd, follow_symlinks=self.in_place)
                    except FileNotFoundError:  # a dangling link, or deleted meanwhile
                        continue
                    if not stat.S_ISREG(info.st_mode):  # links and devices are no objects
                        continue
                    key = "/".join(p for p in (base, rel, name) if p)
                    if key.startswith(prefix):
                        yield ObjectInfo(key, info.st_size, None)

    def download(self, key: str, dest: Path) -> None:
        with self._open(key) as fd:
            if fd is None:
                raise FileNotFoundError(f"{self._path(key)} does not exist")
            with os.fdopen(os.dup(fd), "rb") as src, os.fdopen(os.open(dest, _NEW, 0o666), "wb") as out:
                shutil.copyfileobj(src, out, _COPY)

    def stream(self, key: str, chunk_size: int) -> Iterator[bytes]:
        with self._open(key) as fd:
            if fd is None:
                raise FileNotFoundError(f"{self._path(key)} does not exist")
            with os.fdopen(os.dup(fd), "rb") as handle:
                while block := handle.read(chunk_size):
                    yield block

    def delete(self, keys: list[str]) -> None:
        for key in keys:
            parts = self._parts(key)
            with self._folder(parts[:-1]) as folder:
                if folder is not None:
                    with suppress(FileNotFoundError):  # a link is removed itself, never followed
                        os.unlink(parts[-1], dir_fd=folder)
        for key in keys:  # drop the folders left empty, up to the root
            parts = self._parts(key)
            for depth in range(len(parts) - 1, 0, -1):
                with self._folder(parts[: depth - 1]) as folder:
                    if folder is None:
                        continue
                    try:
                        os.rmdir(parts[depth - 1], dir_fd=folder)
                    except OSError:  # not empty, gone, or not a folder
                        break

    # ------------------------------------------------------------------ the store as a whole

    def local_path(self, key: str) -> Path | None:
        return self._path(key) if self.in_place else None

    def free_bytes(self) -> int | None:
        folder = self.root
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        return shutil.disk_usage(folder).free

    def check(self, *, create_bucket: bool) -> None:
        if not self.root.is_dir():
            if not (create_bucket or self.in_place):
                raise StoreRefused(
                    f"artifact store {self.url}: the folder {self.root} does not exist (create it, "
                    "or set COOPLAB_ARTIFACTS_CREATE_BUCKET=true)"
                )
            self.root.mkdir(parents=True, exist_ok=True)
        probe = self.root / f".probe-{os.getpid()}"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise StoreRefused(
                f"artifact store {self.url}: cannot write to {self.root} ({exc.strerror})"
            ) from exc

    def transient(self, exc: BaseException) -> bool:
        return isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS

    def refusal(self, exc: BaseException) -> Exception | None:
        return None
