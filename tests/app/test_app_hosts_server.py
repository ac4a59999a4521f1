"""The dashboard's host check on a really started server (``cooplab ui`` on 127.0.0.1): a DNS-rebinding
page (``Host: evil.test:PORT``, ``Origin: http://evil.test:PORT``) gets neither the websocket nor any
HTTP route, while 127.0.0.1 and localhost work. Also the browser cookie the downloads and the sign-in
limiter rely on, the download route refusing a link without that cookie, and the framing headers on
every kind of response Streamlit gives."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.hosts import BROWSER_COOKIE
from tests.e2e.conftest import ROOT, _free_port, _stop_tree, _wait_healthy

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """``cooplab ui`` on 127.0.0.1 (no sign-in) with its own data directory; yields the port."""
    home = tmp_path_factory.mktemp("hosts-home")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COOPLAB_")}
    env.update({"COOPLAB_HOME": str(home), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    log = home / "ui.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cooplab", "ui", "--port", str(port)], cwd=ROOT, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_healthy(f"http://127.0.0.1:{port}", proc, Path(log))
        yield port
    finally:
        _stop_tree(proc)


def _websocket(port: int, host: str, origin: str) -> str:
    """Open the dashboard's websocket with these headers: "accepted" or the refusal's HTTP status."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus

    async def go() -> str:
        try:
            # the URL names the Host header; the socket goes to 127.0.0.1 (what a rebound name resolves to)
            async with connect(f"ws://{host}/_stcore/stream", host="127.0.0.1", port=port, origin=origin,
                               subprotocols=["streamlit"], open_timeout=20):
                return "accepted"
        except InvalidStatus as exc:
            return f"refused {exc.response.status_code}"

    return asyncio.run(go())


def _get(port: int, path: str, headers: dict[str, str]) -> tuple[int, str, list[str]]:
    """GET ``path`` from the dashboard: status, body and the Set-Cookie headers."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, response.read().decode(errors="replace"), response.headers.get_all("set-cookie")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace"), exc.headers.get_all("set-cookie")


def test_a_rebinding_websocket_is_refused_and_loopback_works(dashboard: int) -> None:
    port = dashboard
    assert _websocket(port, f"evil.test:{port}", f"http://evil.test:{port}") == "refused 403"
    assert _websocket(port, f"127.0.0.1:{port}", f"http://127.0.0.1:{port}") == "accepted"
    assert _websocket(port, f"localhost:{port}", f"http://localhost:{port}") == "accepted"
    # an allowed Host with a foreign page's Origin is refused as well
    assert _websocket(port, f"127.0.0.1:{port}", f"http://evil.test:{port}") == "refused 403"


def test_a_rebinding_http_request_is_refused(dashboard: int) -> None:
    port = dashboard
    status, body, _ = _get(port, "/", {"Host": f"evil.test:{port}"})
    assert status == 403
    assert "evil.test" in body and "COOPLAB_UI_ALLOWED_HOSTS" in body
    assert _get(port, "/api/download/x/y.csv", {"Host": f"evil.test:{port}"})[0] == 403
    status, _, cookies = _get(port, "/", {"Host": f"127.0.0.1:{port}"})
    assert status == 200
    (ours,) = [c for c in cookies or [] if c.startswith(f"{BROWSER_COOKIE}=")]
    assert "HttpOnly" in ours and "SameSite=Strict" in ours


def test_a_download_link_without_the_browser_cookie_is_refused(dashboard: int) -> None:
    status, body, _ = _get(dashboard, "/api/download/not-a-token/run1.log", {"Host": f"127.0.0.1:{dashboard}"})
    assert status == 404 and "reload the dashboard page" in body


def _headers_of(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Host": f"127.0.0.1:{port}",
                                                                                 **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers


def test_every_kind_of_response_forbids_framing(dashboard: int) -> None:
    """Through Streamlit's whole stack: the page, a bundled script from its static mount, its own
    endpoints, a 404 from its media route, and a page load into a frame (refused)."""
    status, page = _get(dashboard, "/", {"Host": f"127.0.0.1:{dashboard}"})[:2]
    script = re.search(r'src="\.?(/?static/js/[^"]+\.js)"', page)
    assert status == 200 and script, page[:500]
    paths = ["/", "/" + script[1].lstrip("/"), "/_stcore/health", "/_stcore/host-config", "/_stcore/metrics",
             "/media/missing.png"]
    answers = {path: _headers_of(dashboard, path) for path in paths}
    assert [answers[p][0] for p in paths] == [200, 200, 200, 200, 200, 404]
    framed = _headers_of(dashboard, "/", {"Sec-Fetch-Dest": "iframe", "Sec-Fetch-Site": "cross-site"})
    assert framed[0] == 403
    for _status, headers in [*answers.values(), framed]:
        assert headers.get_all("x-frame-options") == ["DENY"], headers
        assert "frame-ancestors 'none'" in headers.get("content-security-policy", ""), headers
