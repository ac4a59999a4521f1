"""The pieces behind uploads that survive pruning and store outages, without servers: the outage wait
(its pauses, its limit and what it says), the upload's own links to a checkpoint's files, an upload
whose folder the trainer removes mid-way, and the database notes the dashboard reads."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from jobs.artifacts.backend_fs import FolderBackend
from jobs.artifacts.errors import StoreUnavailable
from jobs.artifacts.outage import Abandoned, Outage, StoreOutage
from jobs.artifacts.staging import release, stage
from jobs.artifacts.store import ArtifactStore
from jobs.artifacts.uploads import CheckpointUploads


class Clock:
    def __init__(self) -> None:
        self.now, self.sleeps = 0.0, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _down(clock: Clock, times: int):
    calls = []

    def call() -> str:
        calls.append(clock.now)
        if len(calls) <= times:
            clock.now += 1.0  # the store's own tries take a second
            raise StoreUnavailable("s3://lab at http://s3:8333", "uploading x", 3, ConnectionRefusedError("refused"))
        return "stored"

    return call, calls


def test_an_outage_is_waited_through_and_noted_until_the_store_answers() -> None:
    clock, noted = Clock(), []
    outage = Outage("s3://lab at http://s3:8333", 60, noted=noted.append, clock=clock, sleep=clock.sleep)
    call, calls = _down(clock, 5)
    assert outage.call("storing checkpoint 3", call) == "stored"
    assert clock.sleeps == [0.5, 1.0, 2.0, 4.0, 5.0] and len(calls) == 6
    assert noted == ["artifact store s3://lab at http://s3:8333 failed uploading x after 3 tries: "
                     "ConnectionRefusedError: refused", None]
    assert outage.since is None and outage.longest_s == pytest.approx(16.5)  # from its first failure


def test_an_outage_longer_than_allowed_fails_naming_the_store_and_the_setting() -> None:
    clock = Clock()
    outage = Outage("s3://lab at http://s3:8333", 10, clock=clock, sleep=clock.sleep)
    call, _ = _down(clock, 100)
    with pytest.raises(StoreOutage) as failed:
        outage.call("storing checkpoint 3", call)
    assert str(failed.value) == (
        "the artifact store was unreachable for 11 s (COOPLAB_STORE_OUTAGE_S=10) while storing checkpoint 3: "
        "artifact store s3://lab at http://s3:8333 failed uploading x after 3 tries: ConnectionRefusedError: refused")
    assert clock.sleeps == [0.5, 1.0, 2.0, 3.5]  # the last pause ends when the limit does


def test_a_wait_is_abandoned_when_the_call_is_no_longer_needed() -> None:
    clock = Clock()
    outage = Outage("s3://lab", 60, clock=clock, sleep=clock.sleep)
    call, calls = _down(clock, 100)
    with pytest.raises(Abandoned):
        outage.call("storing checkpoint 3", call, abandon=lambda: len(calls) >= 2)
    assert len(calls) == 2


def _checkpoint(folder: Path, step: int) -> Path:
    (folder / "agent_0").mkdir(parents=True)
    (folder / "agent_0" / "model.safetensors").write_bytes(bytes([step]) * 50_000)
    (folder / "trainer_state.pt").write_bytes(b"state %d" % step)
    return folder


def test_the_uploads_links_survive_the_trainer_removing_its_folder(tmp_path: Path) -> None:
    folder = _checkpoint(tmp_path / "checkpoints" / "checkpoint-4", 4)
    staged = stage(folder)
    assert staged.parent == folder.parent and staged.name.startswith(".tmp-upload-")
    assert (staged / "agent_0" / "model.safetensors").stat().st_ino == (folder / "agent_0" / "model.safetensors").stat().st_ino
    shutil.rmtree(folder)  # the trainer prunes it
    assert (staged / "trainer_state.pt").read_bytes() == b"state 4"
    release(staged)
    assert not staged.exists()


def test_a_folder_removed_in_the_middle_of_its_upload_is_still_stored_whole(tmp_path: Path) -> None:
    """Before: ``CheckpointUploadFailed: ... FileNotFoundError: .../checkpoint-1/trainer_state.pt``."""
    store = ArtifactStore(FolderBackend(tmp_path / "store", f"file://{tmp_path / 'store'}"), tries=1)
    folder = _checkpoint(tmp_path / "run" / "checkpoints" / "checkpoint-1", 1)
    removed = []

    def trainer_prunes_it(entry) -> None:  # the trainer's rmtree, before it reports the prune
        if not removed:
            shutil.rmtree(folder)
            removed.append(entry.path)

    uploads = CheckpointUploads(store, 7, progress=trainer_prunes_it)
    stored = []
    uploads.submit(1, folder, stored=stored.append)
    uploads.finish()
    uploads.close()
    assert removed and stored == [f"{store.url}/runs/run-7/checkpoints/checkpoint-1"]
    assert store.verify("runs/run-7/checkpoints/checkpoint-1") == []
    assert list((tmp_path / "run" / "checkpoints").iterdir()) == []  # the upload's links are gone too


def test_store_outage_notes_keep_their_first_time_and_clear(store, experiment_id) -> None:
    a = store.create_run(experiment_id, {"name": "a"}, "cpu").id
    b = store.create_run(experiment_id, {"name": "b"}, "cpu").id
    store.note_store_outage(a, "first error")
    since = store.store_outages()[a].since
    store.note_store_outage(a, "second error")
    store.note_store_outage(b, "x" * 5000)
    notes = store.store_outages()
    assert notes[a].since == since and notes[a].problem == "second error" and len(notes[b].problem) == 1000
    assert list(store.store_outages([b])) == [b]
    store.note_store_outage(a, None)
    assert list(store.store_outages()) == [b] and store.database_id()
