"""A store in a folder: the local data directory (files stay in place) or a shared filesystem."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from jobs.artifacts.backend import ObjectInfo
from jobs.artifacts.errors import StoreRefused

_TRANSIENT_ERRNOS = frozenset({errno.EIO, errno.ESTALE, errno.ETIMEDOUT, errno.EAGAIN, errno.EINTR})
_COPY = 1 << 20


class FolderBackend:
    """Objects as files under ``root``. ``in_place``: the root is this machine's data directory, so a
    folder already at its key is not copied and downloads are not needed."""

    def __init__(self, root: Path, url: str, *, in_place: bool = False) -> None:
        self.root, self.url, self.in_place = Path(root), url, in_place

    def _path(self, key: str) -> Path:
        return self.root / key

    def put_file(self, local: Path, key: str) -> str | None:
        dest = self._path(key)
        if dest.exists() and os.path.samefile(local, dest):
            return None  # already in place (the local data directory)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".tmp-{dest.name}-{os.getpid()}")
        try:
            shutil.copyfile(local, tmp)
            with open(tmp, "rb") as handle:
                os.fsync(handle.fileno())
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        digest = hashlib.md5()
        with open(dest, "rb") as handle:  # read back: what the filesystem holds now
            while block := handle.read(_COPY):
                digest.update(block)
        return digest.hexdigest()

    def put_bytes(self, key: str, data: bytes) -> None:
        dest = self._path(key)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".tmp-{dest.name}-{os.getpid()}")
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)

    def get_bytes(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None

    def head(self, key: str) -> ObjectInfo | None:
        path = self._path(key)
        return ObjectInfo(key, path.stat().st_size, None) if path.is_file() else None

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        base, _, start = prefix.rpartition("/")
        folder = self._path(base) if base else self.root
        if not folder.is_dir():
            return
        for current, dirs, files in os.walk(folder):
            dirs.sort()
            for name in sorted(files):
                if name.startswith(".tmp-"):
                    continue
                key = (Path(current) / name).relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    yield ObjectInfo(key, (Path(current) / name).stat().st_size, None)

    def download(self, key: str, dest: Path) -> None:
        with open(self._path(key), "rb") as src, open(dest, "xb") as out:
            shutil.copyfileobj(src, out, _COPY)

    def stream(self, key: str, chunk_size: int) -> Iterator[bytes]:
        with open(self._path(key), "rb") as handle:
            while block := handle.read(chunk_size):
                yield block

    def delete(self, keys: list[str]) -> None:
        for key in keys:
            self._path(key).unlink(missing_ok=True)
        for key in keys:  # drop the folders left empty, up to the root
            parent = self._path(key).parent
            while parent != self.root and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent

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
