"""The dashboard server's front door: an ASGI middleware ``app/server.py`` puts before Streamlit.

For every HTTP request and websocket (rules in ``app/hosts.py``):

- a ``Host`` the dashboard does not answer to, or a foreign ``Origin``, is refused with 403 before
  Streamlit or the download route sees it (a websocket is closed during its handshake, which the
  server answers with 403);
- ``x-cooplab-client`` is set to the address sign-in attempts count against (a client's own header of
  that name is dropped), so the sign-in page reads it from the websocket's headers;
- a browser without the ``cooplab_browser`` cookie gets one (random, HttpOnly, SameSite=Strict): it
  ties download links to the browser that was shown them, lets a browser that signed in before
  skip the limits other clients' failures set (``app/access.py``), and is what a sign-in is kept
  under (``app/signins.py``);
- every HTTP response forbids framing, a page load into a frame is refused, the Streamlit endpoints
  beyond the sign-in form answer signed-in browsers only (when sign-in is required), and cookies
  get ``Secure`` over https (the rules are in ``app/guard_rules.py``).
"""

from __future__ import annotations

import os
import secrets
import socket
from typing import Any

from app import guard_rules
from app.access import fingerprint, hash_problem, signin_required
from app.hosts import (
    BROWSER_COOKIE,
    CLIENT_HEADER,
    allowed_names,
    browser_id,
    client_identity,
    parse_allowed_hosts,
    refusal,
    same_address_list,
)
from app.signins import SIGN_INS

# what uvicorn believes X-Forwarded-For from when FORWARDED_ALLOW_IPS is not set
UVICORN_DEFAULT_FORWARDED_ALLOW_IPS = "127.0.0.1,::1"
_state = {"active": False}


def activate() -> None:
    """Called by ``app/server.py``: this process's server puts :class:`HostGuard` first."""
    _state["active"] = True


def active() -> bool:
    """Whether this process's server runs behind :class:`HostGuard` (``app/server.py``), so the
    ``x-cooplab-client`` header a session sees was set by the guard, not by the client."""
    return _state["active"]


class Rules:
    """The host names and proxy trust of this server, read once from the settings and Streamlit's config."""

    def __init__(self) -> None:
        from streamlit import config

        from jobs.settings import get_settings

        settings = get_settings()
        self.problem: str | None = None  # an unreadable COOPLAB_UI_ALLOWED_HOSTS: every request is refused
        try:
            extra = parse_allowed_hosts(settings.ui_allowed_hosts)
        except ValueError as exc:
            extra, self.problem = (), f"This dashboard refuses every request: {exc}."
        address = str(config.get_option("server.address") or "")
        self.names = allowed_names(address, extra, (socket.gethostname(),))
        uvicorn_trusts = os.environ.get("FORWARDED_ALLOW_IPS", UVICORN_DEFAULT_FORWARDED_ALLOW_IPS)
        self.server_trusts_configured_proxies = same_address_list(uvicorn_trusts, settings.ui_trusted_proxies)
        self.signin_required = signin_required(address)
        self.tls = bool(config.get_option("server.sslCertFile"))
        self.base_url = str(config.get_option("server.baseUrlPath") or "")


def _signed_in(browser: str | None) -> bool:
    """Whether ``browser`` (its cookie) is signed in under the password hash configured now."""
    from jobs.settings import get_settings

    stored = get_settings().ui_password_hash
    return bool(stored) and hash_problem(stored) is None and SIGN_INS.browser_signed_in(browser, fingerprint(stored))


def _headers(scope: dict[str, Any]) -> dict[bytes, bytes]:
    found: dict[bytes, bytes] = {}
    for name, value in scope.get("headers", []):
        found.setdefault(name.lower(), value)
    return found


def _cookie(raw: bytes | None, name: str) -> str | None:
    for part in (raw or b"").decode("latin-1").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


class HostGuard:
    """ASGI middleware: the Host/Origin check, the client header, the browser cookie, the framing
    headers, the endpoints for signed-in browsers and Secure cookies."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._rules: Rules | None = None

    @property
    def rules(self) -> Rules:
        if self._rules is None:
            self._rules = Rules()
        return self._rules

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        browser = browser_id(_cookie(headers.get(b"cookie"), BROWSER_COOKIE))
        problem = self._problem(scope, headers, browser)
        if problem is not None:
            await self._refuse(scope, receive, send, problem)
            return
        client = scope.get("client")
        identity = client_identity(client[0] if client else None,
                                   b"x-forwarded-for" in headers or b"forwarded" in headers,
                                   self.rules.server_trusts_configured_proxies)
        scope = dict(scope)
        scope["headers"] = [(k, v) for k, v in scope.get("headers", []) if k.lower() != CLIENT_HEADER.encode()]
        scope["headers"].append((CLIENT_HEADER.encode(), identity.encode("latin-1", "replace")))
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        secure = guard_rules.secure_request(scope.get("scheme"), self.rules.tls,
                                            self.rules.server_trusts_configured_proxies)
        own_frame = guard_rules.own_frame(scope.get("path", "/"), self.rules.base_url)
        added = [] if browser else [(b"set-cookie", (f"{BROWSER_COOKIE}={secrets.token_urlsafe(32)}; Path=/; "
                                                     "HttpOnly; SameSite=Strict").encode("latin-1"))]

        async def send_guarded(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                headers = guard_rules.with_framing_headers([*message.get("headers", []), *added],
                                                           own_frame=own_frame)
                if own_frame:
                    headers = guard_rules.own_frame_caching(headers, scope.get("path", "/"),
                                                            scope.get("query_string", b"").decode("latin-1"))
                if secure:
                    headers = [(k, guard_rules.secure_cookie(v) if k.lower() == b"set-cookie" else v)
                               for k, v in headers]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_guarded)

    def _problem(self, scope: dict[str, Any], headers: dict[bytes, bytes], browser: str | None) -> str | None:
        """Why this request is refused (the response's text), or None when it may go on."""
        host = headers[b"host"].decode("latin-1") if b"host" in headers else None
        origin = headers[b"origin"].decode("latin-1") if b"origin" in headers else None
        problem = self.rules.problem or refusal(host, origin, self.rules.names)
        if problem is not None:
            return problem
        if (scope["type"] == "http" and guard_rules.framed(headers.get(b"sec-fetch-dest", b"").decode("latin-1"))
                and not self._own_frame(scope, headers)):
            return guard_rules.FRAMED_REFUSAL
        if (self.rules.signin_required and guard_rules.needs_signin(scope.get("path", "/"), self.rules.base_url)
                and not _signed_in(browser)):
            return guard_rules.SIGNIN_REFUSAL
        return None

    def _own_frame(self, scope: dict[str, Any], headers: dict[bytes, bytes]) -> bool:
        """A frame load of the dashboard's own component files, from one of its pages."""
        return guard_rules.own_frame(scope.get("path", "/"), self.rules.base_url,
                                     headers.get(b"sec-fetch-site", b"").decode("latin-1"))

    @staticmethod
    async def _refuse(scope: dict[str, Any], receive: Any, send: Any, problem: str) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # before accept: the handshake gets 403
            return
        body = (problem + "\n").encode()
        await send({"type": "http.response.start", "status": 403,
                    "headers": guard_rules.with_framing_headers([
                        (b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()),
                        (b"x-content-type-options", b"nosniff"), (b"cache-control", b"no-store")])})
        await send({"type": "http.response.body", "body": body})
