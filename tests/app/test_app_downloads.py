"""Downloads served by the dashboard's own route (app/server.py): per-session tokens that stay valid
across reruns, concurrent and repeated requests, streamed chunks, 404 for unknown or expired tokens."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

from app.components import downloads


class _Request:
    def __init__(self, token: str) -> None:
        self.path_params = {"token": token, "name": "x"}


def _fetch(token: str) -> tuple[int, bytes, dict]:
    async def go() -> tuple[int, bytes, dict]:
        response = await downloads.serve(_Request(token))
        if not hasattr(response, "body_iterator"):
            return response.status_code, response.body, dict(response.headers)
        body = b"".join([chunk async for chunk in response.body_iterator])
        return response.status_code, body, dict(response.headers)

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


def test_unknown_and_expired_tokens_are_404() -> None:
    downloads.register("tok-old", downloads.Offer(lambda: "x", "a.txt", "text/plain", time.monotonic() - 1))
    assert _fetch("tok-old")[0] == 404
    status, body, _ = _fetch("no-such-token")
    assert status == 404 and b"reload the dashboard page" in body


def test_file_names_in_the_header_are_safe() -> None:
    downloads.register("tok-b", downloads.Offer(lambda: b"z", 'a"b;c.zip', "application/zip", time.monotonic() + 60))
    assert _fetch("tok-b")[2]["content-disposition"] == 'attachment; filename="a_b_c.zip"'


def test_pages_use_links_when_the_route_is_served(app, store, experiment, seed, monkeypatch) -> None:
    run_id = seed(experiment, status="succeeded", steps=2)
    monkeypatch.setitem(downloads._route, "active", True)
    at = app("run_detail", run=run_id)
    assert not at.exception
    links = [h.proto.body for h in at.get("html") if "cooplab-download" in h.proto.body]
    assert any(f'download="run{run_id}-metrics.csv"' in link for link in links)
    token = links[0].split("/api/download/")[1].split("/")[0]
    at.run()  # a rerun keeps the same link (nothing goes stale under the pointer)
    again = [h.proto.body for h in at.get("html") if "cooplab-download" in h.proto.body]
    assert token in again[0]
    assert _fetch(token)[0] == 200
