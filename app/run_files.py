"""A run's files as the dashboard offers them (checkpoint folders, exported models, the log): from this
machine's disk when they are here, else from the artifact store (``COOPLAB_ARTIFACTS_URL``), whichever
machine wrote them.

- A folder from the store is first downloaded into this machine's artifact cache
  (``<data dir>/artifact-cache/<key>``) by the store's checked download: every file's size and MD5
  against the folder's manifest, renamed into place only when all agree, a full disk named with
  nothing left behind. The zip is made from that checked copy, so a download is never half a
  folder; a folder already in the cache is used as it is.
- A log is streamed from the store and its size and MD5 are checked against its manifest before the
  last chunk goes out: a log that differs ends the download with an error (the browser reports it
  failed), never a short file.
- A store that does not answer raises :class:`~jobs.artifacts.ArtifactStoreError`, whose one line
  names the store's URL; the pages show it as a warning, the download route answers 503 with it.

No Streamlit here: ``app/components/stored_files.py`` draws these on the run page.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from db.records import Checkpoint
from engine.schema.folders import human_bytes
from jobs.artifacts import (
    FILE,
    LOCAL,
    S3,
    ArtifactStore,
    ArtifactStoreError,
    Manifest,
    open_store,
    parse_location,
)
from jobs.artifacts.errors import VerificationFailed
from jobs.artifacts.location import cache_path, export_key, join_key, logs_key, normalise_key
from jobs.settings import Settings

PAGE_TRIES = 2
PAGE_RETRY_BASE_S = 0.25
"""A page asks the store with fewer, quicker tries than a job, so a store that is down costs a page
about a quarter of a second before it says so."""

def open_artifacts(settings: Settings, *, for_page: bool = False) -> ArtifactStore:
    """The artifact store the settings name; ``for_page``: with :data:`PAGE_TRIES` tries. Opening
    contacts no server; a bad ``COOPLAB_ARTIFACTS_URL`` raises ``ArtifactStoreError`` naming it."""
    if for_page:
        settings = settings.model_copy(update={
            "artifacts_tries": min(settings.artifacts_tries, PAGE_TRIES),
            "artifacts_retry_base_s": min(settings.artifacts_retry_base_s, PAGE_RETRY_BASE_S)})
    try:
        return open_store(settings)
    except ValueError as exc:
        raise ArtifactStoreError(str(exc)) from exc


def without_credentials(url: str) -> str:
    """``url`` with any ``user:password@`` taken out (an endpoint written with its keys)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def shown_where(store: ArtifactStore) -> str:
    """The store's URL (and its endpoint when it is not AWS), without credentials:
    ``s3://lab/cooplab at http://s3:8333``."""
    return " at ".join(without_credentials(part) for part in store.where.split(" at ", 1))


class Outages:
    """Stores that failed a page's question lately (by :func:`shown_where`), so the next sections and
    page draws within :attr:`hold_s` say so at once instead of each waiting for the store's timeouts
    again (a server that drops packets costs 5 s per try)."""

    def __init__(self, hold_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.hold_s, self._clock = hold_s, clock
        self._seen: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def failed(self, where: str, problem: str) -> None:
        with self._lock:
            self._seen[where] = (self._clock(), problem)

    def recent(self, where: str) -> str | None:
        """The problem ``where`` had within the last :attr:`hold_s` seconds, else None."""
        with self._lock:
            seen = self._seen.get(where)
            if seen is None or self._clock() - seen[0] > self.hold_s:
                self._seen.pop(where, None)
                return None
            return seen[1]

    def clear(self, where: str) -> None:
        with self._lock:
            self._seen.pop(where, None)


OUTAGES = Outages()


# ---- where a folder is


@dataclass(frozen=True)
class Place:
    """Where a folder the page offers is: ``local`` on this machine, else ``key`` in the artifact store;
    ``problem`` (one line) when it is in neither."""

    local: Path | None = None
    key: str | None = None
    problem: str | None = None


def key_in_store(artifact_url: str, store_url: str) -> str | None:
    """The key ``artifact_url`` (a checkpoint row's store URL of its folder) has in the store at
    ``store_url``, or None when it lies in another store."""
    root = store_url.rstrip("/") + "/"
    if not artifact_url.startswith(root):
        return None
    try:
        return normalise_key(artifact_url[len(root):])
    except ValueError:
        return None


def checkpoint_place(checkpoint: Checkpoint, store_url: str) -> Place:
    """Where a checkpoint's folder can be read from, asking no server: the row's folder when it is on
    this machine, else its ``artifact_url`` (set only once its upload was complete and checked) when it
    lies in this dashboard's store."""
    if Path(checkpoint.path).exists():
        return Place(local=Path(checkpoint.path))
    artifact_url = checkpoint.artifact_url
    if not artifact_url:
        return Place(problem="folder not on this machine (its run kept no copy in an artifact store)")
    key = key_in_store(artifact_url, store_url)
    if key is None:
        return Place(problem=f"stored at {artifact_url}, not in this dashboard's artifact store ({store_url}): set "
                             "COOPLAB_ARTIFACTS_URL where the dashboard runs to the workers' store")
    return Place(key=key)


# ---- folders and files from the store


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock(path: Path) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(str(path), threading.Lock())


def fetch_folder(store: ArtifactStore, key: str, cache_dir: Path) -> Path:
    """The store's folder ``key`` on this machine: downloaded into ``cache_dir/<key>``, every file
    checked, or the copy already there. Two downloads of one folder in this process wait for each
    other (the store's temporary folder is named by process)."""
    dest = cache_path(cache_dir, key)
    with _lock(dest):
        return store.download_folder(key, dest)


@dataclass(frozen=True)
class StoredFile:
    """One file of a complete folder in the store: its key, size and MD5 (from the folder's manifest)."""

    key: str
    size: int
    md5: str
    folder: Manifest

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]


def stored_log(store: ArtifactStore, run_id: int) -> StoredFile | None:
    """The run's log in the store (the folder ``runs/run-<id>/logs``: ``run-<id>.log``, else its first
    ``.log`` file), or None when the store holds no complete log folder of the run."""
    manifest = store.manifest(logs_key(run_id))
    if manifest is None:
        return None
    logs = [e for e in manifest.files if e.path.endswith(".log")] or list(manifest.files)
    if not logs:
        return None
    entry = next((e for e in logs if e.path.rsplit("/", 1)[-1] == f"run-{run_id}.log"), logs[0])
    return StoredFile(join_key(manifest.key, entry.path), entry.size, entry.md5, manifest)


def fetch_log(store: ArtifactStore, log: StoredFile, cache_dir: Path) -> Path:
    """The log's file on this machine, from a checked download of its folder (for the log tail)."""
    return fetch_folder(store, log.folder.key, cache_dir) / log.key[len(log.folder.key) + 1:]


def stream_checked(store: ArtifactStore, file: StoredFile, chunk_size: int = 1 << 16) -> Iterator[bytes]:
    """The file's bytes from the store in chunks. Asks the store at once (``StoreUnavailable``,
    ``FileNotFoundError`` before anything is sent); the last chunk is held back until the size and MD5
    agree with the manifest, else ``VerificationFailed`` ends the stream."""
    return _checked(store, file, store.stream(file.key, chunk_size))


def _checked(store: ArtifactStore, file: StoredFile, chunks: Iterator[bytes]) -> Iterator[bytes]:
    digest, size, held = hashlib.md5(), 0, None
    for chunk in chunks:
        if held is not None:
            yield held
        digest.update(chunk)
        size += len(chunk)
        held = chunk
        if size > file.size:  # more than the manifest says: stop reading at once
            raise VerificationFailed(store.where, file.key, [
                f"the stored object is longer than the {file.size} bytes its manifest gives"])
    if size != file.size or digest.hexdigest() != file.md5:
        raise VerificationFailed(store.where, file.key, [
            f"streamed {size} bytes with MD5 {digest.hexdigest()}, expected {file.size} bytes with {file.md5}"])
    if held is not None:
        yield held


def stored_exports(store: ArtifactStore, run_id: int) -> list[Manifest]:
    """The run's complete exports in the store (``runs/run-<id>/exports/``: ``model``, ``model_best``
    with one folder per agent inside, ``best_checkpoint``), by name."""
    return sorted(store.list_complete(export_key(run_id, "model").rsplit("/", 1)[0]), key=lambda m: m.key)


# ---- the store as the Workers page shows it


@dataclass(frozen=True)
class StoreLine:
    """The artifact store as this dashboard reaches it: its URL without credentials, its kind, its free
    space (None where the server reports none: S3) and the problem when it does not answer."""

    where: str
    kind: str
    free_bytes: int | None = None
    problem: str | None = None

    def free_text(self) -> str:
        if self.problem is not None:
            return "free space unknown"
        if self.free_bytes is None:
            return "free space not reported (an S3 server reports none)" if self.kind == S3 else \
                "free space not reported"
        return f"{human_bytes(self.free_bytes)} free"


def store_line(settings: Settings) -> StoreLine:
    """The store of the settings, asked once whether it answers (one small read, which also tries the
    credentials and the bucket) and how much space it has free."""
    try:
        location = parse_location(settings.artifacts_url, settings.data_dir)
    except ValueError as exc:
        return StoreLine(without_credentials(settings.artifacts_url), "unknown", problem=str(exc))
    kind = location.kind
    if kind == FILE and location.root is not None and not location.root.is_dir():
        return StoreLine(location.url, kind, problem=f"artifact store {location.url}: the folder {location.root} "
                         "does not exist on this machine (mount the shared filesystem there)")
    try:
        store = open_artifacts(settings, for_page=True)
    except ArtifactStoreError as exc:
        return StoreLine(without_credentials(settings.artifacts_url), kind, problem=str(exc))
    where = shown_where(store)
    try:
        store.manifest("runs")  # a marker no folder has: answers whether the store is there and lets us read
        line = StoreLine(where, kind, store.free_bytes())
    except ArtifactStoreError as exc:
        OUTAGES.failed(where, str(exc))
        return StoreLine(where, kind, problem=str(exc))
    OUTAGES.clear(where)  # it answers again: the run pages ask it again at once
    return line


def is_local(line: StoreLine) -> bool:
    """True when the store is this machine's data directory (``COOPLAB_ARTIFACTS_URL`` unset)."""
    return line.kind == LOCAL
