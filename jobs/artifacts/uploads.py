"""A run's checkpoints stored in the background, in the order they were written.

Training writes each checkpoint to the local data directory at local speed and goes on; one thread of
the job process then uploads it to the artifact store (:meth:`ArtifactStore.upload_folder`: every
object checked, then the completion marker) and only then calls the checkpoint's ``stored`` callback,
which records the store URL on its row.

**Pruning never reaches an upload.** :meth:`CheckpointUploads.submit` runs on the training thread
before the trainer may prune anything: it links the checkpoint's files into a folder of the upload's
own (:mod:`jobs.artifacts.staging`), which the upload reads and removes when it is done. The trainer
prunes its folders (``checkpoint_total_limit``) whenever it likes; the bytes of a checkpoint whose
upload is not done stay on the local disk. A pruned checkpoint whose upload has not started is
superseded by the newer ones and not uploaded; one under way is finished, and its stored copy is
deleted afterwards.

**An outage pauses the uploads, not the run** (:mod:`jobs.artifacts.outage`): an upload the store does
not answer is tried again while training goes on, for up to ``outage_s`` (``COOPLAB_STORE_OUTAGE_S``).
The checkpoints written meanwhile wait on the local disk; those pruned meanwhile are superseded, so
the disk holds at most ``checkpoint_total_limit`` + 1 of them however long the outage.

An upload that fails (the store refused it, its check failed, or the outage outlasted ``outage_s``) is
kept as :class:`CheckpointUploadFailed` (naming the checkpoint, the store and the cause):
:meth:`CheckpointUploads.raise_if_failed` raises it at the run's next step, and
:meth:`CheckpointUploads.finish` at its end, so the run fails truthfully; nothing more is uploaded
after a failure. :meth:`CheckpointUploads.finish` waits for every pending upload: a run ends only once
its checkpoints are in the store.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from engine.schema.folders import human_bytes
from jobs.artifacts.errors import ArtifactStoreError, describe
from jobs.artifacts.location import checkpoint_key
from jobs.artifacts.outage import Abandoned, Outage
from jobs.artifacts.staging import release, stage
from jobs.artifacts.store import ArtifactStore, Progress

log = logging.getLogger(__name__)

T = TypeVar("T")
Stored = Callable[[str], None]
"""Called with the store URL once a checkpoint's upload completed and was checked."""


class CheckpointUploadFailed(ArtifactStoreError):
    """A checkpoint could not be stored in the artifact store; the message names it, the store and why."""


@dataclass(frozen=True)
class _Upload:
    step: int
    folder: Path
    staged: Path
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
    ``progress`` is called after each file stored (:class:`jobs.artifacts.storing_marks.StoringMarks`).
    Uploads wait through an outage of up to ``outage_s`` seconds; ``noted(problem)`` is told when the
    store stops answering and ``noted(None)`` when it answers again (:class:`jobs.artifacts.outage.Outage`)."""

    def __init__(self, store: ArtifactStore, run_id: int, *, progress: Progress | None = None,
                 outage_s: float = 60.0, noted: Callable[[str | None], object] | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.store, self.run_id, self.progress = store, int(run_id), progress
        self.outage = Outage(store.where, outage_s, noted=noted, sleep=self._pause)
        self._sleep = sleep
        self.times: list[UploadTime] = []
        self._jobs: queue.Queue[_Upload | _Delete | None] = queue.Queue()
        self._pruned: set[int] = set()
        self._submitted = 0
        self._error: CheckpointUploadFailed | None = None
        self._cancelled = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def key(self, step: int) -> str:
        return checkpoint_key(self.run_id, step)

    def url(self, step: int) -> str:
        """The store URL of the checkpoint at ``step``."""
        return f"{self.store.url}/{self.key(step)}"

    # ------------------------------------------------------------------ the training thread

    def submit(self, step: int, folder: str | Path, stored: Stored | None = None) -> None:
        """Upload the checkpoint folder written at ``step``; ``stored(url)`` once it is complete and checked.
        Its files are linked for the upload here, before the trainer may prune the folder."""
        self._pruned.discard(int(step))
        self._submitted += 1
        self._put(_Upload(int(step), Path(folder), stage(folder, self._submitted), stored))

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

    def through_outage(self, what: str, call: Callable[[], T]) -> T:
        """``call()`` (another upload of the run's, e.g. its outputs at its end), tried again through an
        outage like the checkpoints; :class:`~jobs.artifacts.outage.StoreOutage` names the store after it."""
        return self.outage.call(what, call)

    def close(self) -> None:
        """Drop the uploads not started yet (a failed run), end the one under way (at once when it waits
        for the store), stop the thread and remove what was held for the uploads."""
        self._cancelled.set()
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

    def _pause(self, seconds: float) -> None:
        """A wait between tries that a closing job cuts short."""
        if self._sleep is time.sleep:
            self._cancelled.wait(seconds)
        else:
            self._sleep(seconds)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                if isinstance(job, _Upload):
                    try:
                        if not self._cancelled.is_set():
                            self._upload(job)
                    finally:
                        release(job.staged)
                elif not self._cancelled.is_set():
                    self._delete(job)
            finally:
                self._jobs.task_done()

    def _upload(self, job: _Upload) -> None:
        if self._error is not None or job.step in self._pruned:
            return
        key, started = self.key(job.step), time.monotonic()
        try:
            manifest = self.outage.call(
                f"storing checkpoint {job.step}",
                lambda: self.store.upload_folder(job.staged, key, progress=self.progress),
                abandon=lambda: job.step in self._pruned or self._cancelled.is_set())
        except Abandoned:
            if self._cancelled.is_set():
                return
            log.info("run %s: checkpoint %s was pruned while the store was unreachable; a newer one is stored "
                     "instead", self.run_id, job.step)
            return
        except Exception as exc:
            if job.step in self._pruned:  # pruned meanwhile: its deletion follows, nothing is lost
                log.info("run %s: checkpoint %s was pruned while it was being uploaded (%s); not stored",
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
            removed = self.outage.call(f"deleting pruned checkpoint {job.step}",
                                       lambda: self.store.delete_folder(self.key(job.step)),
                                       abandon=self._cancelled.is_set)
        except Exception as exc:  # the row is gone already: an orphan copy is never offered for resume
            log.warning("run %s: the stored copy of pruned checkpoint %s (%s) could not be deleted: %s",
                        self.run_id, job.step, self.url(job.step), describe(exc))
            return
        if removed:
            log.info("run %s: pruned checkpoint %s deleted from %s", self.run_id, job.step, self.url(job.step))
