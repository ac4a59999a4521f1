"""The artifact store in a folder (the local data directory, a shared filesystem), and its pure parts:
the store URL, the expected ETags, the order of checkpoints, the backoff."""

from __future__ import annotations

import hashlib

import pytest

from jobs.artifacts import (
    FILE,
    LOCAL,
    S3,
    NotComplete,
    StoreRefused,
    StoreUnavailable,
    VerificationFailed,
    check_store,
    open_store,
    parse_location,
)
from jobs.artifacts.manifest import Manifest, hash_file, multipart_etag, newest_first, part_size_for
from jobs.artifacts.retry import backoff_delays, with_retries
from jobs.settings import Settings
from tests.artifacts.conftest import make_checkpoint, same_tree

RUN = "runs/run-2/checkpoints"


def test_the_store_url_names_the_data_directory_a_shared_folder_or_a_bucket(tmp_path):
    assert parse_location(None, tmp_path) == parse_location("", tmp_path)
    local = parse_location("", tmp_path)
    assert (local.kind, local.root, local.url) == (LOCAL, tmp_path.resolve(), f"file://{tmp_path.resolve()}")
    shared = parse_location("file:///mnt/shared/cooplab/", tmp_path)
    assert (shared.kind, str(shared.root)) == (FILE, "/mnt/shared/cooplab")
    bucket = parse_location("s3://lab-artifacts/team/a/", tmp_path)
    assert (bucket.kind, bucket.bucket, bucket.prefix, bucket.url) == (
        S3,
        "lab-artifacts",
        "team/a",
        "s3://lab-artifacts/team/a",
    )
    assert parse_location("s3://lab-artifacts", tmp_path).prefix == ""
    for bad, says in [
        ("s3://UP/x", "is not a bucket name"),
        ("file://host/x", "not a host"),
        ("file:///", "absolute folder"),
        ("http://x/y", "use s3://bucket/prefix"),
        ("s3://ok-bucket/../x", "may not contain '..'"),
    ]:
        with pytest.raises(ValueError, match=says):
            parse_location(bad, tmp_path)


def test_expected_etags_follow_the_part_size_the_client_uses(tmp_path):
    small = tmp_path / "small"
    small.write_bytes(b"x" * 1000)
    assert hash_file(small, 5 << 20) == (
        1000,
        hashlib.md5(b"x" * 1000).hexdigest(),
        hashlib.md5(b"x" * 1000).hexdigest(),
    )
    data = bytes(range(256)) * 45_000  # 11.5 MB: parts of 5 MiB, 5 MiB and the rest
    big = tmp_path / "big"
    big.write_bytes(data)
    parts = [hashlib.md5(data[i : i + (5 << 20)]).digest() for i in range(0, len(data), 5 << 20)]
    assert (
        hash_file(big, 5 << 20)[2] == multipart_etag(parts) == hashlib.md5(b"".join(parts)).hexdigest() + "-3"
    )
    assert part_size_for(100 << 30, 5 << 20) == 20 << 20  # at most 10,000 parts
    assert part_size_for(1 << 20, 1 << 20) == 5 << 20  # at least 5 MiB


def test_checkpoints_are_ordered_by_step_then_completion():
    def made(name: str, at: str) -> Manifest:
        return Manifest(f"runs/run-1/checkpoints/{name}", (), 5 << 20, at, "h")

    found = newest_first(
        [
            made("checkpoint-9", "2026-01-02"),
            made("checkpoint-10", "2026-01-01"),
            made("best", "2026-01-03"),
            made("checkpoint-10", "2026-01-04"),
        ]
    )
    assert [(m.name, m.created_at) for m in found] == [
        ("checkpoint-10", "2026-01-04"),
        ("checkpoint-10", "2026-01-01"),
        ("checkpoint-9", "2026-01-02"),
        ("best", "2026-01-03"),
    ]


def test_retries_back_off_then_give_up_naming_the_cause():
    assert backoff_delays(6, 0.5) == [0.5, 1.0, 2.0, 4.0, 8.0]
    waits: list[float] = []
    calls = iter([ConnectionResetError("reset"), ConnectionResetError("reset"), "done"])

    def flaky() -> str:
        outcome = next(calls)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def transient(exc: BaseException) -> bool:
        return isinstance(exc, ConnectionError)

    def give_up(exc: BaseException, tries: int) -> Exception:
        return StoreUnavailable("s3://b", "x", tries, exc)

    assert (
        with_retries(flaky, tries=3, base_s=0.5, transient=transient, give_up=give_up, sleep=waits.append)
        == "done"
    )
    assert waits == [0.5, 1.0]
    with pytest.raises(
        StoreUnavailable, match="artifact store s3://b failed x after 2 tries: ConnectionRefusedError: no"
    ):
        with_retries(
            lambda: (_ for _ in ()).throw(ConnectionRefusedError("no")),
            tries=2,
            base_s=0,
            transient=transient,
            give_up=give_up,
            sleep=waits.append,
        )
    with pytest.raises(KeyError):  # not transient: at once, untouched
        with_retries(
            lambda: {}["k"], tries=5, base_s=0, transient=transient, give_up=give_up, sleep=waits.append
        )


def test_a_shared_folder_store_round_trips_checks_and_prunes(clean_env, monkeypatch, tmp_path):
    shared = tmp_path / "shared"
    monkeypatch.setenv("COOPLAB_ARTIFACTS_URL", f"file://{shared}")
    with pytest.raises(StoreRefused, match=f"the folder {shared} does not exist"):
        check_store(Settings())
    monkeypatch.setenv("COOPLAB_ARTIFACTS_CREATE_BUCKET", "true")
    store = check_store(Settings())
    for step in (1, 2):
        store.upload_folder(
            make_checkpoint(tmp_path / f"checkpoint-{step}", seed=step), f"{RUN}/checkpoint-{step}"
        )
    (shared / RUN / "checkpoint-3").mkdir(parents=True)  # a folder written without its marker
    (shared / RUN / "checkpoint-3" / "model.safetensors").write_bytes(b"half")

    assert [m.name for m in store.list_complete(RUN)] == ["checkpoint-2", "checkpoint-1"]
    cached = store.fetch_newest(RUN, Settings().artifacts_cache_dir)
    assert cached == Settings().artifacts_cache_dir / RUN / "checkpoint-2" and same_tree(
        tmp_path / "checkpoint-2", cached
    )
    with pytest.raises(NotComplete):
        store.download_folder(f"{RUN}/checkpoint-3", tmp_path / "x")

    (shared / RUN / "checkpoint-1" / "agent_0" / "optimizer.pt").write_bytes(b"short")
    assert store.verify(f"{RUN}/checkpoint-1") == ["agent_0/optimizer.pt: 5 bytes stored, 70000 expected"]
    with pytest.raises(VerificationFailed):
        store.download_folder(f"{RUN}/checkpoint-1", tmp_path / "y")
    assert not (tmp_path / "y").exists()

    assert store.delete_folder(f"{RUN}/checkpoint-1") == 4
    assert not (shared / RUN / "checkpoint-1").exists()
    assert [m.name for m in store.list_complete(RUN)] == ["checkpoint-2"]
    assert store.free_bytes() > 0
    assert b"".join(store.stream(f"{RUN}/checkpoint-2/trainer_state.json")) == b'{"step": 2}'


def test_without_a_url_the_store_is_the_data_directory_and_nothing_is_copied(clean_env, tmp_path):
    settings = Settings()
    store = check_store(settings)
    folder = make_checkpoint(settings.data_dir / RUN / "checkpoint-5", seed=5)
    before = {p: p.stat().st_ino for p in folder.rglob("*") if p.is_file()}

    store.upload_folder(folder, f"{RUN}/checkpoint-5")
    assert store.url == f"file://{settings.data_dir}"
    assert store.fetch_newest(RUN, settings.artifacts_cache_dir) == folder  # where the trainer wrote it
    assert {p: p.stat().st_ino for p in folder.rglob("*") if p.is_file()} == before
    assert not settings.artifacts_cache_dir.exists()
    assert (settings.data_dir / ".complete" / RUN / "checkpoint-5.json").is_file()
    (folder / "agent_0" / "optimizer.pt").unlink()  # removed behind the store's back
    with pytest.raises(VerificationFailed, match="agent_0/optimizer.pt: missing or resized"):
        store.fetch_newest(RUN, settings.artifacts_cache_dir)


def test_a_bad_store_url_is_named_before_anything_is_contacted(clean_env, monkeypatch):
    monkeypatch.setenv("COOPLAB_ARTIFACTS_URL", "s3:/typo")
    with pytest.raises(ValueError, match="COOPLAB_ARTIFACTS_URL=s3:/typo"):
        open_store(Settings())
