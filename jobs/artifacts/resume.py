"""Which checkpoint folder a resumed attempt starts from, on whichever machine it runs.

Along the run's ``resumed_from`` chain (an attempt that saved no checkpoint passes on the one it
started from), the newest checkpoint row is taken. When its folder is on this machine, it is used
as it is. Otherwise, with an artifact store, the newest checkpoint of that attempt whose upload
completed and was checked (its row has an ``artifact_url``) is downloaded into this machine's cache
``<data dir>/artifact-cache/<key>`` (checked file by file, renamed into place only when whole, and
reused by the next attempt that needs it). A checkpoint whose upload never completed is never used.
"""

from __future__ import annotations

import logging
from pathlib import Path

from db.records import Checkpoint, Run
from db.store import Store
from jobs.artifacts.errors import ArtifactStoreError, NotComplete
from jobs.artifacts.location import cache_path, normalise_key
from jobs.artifacts.store import ArtifactStore

log = logging.getLogger(__name__)


def _chain_checkpoints(store: Store, run: Run) -> tuple[int, list[Checkpoint]] | None:
    """The first attempt along ``run``'s ``resumed_from`` chain that recorded checkpoints, with them."""
    seen: set[int] = set()
    source = run.resumed_from
    while source is not None and source not in seen:
        seen.add(source)
        rows = store.list_checkpoints(source)
        if rows:
            return source, rows
        source = store.get_run(source).resumed_from
    return None


def stored_key(artifacts: ArtifactStore, checkpoint: Checkpoint) -> str:
    """The key of a stored checkpoint in ``artifacts``; ``ArtifactStoreError`` when its URL is of
    another store (``COOPLAB_ARTIFACTS_URL`` changed since it was written)."""
    url = checkpoint.artifact_url or ""
    base = artifacts.url.rstrip("/") + "/"
    if not url.startswith(base):
        raise ArtifactStoreError(
            f"checkpoint {checkpoint.step} of run {checkpoint.run_id} is stored at {url}, outside this "
            f"worker's artifact store {artifacts.url}: set COOPLAB_ARTIFACTS_URL as on the worker that wrote it")
    try:
        return normalise_key(url[len(base):])
    except ValueError as exc:
        raise ArtifactStoreError(f"checkpoint {checkpoint.step} of run {checkpoint.run_id} is recorded at {url}, "
                                 f"which names no folder of the store ({exc})") from None


def resume_folder(store: Store, run: Run, artifacts: ArtifactStore | None, cache_dir: str | Path) -> str | None:
    """The checkpoint folder ``run`` resumes from on this machine (None for a first attempt; see the
    module doc). Raises ``FileNotFoundError`` naming the problem when there is no usable one,
    and the store's errors (``StoreUnavailable`` naming the store, ``CacheFull``) when a download fails."""
    if run.resumed_from is None:
        return None
    found = _chain_checkpoints(store, run)
    if found is None:
        raise FileNotFoundError(f"run {run.id} resumes run {run.resumed_from}, which recorded no checkpoint; "
                                "submit the config again to start over")
    source, rows = found
    newest = rows[-1]
    if Path(newest.path).exists():
        log.info("run %s resumes run %s from %s", run.id, source, newest.path)
        return newest.path
    if artifacts is None:
        raise FileNotFoundError(
            f"run {run.id} resumes from checkpoint {newest.path}, which is not on this machine (with the "
            "local artifact store checkpoints stay where they were written: set COOPLAB_ARTIFACTS_URL to a "
            "store every worker reaches, run resumed attempts on that machine's worker, or share the data "
            "directory)")
    stored = [row for row in reversed(rows) if row.artifact_url]
    for row in stored:
        key = stored_key(artifacts, row)
        try:
            path = artifacts.download_folder(key, cache_path(cache_dir, key))
        except NotComplete:  # deleted behind the database's back: an older one may still be whole
            log.warning("run %s: stored checkpoint %s is no longer complete; trying an older one", run.id,
                        row.artifact_url)
            continue
        if row is not newest:
            log.warning("run %s: the newest checkpoint of run %s (step %s) was never completely stored; "
                        "resuming from step %s", run.id, source, newest.step, row.step)
        log.info("run %s resumes run %s from %s (downloaded to %s)", run.id, source, row.artifact_url, path)
        return str(path)
    raise FileNotFoundError(
        f"run {run.id} resumes from checkpoint {newest.path}, which is not on this machine, and no checkpoint "
        f"of run {source} was completely stored in {artifacts.url} (its uploads failed or never finished): "
        "resume it on the machine that wrote it")
