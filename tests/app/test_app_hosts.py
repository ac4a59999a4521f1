"""The dashboard's Host/Origin rule against DNS rebinding and its client identity (``app/hosts.py``),
with hand-checked cases, and the launcher's line about it (``cooplab ui``)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from app.hosts import (
    SHARED_FORWARDED_CLIENT,
    allowed_names,
    browser_id,
    client_identity,
    host_allowed,
    hostname_of,
    origin_allowed,
    parse_allowed_hosts,
    refusal,
    same_address_list,
)

LOOPBACK = allowed_names("127.0.0.1", (), ("labbox",))


@pytest.mark.parametrize("host", ["127.0.0.1:8501", "localhost:8501", "LOCALHOST", "[::1]:8501", "localhost.",
                                  "10.1.2.3:8501", "[fe80::1]", "127.0.0.1"])
def test_loopback_names_and_ip_addresses_are_answered(host: str) -> None:
    assert host_allowed(host, LOOPBACK)


@pytest.mark.parametrize("host", ["evil.test:8501", "evil.test", "localhost.evil.test", "evil-localhost",
                                  "labbox:8501",  # the machine's name counts only off loopback
                                  "", None, "user@127.0.0.1", "127.0.0.1/x", "127.0.0.1:99999", "a b",
                                  "127.0.0.1:port"])
def test_other_hosts_are_refused(host: str | None) -> None:
    assert not host_allowed(host, LOOPBACK)


def test_names_an_operator_lists_and_the_machines_name_off_loopback() -> None:
    names = allowed_names("0.0.0.0", parse_allowed_hosts(" Dash.Example.com., *.lab.example.org "), ("labbox",))
    assert names == {"localhost", "127.0.0.1", "::1", "dash.example.com", "*.lab.example.org", "labbox"}
    assert host_allowed("dash.example.com:443", names) and host_allowed("labbox:8501", names)
    assert host_allowed("gpu1.lab.example.org", names) and not host_allowed("lab.example.org.evil.test", names)
    assert not host_allowed("evil.test", names)
    assert "dashboard.lan" in allowed_names("dashboard.lan")  # the address it listens on, when a name


@pytest.mark.parametrize("entry", ["http://dash.example.com", "dash.example.com:443", "dash.example.com/x", "a b"])
def test_a_bad_allowed_host_names_the_setting(entry: str) -> None:
    with pytest.raises(ValueError, match=r"COOPLAB_UI_ALLOWED_HOSTS has .* which is not a host name"):
        parse_allowed_hosts(f"ok.example.com,{entry}")


def test_origin_must_be_the_dashboards_own() -> None:
    assert origin_allowed(None, "127.0.0.1:8501")  # a link or curl sends none
    assert origin_allowed("http://127.0.0.1:8501", "127.0.0.1:8501")
    assert origin_allowed("https://Dash.Example.com", "dash.example.com")
    assert not origin_allowed("http://evil.test:8501", "127.0.0.1:8501")
    assert not origin_allowed("http://127.0.0.1:3000", "127.0.0.1:8501")  # another local web page
    assert not origin_allowed("null", "127.0.0.1:8501")
    assert not origin_allowed("file://", "127.0.0.1:8501")


def test_the_refusal_says_what_to_do() -> None:
    message = refusal("evil.test:8661", "http://evil.test:8661", LOOPBACK)
    assert "does not answer to the host name 'evil.test:8661'" in message and "COOPLAB_UI_ALLOWED_HOSTS" in message
    assert "may not use this dashboard" in refusal("127.0.0.1:8661", "http://evil.test", LOOPBACK)
    assert refusal("127.0.0.1:8661", "http://127.0.0.1:8661", LOOPBACK) is None
    assert hostname_of("[::1]:8501") == "::1"


def test_client_identity_and_browser_cookie() -> None:
    assert client_identity("203.0.113.5", False, False) == "203.0.113.5"
    assert client_identity("203.0.113.5", True, True) == "203.0.113.5"  # the server believes only our proxies
    assert client_identity("203.0.113.5", True, False) == SHARED_FORWARDED_CLIENT
    assert client_identity(None, False, True) == "local"
    assert same_address_list("", "") and same_address_list("10.0.0.1, 10.0.0.2", "10.0.0.2,10.0.0.1")
    assert not same_address_list("127.0.0.1,::1", "")
    assert browser_id("a" * 43) == "a" * 43
    assert browser_id("short") is None and browser_id("a" * 42 + ";") is None and browser_id(None) is None


def test_the_launcher_says_which_names_it_answers_to(home, monkeypatch) -> None:
    import jobs.supervisor
    from cooplab.cli import app

    class Recorder:
        def __init__(self, **kwargs) -> None:
            pass

        def run(self) -> int:
            return 0

    monkeypatch.setattr(jobs.supervisor, "Supervisor", Recorder)
    monkeypatch.setenv("COOPLAB_UI_ALLOWED_HOSTS", "dash.example.com")
    result = CliRunner().invoke(app, ["ui"])
    assert result.exit_code == 0, result.output
    assert "Host names it answers to: 127.0.0.1, ::1, dash.example.com, localhost and IP addresses" in result.output
    monkeypatch.setenv("COOPLAB_UI_ALLOWED_HOSTS", "https://dash.example.com")
    refused = CliRunner().invoke(app, ["ui"])
    assert refused.exit_code == 2 and "COOPLAB_UI_ALLOWED_HOSTS has 'https://dash.example.com'" in refused.output


def _through_guard(headers: list[tuple[bytes, bytes]], kind: str = "http") -> list[dict]:
    """What the guard sends for one request in front of an app that answers 200 (the messages sent)."""
    import asyncio

    from app.guard import HostGuard

    async def ok(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "websocket.connect"} if kind == "websocket" else {"type": "http.request", "body": b""}

    scope = {"type": kind, "path": "/", "headers": headers, "client": ("127.0.0.1", 50000)}
    asyncio.run(HostGuard(ok)(scope, receive, send))
    return sent


def test_the_guard_refuses_everything_while_the_allowed_hosts_are_unreadable(server_address, monkeypatch) -> None:
    monkeypatch.setenv("COOPLAB_UI_ALLOWED_HOSTS", "http://dash.example.com")
    (start, body) = _through_guard([(b"host", b"127.0.0.1:8501")])
    assert start["status"] == 403 and b"COOPLAB_UI_ALLOWED_HOSTS has 'http://dash.example.com'" in body["body"]
    monkeypatch.setenv("COOPLAB_UI_ALLOWED_HOSTS", "dash.example.com")
    assert _through_guard([(b"host", b"dash.example.com")])[0]["status"] == 200
    assert _through_guard([(b"host", b"evil.test")], "websocket") == [{"type": "websocket.close", "code": 1008}]
