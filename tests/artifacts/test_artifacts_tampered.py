"""A store that trusts nothing it reads: completion markers checked field by field before anything acts on
them, downloads confined to their temporary folder, a shared folder whose planted links are refused,
deletes of only the objects a marker lists, sizes checked before a byte is written, signed markers,
and a stream that stops at the size its manifest gives. Each attack here wrote, deleted or downloaded
outside the store's folders before its defence."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from jobs.artifacts import ArtifactStore, StoreRefused, TamperedMarker, VerificationFailed
from jobs.artifacts.backend_fs import FolderBackend
from jobs.artifacts.location import cache_path
from jobs.artifacts.marker_check import MAX_FILE_BYTES, parse_marker, path_problem
from tests.artifacts.conftest import make_checkpoint

KEY = "runs/run-5/checkpoints/checkpoint-2"
MARKER = f".complete/{KEY}.json"
MD5 = "0" * 32


def _store(root: Path, signing_key: bytes | None = None) -> ArtifactStore:
    root.mkdir(parents=True, exist_ok=True)
    return ArtifactStore(FolderBackend(root, f"file://{root}"), tries=1, retry_base_s=0, signing_key=signing_key)


def _marker(files: list[dict], key: str = KEY, **fields) -> bytes:
    body = {"version": 1, "key": key, "files": files, "part_size": 16 << 20, "created_at": "t", "host": "h"}
    return json.dumps({**body, **fields}).encode()


def _file(path: str, size: int = 3, md5: str = MD5, etag: str | None = None) -> dict:
    return {"path": path, "size": size, "md5": md5, "etag": etag or md5}


def _tamper(root: Path, key: str, edit) -> None:
    marker = root / ".complete" / f"{key}.json"
    body = json.loads(marker.read_bytes())
    edit(body)
    marker.write_text(json.dumps(body))


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("path, says", [
    ("/etc/cron.d/x", "is absolute"),
    ("../../../../usr/lib/python3/site-packages/evil.pth", "'..' part"),
    ("a/../../b", "'..' part"),
    ("a//b", "empty"),
    ("./a", "'.' "),
    ("a\\..\\b", "backslash"),
    ("a\0b", "control character"),
    ("a\nb", "control character"),
    ("", "empty"),
    ("x" * 2000, "longer than"),
])
def test_a_path_out_of_the_folder_is_refused(path, says):
    assert says in path_problem(path)
    with pytest.raises(TamperedMarker, match=f"completion marker {MARKER} was refused") as refused:
        parse_marker(_marker([_file("model.safetensors"), _file(path)]), KEY, marker_key=MARKER)
    assert says in str(refused.value) and "nothing it lists was downloaded, written or deleted" in str(refused.value)


@pytest.mark.parametrize("marker, says", [
    (_marker([_file("a"), _file("a")]), "listed twice"),
    (_marker([_file("a"), _file("a/b")]), "both a file and a folder"),
    (_marker([_file("a", size=-400 << 20)]), "size -419430400 is not"),
    (_marker([_file("a", size=MAX_FILE_BYTES + 1)]), "is not a whole number of bytes"),
    (_marker([_file("a", size=True)]), "size True"),
    (_marker([_file("a", size=1.5)]), "size 1.5"),
    (_marker([_file("a", md5="x" * 32)]), "md5"),
    (_marker([_file("a", etag="abc")]), "etag"),
    (_marker([{**_file("a"), "mode": 0o4755}]), "has fields"),
    (_marker([_file("a")], key="runs/run-1/checkpoints/checkpoint-9"), "a marker copied from another folder"),
    (_marker([_file("a")], version=2), "unknown manifest version"),
    (_marker([_file("a")], part_size=0), "part_size"),
    (_marker([_file("a")], host="h\x1b[2J"), "host"),
    (_marker([_file("a")], extra="x"), "unexpected fields"),
    (_marker("a"), "files is not a list"),
    (b"[1, 2]", "not a JSON object"),
    (b"{", "not JSON"),
])
def test_a_marker_unlike_the_stores_own_is_refused(marker, says):
    with pytest.raises(TamperedMarker) as refused:
        parse_marker(marker, KEY, marker_key=MARKER)
    assert says in str(refused.value)


def test_a_marker_the_store_wrote_reads_back_as_written(tmp_path):
    store = _store(tmp_path / "share")
    written = store.upload_folder(make_checkpoint(tmp_path / "ckpt", seed=1), KEY)
    assert store.manifest(KEY) == written
    assert [e.path for e in written.files] == ["agent_0/model.safetensors", "agent_0/optimizer.pt", "empty.txt",
                                               "trainer_state.json"]


@pytest.mark.parametrize("escape", ["../../../../../../../../../../{victim}", "/{victim}"])
@pytest.mark.parametrize("object_there", [True, False])
def test_a_tampered_marker_neither_writes_nor_deletes_outside_the_cache(tmp_path, escape, object_there):
    share, cache = tmp_path / "share", tmp_path / "cache"
    victim = tmp_path / "venv" / "site-packages" / "cooplab-boot.pth"
    victim.parent.mkdir(parents=True)
    victim.write_text("import sys  # the operator's own file\n")
    store = _store(share)
    store.upload_folder(make_checkpoint(tmp_path / "ckpt", seed=1), KEY)
    path = escape.format(victim=str(victim).lstrip("/"))
    if object_there:  # the payload's object where a naive join of key and path finds it
        payload = share / KEY / path.lstrip("/")
        payload.parent.mkdir(parents=True, exist_ok=True)
        payload.write_text("import os; os.system('id > /tmp/pwned')\n")
    _tamper(share, KEY, lambda body: body["files"].append(_file(path, size=40)))
    before = victim.read_bytes()

    with pytest.raises(TamperedMarker, match=rf"marker \.complete/{KEY}\.json was refused: file 4"):
        store.download_folder(KEY, cache_path(cache, KEY))
    assert victim.read_bytes() == before
    assert not cache.exists() or _tree(cache) == {}
    with pytest.raises(TamperedMarker):  # nor does deleting the folder delete what it lists
        store.delete_folder(KEY)
    assert victim.read_bytes() == before


def test_the_cache_path_of_a_key_stays_in_the_cache(tmp_path):
    assert cache_path(tmp_path, "/runs/run-1//checkpoints/checkpoint-2") == tmp_path / KEY.replace("5", "1")
    with pytest.raises(ValueError, match="may not contain '..'"):
        cache_path(tmp_path, "runs/../../etc")


def test_a_link_planted_in_a_shared_folder_is_refused_and_its_target_kept(tmp_path):
    share, victim = tmp_path / "share", tmp_path / "important"
    victim.mkdir()
    (victim / "thesis.tex").write_text("years of work")
    store = _store(share)
    (share / KEY).parent.mkdir(parents=True)
    (share / KEY).symlink_to(victim)  # planted ahead: run ids and steps are predictable

    with pytest.raises(StoreRefused, match=rf"{share / KEY} is a symbolic link"):
        store.upload_folder(make_checkpoint(tmp_path / "ckpt", seed=1), KEY)
    assert _tree(victim) == {"thesis.tex": b"years of work"}
    with pytest.raises(StoreRefused, match="is a symbolic link"):  # pruning lists nothing through it
        store.delete_folder(KEY)
    assert _tree(victim) == {"thesis.tex": b"years of work"}
    assert [o.key for o in store.backend.list("runs/")] == []


def test_a_linked_file_or_marker_is_no_object(tmp_path):
    share, secret = tmp_path / "share", tmp_path / "secret.txt"
    secret.write_text("root-only")
    store = _store(share)
    store.upload_folder(make_checkpoint(tmp_path / "ckpt", seed=1), KEY)
    (share / KEY / "leak.txt").symlink_to(secret)
    assert "leak.txt" not in [o.key.rsplit("/", 1)[-1] for o in store.backend.list(KEY + "/")]
    with pytest.raises(StoreRefused, match="is a symbolic link"):
        store.backend.get_bytes(f"{KEY}/leak.txt")
    other = "runs/run-6/checkpoints/checkpoint-1"
    (share / ".complete" / other).parent.mkdir(parents=True)
    (share / ".complete" / f"{other}.json").symlink_to(share / ".complete" / f"{KEY}.json")
    with pytest.raises(StoreRefused, match="is a symbolic link"):
        store.manifest(other)


def test_deleting_a_folder_deletes_only_what_its_marker_lists(tmp_path):
    share = tmp_path / "share"
    store = _store(share)
    store.upload_folder(make_checkpoint(tmp_path / "ckpt", seed=1), KEY)
    (share / KEY / "notes-from-a-colleague.txt").write_text("not ours")
    assert store.delete_folder(KEY) == 4
    assert _tree(share / KEY) == {"notes-from-a-colleague.txt": b"not ours"}
    assert store.manifest(KEY) is None


def test_sizes_are_checked_before_a_byte_is_written(tmp_path):
    share, cache = tmp_path / "share", tmp_path / "cache"
    store = _store(share)
    store.upload_folder(make_checkpoint(tmp_path / "ckpt", seed=1, big_bytes=4 << 20), KEY)
    _tamper(share, KEY, lambda body: body["files"][0].update(size=10))  # the free-space check sees 10 bytes

    with pytest.raises(VerificationFailed, match="agent_0/model.safetensors: 4194304 bytes stored, 10 expected"):
        store.download_folder(KEY, cache_path(cache, KEY))
    assert not cache.exists() or _tree(cache) == {}


def test_with_a_signing_key_only_signed_markers_make_a_folder_complete(tmp_path):
    share, key = tmp_path / "share", b"a-secret-every-worker-holds"
    signed = _store(share, signing_key=key)
    written = signed.upload_folder(make_checkpoint(tmp_path / "ckpt", seed=1), KEY)
    assert json.loads((share / ".complete" / f"{KEY}.json").read_bytes())["signature"].startswith("hmac-sha256:")
    assert signed.manifest(KEY) == written
    assert _store(share).manifest(KEY) == written  # a machine without the key still reads it

    _tamper(share, KEY, lambda body: body["files"][0].update(md5="f" * 32, etag="f" * 32))  # a swapped model
    with pytest.raises(TamperedMarker, match="its signature is wrong"):
        signed.manifest(KEY)
    _tamper(share, KEY, lambda body: body.pop("signature"))
    with pytest.raises(TamperedMarker, match="it is not signed, and this machine requires signed markers"):
        signed.manifest(KEY)
    other = "runs/run-7/checkpoints/checkpoint-1"
    _store(share, signing_key=b"another-key-of-another-lab").upload_folder(tmp_path / "ckpt", other)
    with pytest.raises(TamperedMarker, match="its signature is wrong"):
        signed.manifest(other)


def test_a_stream_stops_at_the_size_its_manifest_gives(tmp_path):
    from app.run_files import StoredFile, stream_checked

    share = tmp_path / "share"
    store = _store(share)
    manifest = store.upload_folder(make_checkpoint(tmp_path / "ckpt", seed=1), KEY)
    entry = manifest.files[-1]  # trainer_state.json
    (share / KEY / entry.path).write_bytes(b"x" * (8 << 20))
    chunks = stream_checked(store, StoredFile(f"{KEY}/{entry.path}", entry.size, entry.md5, manifest), 1 << 16)
    read = 0
    with pytest.raises(VerificationFailed, match="longer than the 11 bytes its manifest gives"):
        for chunk in chunks:
            read += len(chunk)
    assert read == 0  # nothing of it was sent on


def test_a_marker_over_the_size_limit_is_not_read(tmp_path, monkeypatch):
    import jobs.artifacts.store as store_module

    share = tmp_path / "share"
    store = _store(share)
    store.upload_folder(make_checkpoint(tmp_path / "ckpt", seed=1), KEY)
    monkeypatch.setattr(store_module, "MAX_MARKER_BYTES", 100)
    reads = []
    monkeypatch.setattr(store.backend, "get_bytes", lambda key: reads.append(key))
    with pytest.raises(TamperedMarker, match="more than the 100 a marker may be"):
        store.manifest(KEY)
    assert reads == [] and os.path.getsize(share / MARKER) > 100
