"""A run's checkpoints stored in the background, in the order they were written.

Training writes each checkpoint to the local data directory at local speed and goes on; one thread of
the job process then uploads it to the artifact store (:meth:`ArtifactStore.upload_folder`: every
object checked, then the completion marker) and only then calls the checkpoint's ``stored`` callback,
which records the store URL on its row. A checkpoint the trainer prunes (``checkpoint_total_limit``)
is not uploaded when its turn has not come yet, an upload that fails because its folder was removed
under it is dropped (the folder was pruned), and the stored copy is deleted after any upload of it.

An upload that fails after the store's retries is kept as :class:`CheckpointUploadFailed` (naming the
checkpoint, the store and the cause): :meth:`CheckpointUploads.raise_if_failed` raises it at the run's
next step, and :meth:`CheckpointUploads.finish` at its end, so the run fails truthfully; nothing more
is uploaded after a failure. :meth:`CheckpointUploads.finish` waits for every pending upload: a run
ends only once its checkpoints are in the store.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.schema.folders import human_bytes
from jobs.artifacts.errors import ArtifactStoreError, describe
from jobs.artifacts.location import checkpoint_key
from jobs.artifacts.store import ArtifactStore, Progress

log = logging.getLogger(__name__)

Stored = Callable[[str], None]
"""Called with the store URL once a checkpoint's upload completed and was checked."""


class CheckpointUploadFailed(ArtifactStoreError):
    """A checkpoint could not be stored in the artifact store; the message names it, the store and why."""


@dataclass(frozen=True)
class _Upload:
    step: int
    folder: Path
    stored: Stored | None


@dataclass(frozen=True)
class _Delete:
    step: int


@dataclass(frozen=True)
class UploadTime:
    """How long one checkpoint's upload took (hashing, sending, checking, the marker)."""

    step: int
    size: int
    seconds: float


class CheckpointUploads:
    """Uploads the checkpoints of run ``run_id`` to ``store`` on a thread of its own, one at a time;
    ``progress`` is called after each file stored (:class:`jobs.artifacts.storing_marks.StoringMarks`)."""

    def __init__(self, store: ArtifactStore, run_id: int, *, progress: Progress | None = None) -> None:
        self.store, self.run_id, self.progress = store, int(run_id), progress
        self.times: list[UploadTime] = []
        self._jobs: queue.Queue[_Upload | _Delete | None] = queue.Queue()
        self._pruned: set[int] = set()
        self._error: CheckpointUploadFailed | None = None
        self._cancelled = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def key(self, step: int) -> str:
        return checkpoint_key(self.run_id, step)

    def url(self, step: int) -> str:
        """The store URL of the checkpoint at ``step``."""
        return f"{self.store.url}/{self.key(step)}"

    # ------------------------------------------------------------------ the training thread

    def submit(self, step: int, folder: str | Path, stored: Stored | None = None) -> None:
        """Upload the checkpoint folder written at ``step``; ``stored(url)`` once it is complete and checked."""
        self._pruned.discard(int(step))
        self._put(_Upload(int(step), Path(folder), stored))

    def prune(self, step: int) -> None:
        """The trainer removed the checkpoint at ``step``: skip its upload if it has not started, and
        delete its stored copy (after its upload, if one is under way)."""
        self._pruned.add(int(step))
        self._put(_Delete(int(step)))

    def raise_if_failed(self) -> None:
        """Raise the upload failure, if any (the run must fail with it)."""
        if self._error is not None:
            raise self._error

    def finish(self) -> None:
        """Wait for every pending upload and deletion; raise the upload failure, if any."""
        if self._thread is not None:
            self._jobs.join()
        self.raise_if_failed()

    def close(self) -> None:
        """Drop the uploads not started yet (a failed run), wait for the one under way, stop the thread."""
        self._cancelled = True
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            thread.join()

    # ------------------------------------------------------------------ the upload thread

    def _put(self, job: _Upload | _Delete) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=f"checkpoint-uploads-run-{self.run_id}",
                                                daemon=True)
                self._thread.start()
            self._jobs.put(job)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                if self._cancelled:
                    continue
                if isinstance(job, _Upload):
                    self._upload(job)
                else:
                    self._delete(job)
            finally:
                self._jobs.task_done()

    def _upload(self, job: _Upload) -> None:
        if self._error is not None or job.step in self._pruned:
            return
        key, started = self.key(job.step), time.monotonic()
        try:
            manifest = self.store.upload_folder(job.folder, key, progress=self.progress)
        except Exception as exc:
            if job.step in self._pruned or not job.folder.is_dir():  # pruned under the upload: its deletion follows
                log.info("run %s: checkpoint %s was removed while it was being uploaded (%s); not stored",
                         self.run_id, job.step, describe(exc))
                return
            self._fail(job.step, exc)
            return
        seconds = time.monotonic() - started
        self.times.append(UploadTime(job.step, manifest.total_bytes, seconds))
        url = self.url(job.step)
        if job.stored is not None:
            try:
                job.stored(url)
            except Exception as exc:
                self._error = CheckpointUploadFailed(
                    f"checkpoint {job.step} of run {self.run_id} was stored in {url}, but recording that "
                    f"failed: {describe(exc)}")
                self._error.__cause__ = exc
                log.error("run %s: %s", self.run_id, self._error)
                return
        log.info("run %s: checkpoint %s stored in %s (%s in %.1f s)", self.run_id, job.step, url,
                 human_bytes(manifest.total_bytes), seconds)

    def _fail(self, step: int, exc: Exception) -> None:
        detail = str(exc) if isinstance(exc, ArtifactStoreError) else describe(exc)
        self._error = CheckpointUploadFailed(
            f"checkpoint {step} of run {self.run_id} could not be stored in {self.url(step)}: {detail}")
        self._error.__cause__ = exc
        log.error("run %s: %s", self.run_id, self._error)

    def _delete(self, job: _Delete) -> None:
        try:
            removed = self.store.delete_folder(self.key(job.step))
        except Exception as exc:  # the row is gone already: an orphan copy is never offered for resume
            log.warning("run %s: the stored copy of pruned checkpoint %s (%s) could not be deleted: %s",
                        self.run_id, job.step, self.url(job.step), describe(exc))
            return
        if removed:
            log.info("run %s: pruned checkpoint %s deleted from %s", self.run_id, job.step, self.url(job.step))
