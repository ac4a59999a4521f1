"""The artifact store: folders (checkpoints, model exports) uploaded, checked, listed, downloaded, deleted.

A folder is stored under a key such as ``runs/run-3/checkpoints/checkpoint-40``: each file as one
object, then the folder's manifest (:class:`~jobs.artifacts.manifest.Manifest`) as its completion
marker under ``.complete/<key>.json``. The marker is written only after every object has been
checked against the manifest (size and ETag, or the MD5 read back from a filesystem), and deleted
first when a folder is deleted or stored again, so a folder with a marker is always whole and a
half-uploaded one is never offered. A download is written to a temporary folder next to its
destination, each file checked against the manifest (size and MD5), and renamed into place only
when all are right; a full disk is named and leaves nothing behind.

Every operation on the store is retried with exponential backoff on connection errors, timeouts and
server errors; the last failure raises :class:`StoreUnavailable` naming the store's URL and the cause.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from engine.schema.folders import WriteError, atomic_folder, human_bytes
from jobs.artifacts.backend import Backend, ObjectInfo
from jobs.artifacts.errors import (
    ArtifactStoreError,
    CacheFull,
    NotComplete,
    StoreUnavailable,
    TamperedMarker,
    VerificationFailed,
)
from jobs.artifacts.location import cache_path, join_key, normalise_key
from jobs.artifacts.manifest import FileEntry, Manifest, folder_manifest, newest_first, same_etag
from jobs.artifacts.marker_check import MAX_MARKER_BYTES, parse_marker
from jobs.artifacts.retry import with_retries
from jobs.artifacts.signing import sign

T = TypeVar("T")
MARKERS = ".complete"
DEFAULT_PART_SIZE = 16 << 20
_SPACE_MARGIN = 16 << 20
_READ = 1 << 20
Progress = Callable[[FileEntry], None]


class ArtifactStore:
    """Folders in one store (a :class:`~jobs.artifacts.backend.Backend`) behind one interface."""

    def __init__(
        self,
        backend: Backend,
        *,
        tries: int = 4,
        retry_base_s: float = 0.5,
        part_size: int = DEFAULT_PART_SIZE,
        host: str | None = None,
        signing_key: bytes | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.backend = backend
        self.signing_key = signing_key or None
        self.tries, self.retry_base_s, self.part_size = max(1, tries), retry_base_s, part_size
        self.host = host or os.uname().nodename
        self._sleep = sleep

    @property
    def url(self) -> str:
        return self.backend.url

    @property
    def in_data_dir(self) -> bool:
        """True for the embedded store: this machine's data directory itself (nothing is copied)."""
        return bool(getattr(self.backend, "in_place", False))

    @property
    def where(self) -> str:
        """The URL, with the server's endpoint where it is not AWS."""
        return getattr(self.backend, "where", self.backend.url)

    def _call(self, action: str, call: Callable[[], T]) -> T:
        try:
            return with_retries(
                call,
                tries=self.tries,
                base_s=self.retry_base_s,
                transient=self.backend.transient,
                give_up=lambda exc, n: StoreUnavailable(self.where, action, n, exc),
                sleep=self._sleep,
            )
        except ArtifactStoreError:
            raise
        except Exception as exc:
            refused = self.backend.refusal(exc)
            if refused is not None:
                raise refused from exc
            raise

    # ------------------------------------------------------------------ the store as a whole

    def check(self, *, create_bucket: bool = False) -> None:
        """At start-up: refuse (``StoreRefused``, one line) wrong credentials or a missing bucket, or
        create the bucket when ``create_bucket``; ``StoreUnavailable`` when it does not answer."""
        self._call("the start-up check", lambda: self.backend.check(create_bucket=create_bucket))

    def free_bytes(self) -> int | None:
        """Free space where the store reports it (a filesystem), else None (S3 reports none)."""
        return self._call("reading its free space", self.backend.free_bytes)

    # ------------------------------------------------------------------ folders

    def upload_folder(self, folder: str | Path, key: str, *, progress: Progress | None = None) -> Manifest:
        """Store ``folder`` under ``key``, check every object, then write the completion marker.
        ``progress`` is called after each file is sent. Raises ``VerificationFailed`` (no marker
        written) when a stored object differs from the file, ``StoreUnavailable`` after the retries."""
        folder, key = Path(folder), normalise_key(key)
        manifest = folder_manifest(folder, key, self.part_size, self.host)
        marker = _marker_key(key)
        self._call(f"removing the completion marker of {key}", lambda: self.backend.delete([marker]))
        problems: list[str] = []
        for entry in manifest.files:
            object_key = join_key(key, entry.path)
            stored = self._call(
                f"uploading {object_key}",
                lambda src=folder / entry.path, dst=object_key: self.backend.put_file(src, dst),
            )
            if stored is not None and stored != entry.md5:
                problems.append(f"{entry.path}: MD5 {stored} stored, {entry.md5} in the file")
            if progress is not None:
                progress(entry)
        problems += self._object_problems(manifest)
        if problems:
            raise VerificationFailed(self.where, key, problems)
        signature = sign(manifest.body(), self.signing_key) if self.signing_key else None
        self._call(
            f"writing the completion marker of {key}",
            lambda: self.backend.put_bytes(marker, manifest.to_json(signature)),
        )
        return manifest

    def manifest(self, key: str) -> Manifest | None:
        """The manifest of a complete folder, or None when ``key`` has no completion marker. The marker
        is checked before it is returned (:func:`~jobs.artifacts.marker_check.parse_marker`):
        ``TamperedMarker`` names it when it is not one the store writes."""
        key = normalise_key(key)
        marker = _marker_key(key)
        info = self._call(f"reading the completion marker of {key}", lambda: self.backend.head(marker))
        if info is None:
            return None
        if info.size > MAX_MARKER_BYTES:
            raise TamperedMarker(self.where, marker, f"it is {info.size} bytes, more than the "
                                 f"{MAX_MARKER_BYTES} a marker may be")
        data = self._call(f"reading the completion marker of {key}", lambda: self.backend.get_bytes(marker))
        if data is None:  # deleted meanwhile
            return None
        return parse_marker(data, key, signing_key=self.signing_key, where=self.where, marker_key=marker)

    def verify(self, key: str) -> list[str]:
        """What is wrong with a stored folder (missing objects, other sizes or ETags); empty when whole."""
        manifest = self.manifest(key)
        if manifest is None:
            return [f"{normalise_key(key)} has no completion marker"]
        return self._object_problems(manifest)

    def list_complete(self, parent: str) -> list[Manifest]:
        """The complete folders directly under ``parent`` (e.g. a run's ``checkpoints``), newest first."""
        prefix = join_key(MARKERS, normalise_key(parent)) + "/"
        markers = self._call(f"listing {parent}", lambda: list(self.backend.list(prefix)))
        found = []
        for info in markers:
            rest = info.key[len(prefix) :]
            if "/" in rest or not rest.endswith(".json"):
                continue
            manifest = self.manifest(join_key(parent, rest[: -len(".json")]))
            if manifest is not None:  # deleted meanwhile
                found.append(manifest)
        return newest_first(found)

    def newest_complete(self, parent: str) -> Manifest | None:
        """The newest complete folder under ``parent`` (the highest ``checkpoint-<step>``), or None."""
        complete = self.list_complete(parent)
        return complete[0] if complete else None

    def download_folder(self, key: str, dest: str | Path, *, progress: Progress | None = None) -> Path:
        """Download a complete folder to ``dest``, checking each file's size and MD5; an existing
        ``dest`` with the manifest's files and sizes is kept as it is (the cache)."""
        key, dest = normalise_key(key), Path(dest)
        manifest = self.manifest(key)
        if manifest is None:
            raise NotComplete(
                f"artifact store {self.where}: {key} is not complete (no completion marker): it was "
                "never completely uploaded, or is being deleted"
            )
        if dest.is_dir() and _holds(dest, manifest):
            return dest
        problems = self._object_problems(manifest)  # before a byte is written: sizes as the marker says
        if problems:
            raise VerificationFailed(self.where, key, problems)
        self._ensure_space(dest, manifest)
        source = f"{self.url}/{key}"
        try:
            with atomic_folder(dest, f"download of {source} to") as tmp:
                for entry in manifest.files:
                    self._download_file(manifest, entry, _inside(tmp, entry.path))
                    if progress is not None:
                        progress(entry)
        except WriteError as exc:
            raise CacheFull(f"{exc}; nothing of it was kept") from exc
        return dest

    def fetch_newest(self, parent: str, cache_dir: str | Path) -> Path | None:
        """The newest complete folder under ``parent`` on this machine: where it already is (the local
        data directory), else downloaded into ``cache_dir/<key>``; None when there is none."""
        newest = self.newest_complete(parent)
        if newest is None:
            return None
        here = self.backend.local_path(newest.key)
        if here is not None:  # the local data directory: the folder itself, as the manifest says it is
            missing = [f"{e.path}: missing or resized" for e in newest.files if not _holds_file(here, e)]
            if missing:
                raise VerificationFailed(self.where, newest.key, missing)
            return here
        return self.download_folder(newest.key, cache_path(cache_dir, newest.key))

    def delete_folder(self, key: str) -> int:
        """Delete a folder: its completion marker first (it is offered no more), then the objects the
        marker lists, and only those; a folder without a marker (an upload that never finished) loses
        the objects stored under its key. A marker that fails its check (``TamperedMarker``) deletes
        nothing. Returns the number of objects deleted."""
        key = normalise_key(key)
        manifest = self.manifest(key)
        self._call(
            f"deleting the completion marker of {key}", lambda: self.backend.delete([_marker_key(key)])
        )
        if manifest is not None:
            keys = [join_key(key, entry.path) for entry in manifest.files]
        else:
            keys = [o.key for o in self._call(f"listing {key}", lambda: list(self.backend.list(key + "/")))]
        if keys:
            self._call(f"deleting {key}", lambda: self.backend.delete(keys))
        return len(keys)

    # ------------------------------------------------------------------ single objects

    def stat(self, key: str) -> ObjectInfo | None:
        """One object's size and ETag, or None when there is none."""
        key = normalise_key(key)
        return self._call(f"reading {key}", lambda: self.backend.head(key))

    def stream(self, key: str, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        """One object's bytes in chunks (for the dashboard's downloads); ``FileNotFoundError`` when
        there is none, ``StoreUnavailable`` when the store stops answering."""
        if self.stat(key) is None:
            raise FileNotFoundError(f"artifact store {self.where}: no object {key}")
        return self._chunks(normalise_key(key), chunk_size)

    def _chunks(self, key: str, chunk_size: int) -> Iterator[bytes]:
        try:
            yield from self.backend.stream(key, chunk_size)
        except Exception as exc:
            if self.backend.transient(exc):
                raise StoreUnavailable(self.where, f"streaming {key}", 1, exc) from exc
            raise

    # ------------------------------------------------------------------ helpers

    def _object_problems(self, manifest: Manifest) -> list[str]:
        stored = {
            o.key: o
            for o in self._call(
                f"listing {manifest.key}", lambda: list(self.backend.list(manifest.key + "/"))
            )
        }
        problems = []
        for entry in manifest.files:
            info = stored.get(join_key(manifest.key, entry.path))
            if info is None:
                problems.append(f"{entry.path}: missing")
            elif info.size != entry.size:
                problems.append(f"{entry.path}: {info.size} bytes stored, {entry.size} expected")
            elif info.etag is not None and not same_etag(entry.etag, info.etag):
                problems.append(
                    f"{entry.path}: ETag {info.etag.strip(chr(34))} stored, {entry.etag} expected"
                )
        return problems

    def _download_file(self, manifest: Manifest, entry: FileEntry, target: Path) -> None:
        object_key = join_key(manifest.key, entry.path)
        target.parent.mkdir(parents=True, exist_ok=True)

        def fetch() -> None:
            target.unlink(missing_ok=True)
            self.backend.download(object_key, target)

        self._call(f"downloading {object_key}", fetch)
        size, md5 = _size_and_md5(target)
        if size != entry.size or md5 != entry.md5:
            raise VerificationFailed(
                self.where,
                manifest.key,
                [
                    f"{entry.path}: downloaded {size} bytes with MD5 {md5}, expected {entry.size} bytes "
                    f"with {entry.md5}"
                ],
            )

    def _ensure_space(self, dest: Path, manifest: Manifest) -> None:
        parent = dest.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        free = shutil.disk_usage(parent).free
        need = manifest.total_bytes + _SPACE_MARGIN
        if need > free:
            raise CacheFull(
                f"not enough space to download {self.url}/{manifest.key} to {dest}: it needs "
                f"{human_bytes(need)} with a margin, {human_bytes(free)} free on {parent}; "
                "nothing was written"
            )


def _marker_key(key: str) -> str:
    return join_key(MARKERS, key) + ".json"


def _inside(folder: Path, path: str) -> Path:
    """Where file ``path`` of a checked manifest goes in the fresh download folder ``folder``: refused
    (``ValueError``) unless it resolves inside it, a last guard behind the marker's own check."""
    target = folder.joinpath(*path.split("/"))
    real_folder = os.path.realpath(folder)
    if os.path.commonpath([real_folder, os.path.realpath(target)]) != real_folder or target == folder:
        raise ValueError(f"{path!r} is not a file inside {folder}")
    return target


def _size_and_md5(path: Path) -> tuple[int, str]:
    digest = hashlib.md5()
    size = 0
    with open(path, "rb") as handle:
        while block := handle.read(_READ):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


def _holds_file(folder: Path, entry: FileEntry) -> bool:
    path = folder / entry.path
    return path.is_file() and path.stat().st_size == entry.size


def _holds(folder: Path, manifest: Manifest) -> bool:
    """True when ``folder`` has every file of the manifest with its size (a finished download)."""
    return all(_holds_file(folder, e) for e in manifest.files)
