"""The sign-in limiter under real concurrency and real requests: parallel attempts check no more
passwords than the limit, ``X-Forwarded-For`` does not choose the client (unless a trusted proxy is
configured), and an attacker's failures do not lock the real user out."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from app import signin
from app.access import hash_password
from app.guard import HostGuard
from app.hosts import CLIENT_HEADER, SHARED_FORWARDED_CLIENT

PASSWORD = "correct horse battery staple"
STORED = hash_password(PASSWORD, n=2**12)
ACCESS = signin.Access(required=True, address="0.0.0.0", stored=STORED)


@pytest.fixture(autouse=True)
def fresh_limiter(monkeypatch: pytest.MonkeyPatch) -> None:
    signin.limiter.clear()
    monkeypatch.setattr(signin, "FAILURE_DELAY_S", 0.2)


def _parallel(attempts: list[tuple[str, str, str | None]]) -> list[str | float]:
    """Run ``(password, client, browser)`` attempts in real threads, all released at once."""
    barrier = threading.Barrier(len(attempts))

    def one(attempt: tuple[str, str, str | None]) -> str | float:
        barrier.wait()
        return signin.try_password(ACCESS, *attempt)

    with ThreadPoolExecutor(len(attempts)) as pool:
        return list(pool.map(one, attempts))


def test_25_parallel_attempts_check_at_most_the_limit() -> None:
    limit = signin.limiter().max_failures
    outcomes = _parallel([(f"guess {i}", "203.0.113.9", None) for i in range(25)])
    checked = [o for o in outcomes if o in (signin.WRONG, signin.SIGNED_IN)]
    assert len(checked) == limit == 5  # the other 20 were told to wait without a password check
    assert all(isinstance(o, float) and o > 0 for o in outcomes if o not in checked)
    assert signin.try_password(ACCESS, PASSWORD, "203.0.113.9") == pytest.approx(60, abs=2)  # now it waits


def test_an_attackers_failures_elsewhere_do_not_lock_out_the_real_user() -> None:
    # 40 addresses guess at once, three times each: far past the account's limit
    for _ in range(3):
        _parallel([(f"guess {i}", f"198.51.100.{i}", None) for i in range(40)])
    assert isinstance(signin.try_password(ACCESS, "another guess", "198.51.100.1"), float)  # retries wait
    # the real user, from an address of their own, with the right password: checked and signed in
    assert signin.try_password(ACCESS, PASSWORD, "192.0.2.44") == signin.SIGNED_IN


def test_a_browser_that_signed_in_before_is_not_locked_out_by_its_neighbours() -> None:
    browser = "r" * 43
    assert signin.try_password(ACCESS, PASSWORD, "192.0.2.10", browser) == signin.SIGNED_IN
    _parallel([(f"guess {i}", "192.0.2.10", None) for i in range(10)])  # same NAT address, another browser
    assert isinstance(signin.try_password(ACCESS, PASSWORD, "192.0.2.10", None), float)
    assert signin.try_password(ACCESS, PASSWORD, "192.0.2.10", browser) == signin.SIGNED_IN


async def _echo_client(scope, receive, send) -> None:
    """An ASGI app answering with the client identity the guard put in the request's headers."""
    client = dict(scope["headers"]).get(CLIENT_HEADER.encode(), b"-")
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": client})


@pytest.fixture
def guarded_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[callable]:
    """``start(forwarded_allow_ips, trusted_proxies)``: a real uvicorn server with the guard in front of
    the echo app, started with that environment (as ``cooplab ui`` starts the dashboard); yields its URL."""
    import uvicorn

    servers = []

    def start(forwarded_allow_ips: str | None, trusted_proxies: str) -> str:
        if forwarded_allow_ips is None:
            monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)
        else:
            monkeypatch.setenv("FORWARDED_ALLOW_IPS", forwarded_allow_ips)
        monkeypatch.setenv("COOPLAB_UI_TRUSTED_PROXIES", trusted_proxies)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(HostGuard(_echo_client), host="127.0.0.1", port=port,
                                               log_level="warning", lifespan="off"))
        thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
        thread.start()
        servers.append((server, thread))
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        return f"http://127.0.0.1:{port}/"

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(10)


def _client_of(url: str, forwarded_for: str | None) -> str:
    request = urllib.request.Request(url, headers={"X-Forwarded-For": forwarded_for} if forwarded_for else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode()


def test_forwarded_for_is_ignored_without_a_trusted_proxy(guarded_server) -> None:
    url = guarded_server("", "")  # how `cooplab ui` starts the dashboard when no proxy is configured
    assert _client_of(url, None) == "127.0.0.1"
    assert {_client_of(url, f"203.0.113.{i}") for i in range(5)} == {"127.0.0.1"}  # rotating it changes nothing


def test_a_server_started_trusting_loopback_counts_forwarded_requests_as_one_client(guarded_server) -> None:
    url = guarded_server(None, "")  # `streamlit run app/server.py` by hand: uvicorn believes loopback peers
    assert {_client_of(url, f"203.0.113.{i}") for i in range(5)} == {SHARED_FORWARDED_CLIENT}
    assert _client_of(url, None) == "127.0.0.1"


def test_a_configured_proxy_is_believed(guarded_server) -> None:
    url = guarded_server("127.0.0.1", "127.0.0.1")
    assert _client_of(url, "203.0.113.7") == "203.0.113.7"


def test_the_launcher_starts_the_dashboard_believing_only_the_configured_proxies(monkeypatch) -> None:
    from jobs.settings import get_settings
    from jobs.supervisor import child_environment

    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "*")
    monkeypatch.delenv("COOPLAB_UI_TRUSTED_PROXIES", raising=False)
    assert child_environment(get_settings())["FORWARDED_ALLOW_IPS"] == ""
    monkeypatch.setenv("COOPLAB_UI_TRUSTED_PROXIES", "10.0.0.2,10.1.0.0/16")
    assert child_environment(get_settings())["FORWARDED_ALLOW_IPS"] == "10.0.0.2,10.1.0.0/16"
