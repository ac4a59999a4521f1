"""Downloads served by the dashboard's own route (app/server.py): per-session tokens that stay valid
across reruns, concurrent and repeated requests, streamed chunks, 404 for unknown, expired, revoked or
another browser's tokens, production off the event loop, a bound on concurrent downloads (503), and
checkpoint zips made while they are sent."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from starlette.requests import Request

from app.components import downloads
from app.hosts import BROWSER_COOKIE

BROWSER = "b" * 43
OTHER_BROWSER = "c" * 43


def _request(token: str, browser: str | None = None) -> Request:
    """A real Starlette request for the route, with the browser cookie when given."""
    headers = [(b"host", b"127.0.0.1:8501")]
    if browser:
        headers.append((b"cookie", f"{BROWSER_COOKIE}={browser}".encode()))
    return Request({"type": "http", "method": "GET", "path": f"/api/download/{token}/x", "headers": headers,
                    "query_string": b"", "path_params": {"token": token, "name": "x"}})


async def _body(response) -> bytes:
    return b"".join([chunk async for chunk in response.body_iterator])


def _fetch(token: str, browser: str | None = None) -> tuple[int, bytes, dict]:
    async def go() -> tuple[int, bytes, dict]:
        response = await downloads.serve(_request(token, browser))
        if not hasattr(response, "body_iterator"):
            return response.status_code, response.body, dict(response.headers)
        return response.status_code, await _body(response), dict(response.headers)

    return asyncio.run(go())


def test_a_token_serves_its_file_any_number_of_times_at_once() -> None:
    calls = []

    def produce():
        calls.append(1)
        yield "key,step\n"
        yield from (f"m,{i}\n" for i in range(3))

    downloads.register("tok-a", downloads.Offer(produce, "run1-metrics.csv", "text/csv", time.monotonic() + 60))
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(_fetch, ["tok-a"] * 4))  # four clicks in quick succession
    for status, body, headers in results:
        assert status == 200 and body == b"key,step\nm,0\nm,1\nm,2\n"
        assert headers["content-disposition"] == 'attachment; filename="run1-metrics.csv"'
    assert len(calls) == 4  # built on request, every time
    assert downloads.SLOTS.busy == 0  # every slot given back


def test_unknown_and_expired_tokens_are_404() -> None:
    downloads.register("tok-old", downloads.Offer(lambda: "x", "a.txt", "text/plain", time.monotonic() - 1))
    assert _fetch("tok-old")[0] == 404
    status, body, _ = _fetch("no-such-token")
    assert status == 404 and b"reload the dashboard page" in body


def test_file_names_in_the_header_are_safe() -> None:
    downloads.register("tok-b", downloads.Offer(lambda: b"z", 'a"b;c.zip', "application/zip", time.monotonic() + 60))
    assert _fetch("tok-b")[2]["content-disposition"] == 'attachment; filename="a_b_c.zip"'


def test_a_bound_link_works_only_with_its_browser_cookie_and_not_after_revocation() -> None:
    downloads.register("tok-bound", downloads.Offer(lambda: b"secret", "run1.log", "text/plain",
                                                    time.monotonic() + 60, BROWSER))
    assert _fetch("tok-bound")[0] == 404  # curl without the cookie
    assert _fetch("tok-bound", OTHER_BROWSER)[0] == 404  # another browser
    assert _fetch("tok-bound", "short")[0] == 404  # not a cookie the server gives
    assert _fetch("tok-bound", BROWSER)[:2] == (200, b"secret")
    downloads.revoke(["tok-bound"])  # what Sign out does with the session's tokens
    assert _fetch("tok-bound", BROWSER)[0] == 404


def test_a_file_is_produced_off_the_event_loop() -> None:
    """A producer that takes a while (zipping, exporting) must not stop the server answering others."""
    def produce():
        time.sleep(0.6)  # building the file before the first byte
        return b"done"

    downloads.register("tok-slow", downloads.Offer(produce, "slow.bin", "application/octet-stream",
                                                   time.monotonic() + 60))

    async def go() -> tuple[bytes, int]:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.02)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        response = await downloads.serve(_request("tok-slow"))
        body = await _body(response)
        done.set()
        await task
        return body, ticks

    body, ticks = asyncio.run(go())
    assert body == b"done"
    assert ticks >= 10  # the loop kept running (about 30 ticks) while the file was produced


def test_downloads_beyond_the_limit_are_answered_503(monkeypatch) -> None:
    monkeypatch.setenv("COOPLAB_UI_MAX_DOWNLOADS", "2")
    release = threading.Event()

    def produce():
        yield b"first chunk\n"
        release.wait(10)
        yield b"rest\n"

    downloads.register("tok-big", downloads.Offer(produce, "big.zip", "application/zip", time.monotonic() + 60))

    async def go() -> None:
        first = await downloads.serve(_request("tok-big"))
        second = await downloads.serve(_request("tok-big"))
        heads = [await first.body_iterator.__anext__(), await second.body_iterator.__anext__()]
        assert heads == [b"first chunk\n"] * 2  # two downloads are streaming
        third = await downloads.serve(_request("tok-big"))
        assert third.status_code == 503 and third.headers["retry-after"] == "10"
        assert b"already sending 2 downloads (COOPLAB_UI_MAX_DOWNLOADS)" in third.body
        release.set()
        assert [chunk async for chunk in first.body_iterator] == [b"rest\n"]
        assert [chunk async for chunk in second.body_iterator] == [b"rest\n"]
        fourth = await downloads.serve(_request("tok-big"))  # a slot is free again
        assert fourth.status_code == 200 and await _body(fourth) == b"first chunk\nrest\n"

    asyncio.run(go())
    assert downloads.SLOTS.busy == 0


def test_a_checkpoint_zip_is_made_while_it_is_sent(tmp_path: Path) -> None:
    folder = tmp_path / "step-4"
    (folder / "agent0").mkdir(parents=True)
    weights = os.urandom(5 * 1024 * 1024)  # incompressible: the archive is as large as the file
    (folder / "agent0" / "model.safetensors").write_bytes(weights)
    (folder / "agent0" / "config.json").write_text('{"hidden": 8}')
    (folder / "trainer_state.json").write_text("{}")
    (folder / "outside").symlink_to(tmp_path / "elsewhere.txt")
    (tmp_path / "elsewhere.txt").write_text("not part of the checkpoint")

    chunks = downloads.zip_folder(folder, block=256 * 1024)
    assert not isinstance(chunks, bytes | bytearray)
    sizes = []
    archive_bytes = io.BytesIO()
    for chunk in chunks:
        sizes.append(len(chunk))
        archive_bytes.write(chunk)
    assert len(sizes) >= 20 and max(sizes) <= 300 * 1024  # sent in pieces, never the whole 5 MB at once
    with zipfile.ZipFile(archive_bytes) as archive:
        assert archive.testzip() is None
        assert sorted(archive.namelist()) == ["step-4/agent0/config.json", "step-4/agent0/model.safetensors",
                                              "step-4/trainer_state.json"]
        assert archive.read("step-4/agent0/model.safetensors") == weights


def test_a_single_checkpoint_file_zips_too(tmp_path: Path) -> None:
    file = tmp_path / "policy.pt"
    file.write_bytes(b"weights" * 1000)
    with zipfile.ZipFile(io.BytesIO(b"".join(downloads.zip_folder(file)))) as archive:
        assert archive.namelist() == ["policy.pt"] and archive.read("policy.pt") == b"weights" * 1000


def test_pages_use_links_when_the_route_is_served(app, store, experiment, seed, monkeypatch) -> None:
    run_id = seed(experiment, status="succeeded", steps=2)
    monkeypatch.setitem(downloads._route, "active", True)
    at = app("run_detail", run=run_id, tab="Checkpoints & downloads")
    assert not at.exception
    links = [h.proto.body for h in at.get("html") if "cooplab-download" in h.proto.body]
    assert any(f'download="run{run_id}-metrics.csv"' in link for link in links)
    token = links[0].split("/api/download/")[1].split("/")[0]
    at.run()  # a rerun keeps the same link (nothing goes stale under the pointer)
    again = [h.proto.body for h in at.get("html") if "cooplab-download" in h.proto.body]
    assert token in again[0]
    assert _fetch(token)[0] == 200  # on loopback without sign-in a session without a cookie keeps links


def test_without_a_browser_cookie_a_signin_server_draws_no_links(app, store, experiment, seed, monkeypatch,
                                                                   server_address) -> None:
    """Off loopback a link could not be bound to the browser: the page falls back to download buttons."""
    from app import signin
    from app.access import hash_password

    run_id = seed(experiment, status="succeeded", steps=2)
    monkeypatch.setitem(downloads._route, "active", True)
    server_address("0.0.0.0")
    monkeypatch.setenv("COOPLAB_UI_PASSWORD_HASH", hash_password("correct horse battery staple", n=2**10))
    signin.limiter.clear()
    at = app("run_detail", run=run_id, tab="Checkpoints & downloads")
    at.text_input(key="signin_password").input("correct horse battery staple")
    at.button[0].click().run()
    assert not at.exception and at.title[0].value != "Sign in to CoopLab"
    assert not [h for h in at.get("html") if "cooplab-download" in h.proto.body]
    assert any(b.label == "metrics CSV" for b in at.get("download_button"))


def test_the_transcripts_export_streams_in_batches(store, experiment, seed) -> None:
    run_id = seed(experiment, status="succeeded", steps=3, episodes_per_step=4)  # 12 episodes
    chunks = list(store.stream_episodes_jsonl(run_id, batch_size=5))
    assert [chunk.count("\n") for chunk in chunks] == [5, 5, 2]  # never more than a batch at once
    assert "".join(chunks) == store.export_episodes_jsonl(run_id)
    assert list(store.stream_episodes_jsonl(run_id + 99)) == []


def test_a_client_gone_before_the_body_started_gives_its_slot_back() -> None:
    downloads.register("tok-gone", downloads.Offer(lambda: b"x" * 10, "x.bin", "application/octet-stream",
                                                   time.monotonic() + 60))

    async def go() -> None:
        response = await downloads.serve(_request("tok-gone"))
        assert downloads.SLOTS.busy == 1

        async def receive() -> dict:
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            raise OSError("the client closed the connection")  # what the server reports on a closed socket

        scope = {"type": "http", "asgi": {"spec_version": "2.4"}, "method": "GET", "path": "/", "headers": []}
        with contextlib.suppress(Exception):  # the server reports the closed connection
            await response(scope, receive, send)

    asyncio.run(go())
    assert downloads.SLOTS.busy == 0
