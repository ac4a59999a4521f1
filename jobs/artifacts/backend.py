"""What each kind of store (a folder, an S3 bucket) provides: objects under relative keys."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class ObjectInfo:
    """A stored object: its key (relative to the store), size, and the server's ETag (None for files)."""

    key: str
    size: int
    etag: str | None


class Backend(Protocol):
    """Object operations on one store; keys are relative, ``/``-separated paths."""

    url: str

    def put_file(self, local: Path, key: str) -> str | None:
        """Store a file; returns the MD5 of what was stored when the backend read it back, else None."""

    def put_bytes(self, key: str, data: bytes) -> None: ...

    def get_bytes(self, key: str) -> bytes | None:
        """The object's bytes, or None when there is none."""

    def head(self, key: str) -> ObjectInfo | None: ...

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object whose key starts with ``prefix`` (a folder prefix ends with ``/``)."""

    def download(self, key: str, dest: Path) -> None:
        """Write the object to ``dest`` (a new file)."""

    def stream(self, key: str, chunk_size: int) -> Iterator[bytes]: ...

    def delete(self, keys: list[str]) -> None: ...

    def local_path(self, key: str) -> Path | None:
        """Where the object already is on this machine (the local data directory), else None."""

    def free_bytes(self) -> int | None: ...

    def check(self, *, create_bucket: bool) -> None:
        """Refuse (``StoreRefused``) a store this process cannot use: wrong credentials, no bucket."""

    def transient(self, exc: BaseException) -> bool:
        """True for errors worth retrying (connection refused/reset, timeouts, 5xx)."""

    def refusal(self, exc: BaseException) -> Exception | None:
        """The ``StoreRefused`` an error means (credentials, bucket, permission), else None."""
