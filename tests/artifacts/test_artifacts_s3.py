"""The artifact store on a real S3-compatible server (SeaweedFS): round trips, checks, the newest
complete checkpoint, deletes, and the faults (server stopped mid-upload and mid-download, wrong
credentials, a missing bucket, a full cache disk)."""

from __future__ import annotations

import time

import pytest

from jobs.artifacts import (
    CacheFull,
    NotComplete,
    StoreRefused,
    StoreUnavailable,
    VerificationFailed,
    check_store,
    open_store,
)
from jobs.artifacts.manifest import hash_file
from tests.artifacts.conftest import make_checkpoint, new_bucket, s3_client, same_tree
from tests.jobs.fault_helpers import small_filesystem

pytestmark = pytest.mark.integration
RUN = "runs/run-7/checkpoints"


def test_a_folder_round_trips_with_every_object_checked(s3_store, tmp_path):
    folder = make_checkpoint(tmp_path / "checkpoint-3", seed=3, big_bytes=12 << 20)  # 3 parts of 5 MiB
    manifest = s3_store.upload_folder(folder, f"{RUN}/checkpoint-3")

    assert [f.path for f in manifest.files] == [
        "agent_0/model.safetensors",
        "agent_0/optimizer.pt",
        "empty.txt",
        "trainer_state.json",
    ]
    assert manifest.files[0].etag.endswith("-3")  # the multipart ETag the server must report
    assert s3_store.verify(f"{RUN}/checkpoint-3") == []
    assert (
        s3_store.stat(f"{RUN}/checkpoint-3/agent_0/model.safetensors").etag.strip('"')
        == manifest.files[0].etag
    )
    assert [m.key for m in s3_store.list_complete(RUN)] == [f"{RUN}/checkpoint-3"]

    copy = s3_store.download_folder(f"{RUN}/checkpoint-3", tmp_path / "copy")
    assert same_tree(folder, copy)
    streamed = b"".join(s3_store.stream(f"{RUN}/checkpoint-3/trainer_state.json", chunk_size=4))
    assert streamed == (folder / "trainer_state.json").read_bytes()
    assert s3_store.free_bytes() is None  # the S3 API reports no free space


def test_an_object_changed_behind_the_store_fails_the_check_and_the_download(s3_server, s3_store, tmp_path):
    folder = make_checkpoint(tmp_path / "checkpoint-1", seed=1)
    s3_store.upload_folder(folder, f"{RUN}/checkpoint-1")
    bucket, prefix = s3_store.backend.bucket, s3_store.backend.prefix
    client = s3_client(s3_server)
    same_size = bytes(len((folder / "agent_0" / "optimizer.pt").read_bytes()))
    client.put_object(Bucket=bucket, Key=f"{prefix}/{RUN}/checkpoint-1/agent_0/optimizer.pt", Body=same_size)
    client.put_object(Bucket=bucket, Key=f"{prefix}/{RUN}/checkpoint-1/trainer_state.json", Body=b"{")

    problems = s3_store.verify(f"{RUN}/checkpoint-1")
    assert (
        problems[0].startswith("agent_0/optimizer.pt: ETag")
        and "trainer_state.json: 1 bytes stored" in problems[1]
    )
    with pytest.raises(VerificationFailed, match="agent_0/optimizer.pt: ETag .* stored"):  # before any write
        s3_store.download_folder(f"{RUN}/checkpoint-1", tmp_path / "cache" / "checkpoint-1")
    cache = tmp_path / "cache"
    assert not cache.exists() or list(cache.iterdir()) == []  # nothing half-written is left to use


def test_an_upload_whose_object_changes_before_the_check_gets_no_completion_marker(
    s3_server, s3_store, tmp_path
):
    folder = make_checkpoint(tmp_path / "checkpoint-2", seed=2)
    client = s3_client(s3_server)
    bucket, prefix = s3_store.backend.bucket, s3_store.backend.prefix

    def another_writer(entry):
        if entry.path == "agent_0/model.safetensors":
            client.put_object(Bucket=bucket, Key=f"{prefix}/{RUN}/checkpoint-2/{entry.path}", Body=b"torn")

    with pytest.raises(
        VerificationFailed, match="agent_0/model.safetensors: 4 bytes stored, 300000 expected"
    ):
        s3_store.upload_folder(folder, f"{RUN}/checkpoint-2", progress=another_writer)
    assert s3_store.manifest(f"{RUN}/checkpoint-2") is None
    assert s3_store.list_complete(RUN) == []


def test_the_newest_complete_checkpoint_is_chosen_and_a_half_uploaded_one_never_offered(
    s3_server, s3_store, tmp_path
):
    for step in (5, 20, 10):
        s3_store.upload_folder(
            make_checkpoint(tmp_path / f"checkpoint-{step}", seed=step), f"{RUN}/checkpoint-{step}"
        )
    half = make_checkpoint(tmp_path / "checkpoint-30", seed=30)
    client = s3_client(s3_server)  # objects without their completion marker: a writer that died midway
    for path in ("agent_0/model.safetensors", "agent_0/optimizer.pt"):
        client.upload_file(
            str(half / path), s3_store.backend.bucket, f"{s3_store.backend.prefix}/{RUN}/checkpoint-30/{path}"
        )

    assert [m.name for m in s3_store.list_complete(RUN)] == ["checkpoint-20", "checkpoint-10", "checkpoint-5"]
    cached = s3_store.fetch_newest(RUN, tmp_path / "cache")
    assert cached == tmp_path / "cache" / RUN / "checkpoint-20"
    assert same_tree(tmp_path / "checkpoint-20", cached)
    assert s3_store.fetch_newest(RUN, tmp_path / "cache") == cached  # kept: not downloaded twice
    with pytest.raises(NotComplete, match="checkpoint-30 is not complete"):
        s3_store.download_folder(f"{RUN}/checkpoint-30", tmp_path / "elsewhere")
    assert s3_store.fetch_newest("runs/run-8/checkpoints", tmp_path / "cache") is None


def test_deleting_a_folder_removes_its_remote_copies(s3_server, s3_store, tmp_path):
    for step in (1, 2):
        s3_store.upload_folder(
            make_checkpoint(tmp_path / f"checkpoint-{step}", seed=step), f"{RUN}/checkpoint-{step}"
        )

    assert s3_store.delete_folder(f"{RUN}/checkpoint-1") == 4
    assert [m.name for m in s3_store.list_complete(RUN)] == ["checkpoint-2"]
    listed = s3_client(s3_server).list_objects_v2(
        Bucket=s3_store.backend.bucket, Prefix=f"{s3_store.backend.prefix}/{RUN}/checkpoint-1"
    )
    assert listed.get("KeyCount", 0) == 0


def test_wrong_credentials_are_refused_at_start_in_one_line(s3_server, s3_env):
    settings = s3_env(s3_server, new_bucket(s3_server), secret="not-the-secret")
    with pytest.raises(StoreRefused) as refused:
        check_store(settings)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(
        f"artifact store {settings.artifacts_url} at {s3_server.endpoint} refused the "
        "credentials (AWS_ACCESS_KEY_ID=cooplab-test)"
    )


def test_a_missing_bucket_is_refused_or_created_when_asked(s3_server, s3_env):
    settings = s3_env(s3_server, "cooplab-not-there")
    with pytest.raises(
        StoreRefused,
        match="the bucket cooplab-not-there does not exist .*COOPLAB_ARTIFACTS_CREATE_BUCKET=true",
    ):
        check_store(settings)

    store = check_store(s3_env(s3_server, "cooplab-not-there", create_bucket="true"))
    assert store.list_complete(RUN) == []
    assert "cooplab-not-there" in [b["Name"] for b in s3_client(s3_server).list_buckets()["Buckets"]]


@pytest.mark.slow
def test_a_server_stopped_mid_upload_is_retried_then_named_and_nothing_is_offered(
    private_s3_server, s3_env, tmp_path
):
    settings = s3_env(private_s3_server, new_bucket(private_s3_server))
    store = open_store(settings)
    folder = make_checkpoint(tmp_path / "checkpoint-4", seed=4)

    def crash_after_first_file(entry):
        if entry.path == "agent_0/model.safetensors":
            private_s3_server.stop()

    t0 = time.monotonic()
    with pytest.raises(StoreUnavailable) as failed:
        store.upload_folder(folder, f"{RUN}/checkpoint-4", progress=crash_after_first_file)
    waited = time.monotonic() - t0
    message = str(failed.value)
    assert message.startswith(
        f"artifact store {settings.artifacts_url} at {private_s3_server.endpoint} failed "
        f"uploading {RUN}/checkpoint-4/agent_0/optimizer.pt after 3 tries: "
    )
    assert "Could not connect to the endpoint URL" in message and "\n" not in message
    assert waited >= 0.2 + 0.4  # the backoff between the three tries

    private_s3_server.start()
    assert store.list_complete(RUN) == []  # the objects sent before the crash are never offered
    store.upload_folder(folder, f"{RUN}/checkpoint-4")  # the next attempt stores it whole
    assert [m.name for m in store.list_complete(RUN)] == ["checkpoint-4"]


@pytest.mark.slow
def test_a_server_stopped_mid_download_fails_naming_it_and_the_next_attempt_works(
    private_s3_server, s3_env, tmp_path
):
    settings = s3_env(private_s3_server, new_bucket(private_s3_server))
    store = open_store(settings)
    folder = make_checkpoint(tmp_path / "checkpoint-6", seed=6)
    store.upload_folder(folder, f"{RUN}/checkpoint-6")
    cache = tmp_path / "cache"

    def crash_after_first_file(entry):
        private_s3_server.stop()

    with pytest.raises(
        StoreUnavailable, match=f"failed downloading {RUN}/checkpoint-6/agent_0/optimizer.pt after 3 tries"
    ):
        store.download_folder(f"{RUN}/checkpoint-6", cache / "checkpoint-6", progress=crash_after_first_file)
    assert not cache.exists() or list(cache.iterdir()) == []  # no half-downloaded folder to resume from

    private_s3_server.start()
    assert same_tree(folder, store.download_folder(f"{RUN}/checkpoint-6", cache / "checkpoint-6"))


def test_a_full_cache_disk_is_named_and_nothing_is_left(s3_store, tmp_path):
    folder = make_checkpoint(tmp_path / "checkpoint-9", seed=9, big_bytes=6 << 20)
    s3_store.upload_folder(folder, f"{RUN}/checkpoint-9")
    with small_filesystem(tmp_path / "small", "4m") as small:
        with pytest.raises(
            CacheFull,
            match=r"not enough space to download s3://.*checkpoint-9 to .*: it needs "
            r".* MiB with a margin, .* free on .*; nothing was written",
        ):
            s3_store.fetch_newest(RUN, small / "cache")
        assert list(small.iterdir()) == []


def test_the_expected_etag_of_a_multipart_file_is_the_servers(s3_server, s3_store, tmp_path):
    path = tmp_path / "blob"
    path.write_bytes(bytes(range(256)) * (44 << 10))  # 11 MiB: parts of 5, 5 and 1 MiB
    size, md5, etag = hash_file(path, 5 << 20)
    s3_store.backend.put_file(path, "loose/blob")
    assert s3_store.stat("loose/blob").etag.strip('"') == etag and etag.endswith("-3") and size == 11 << 20
    assert md5 != etag.split("-")[0]
