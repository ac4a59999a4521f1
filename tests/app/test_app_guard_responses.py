"""What the server's guard (``app/guard.py``) adds to and refuses around Streamlit, driven as an ASGI app:
every response forbids framing (clickjacking), a page load into a frame is refused (but for the
dashboard's own live chart component, framed by its own pages), the Streamlit
endpoints that tell something (metrics, media, uploads, ...) serve signed-in browsers only when the
dashboard requires sign-in, and cookies get ``Secure`` when the request came over https."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from streamlit import config
from streamlit.web.server.starlette import starlette_routes as routes

from app.access import fingerprint, hash_password
from app.guard import HostGuard
from app.hosts import BROWSER_COOKIE
from app.signins import SIGN_INS

STORED = hash_password("correct horse battery staple", n=2**10)
BROWSER = "b" * 43
HOST = (b"host", b"127.0.0.1:8501")
GATED = ["/_stcore/metrics", "/_stcore/script-health-check", "/media/0a1b2c.png", "/_stcore/upload_file/s/f",
         "/_stcore/agent/interact", "/_stcore/agent/openapi.json", "/_stcore/bidi-components/x/y.js",
         "/component/x/index.html", "/app/static/data.csv", "/api/download/token/run1.log", "/_stcore/new-endpoint",
         "//_stcore/metrics", "/x/../_stcore/metrics", "/_STCORE/Metrics"]
OPEN = ["/", "/index.html", "/static/js/main.js", "/favicon.png", "/_stcore/health", "/_stcore/host-config",
        "/experiments"]


@pytest.fixture(autouse=True)
def no_sign_ins() -> None:
    SIGN_INS.clear()


@pytest.fixture
def wide(server_address, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboard on every interface with a password configured (sign-in required)."""
    server_address("0.0.0.0")
    monkeypatch.setenv("COOPLAB_UI_PASSWORD_HASH", STORED)


def answer(status: int = 200, headers: list[tuple[bytes, bytes]] | None = None):
    async def app(scope, receive, send) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.accept"})
            return
        await send({"type": "http.response.start", "status": status, "headers": list(headers or [])})
        await send({"type": "http.response.body", "body": b"ok"})
    return app


def through_guard(path: str = "/", headers: list[tuple[bytes, bytes]] = (), *, kind: str = "http",
                  scheme: str = "http", app: Any = None) -> list[dict]:
    """The messages the guard sends for one request (in front of ``app``, by default a 200)."""
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "websocket.connect"} if kind == "websocket" else {"type": "http.request", "body": b""}

    default_host = [] if any(name == b"host" for name, _ in headers) else [HOST]
    scope = {"type": kind, "path": path, "scheme": scheme, "headers": [*default_host, *headers],
             "client": ("127.0.0.1", 50000)}
    asyncio.run(HostGuard(app or answer())(scope, receive, send))
    return sent


def start_of(sent: list[dict]) -> dict:
    return next(m for m in sent if m["type"] == "http.response.start")


def header_values(start: dict, name: bytes) -> list[bytes]:
    return [v for k, v in start["headers"] if k.lower() == name]


def assert_not_frameable(start: dict) -> None:
    assert header_values(start, b"x-frame-options") == [b"DENY"], start["headers"]
    assert b"frame-ancestors 'none'" in header_values(start, b"content-security-policy"), start["headers"]


# ---- framing


def test_every_http_response_forbids_framing(wide) -> None:
    assert_not_frameable(start_of(through_guard("/")))
    assert_not_frameable(start_of(through_guard("/static/js/main.js", app=answer(304))))
    # an answer that allowed framing itself is overruled (two different X-Frame-Options would void both)
    assert_not_frameable(start_of(through_guard("/", app=answer(404, [(b"x-frame-options", b"SAMEORIGIN")]))))
    refused_host = start_of(through_guard("/", [(b"host", b"evil.test")]))
    assert refused_host["status"] == 403
    refused_signin = start_of(through_guard("/_stcore/metrics"))
    assert refused_signin["status"] == 403
    for start in (refused_host, refused_signin):
        assert_not_frameable(start)


@pytest.mark.parametrize(("dest", "site"), [("iframe", "cross-site"), ("frame", "cross-site"), ("embed", "same-site"),
                                          ("object", "cross-site"), ("fencedframe", "cross-site"),
                                          ("iframe", "same-origin")])  # 'none': not even the dashboard's own
def test_a_page_loaded_into_a_frame_is_refused(dest: str, site: str) -> None:
    sent = through_guard("/", [(b"sec-fetch-dest", dest.encode()), (b"sec-fetch-site", site.encode())])
    assert start_of(sent)["status"] == 403
    assert b"frame" in sent[-1]["body"]


LIVE_CHART = "/component/app.components.live_chart.live_chart/index.html"


@pytest.mark.parametrize("path", [LIVE_CHART, "/component/app.components.live_chart.live_chart/plotly.min.js"])
def test_the_dashboards_own_chart_frame_is_served_to_its_own_pages_only(path: str) -> None:
    """The live chart component is framed by the run page: a same-origin frame load is served, frameable
    by the dashboard's own pages only; from another site, or for any other component, it is refused."""
    own = start_of(through_guard(path, [(b"sec-fetch-dest", b"iframe"), (b"sec-fetch-site", b"same-origin")]))
    assert own["status"] == 200
    assert header_values(own, b"x-frame-options") == [b"SAMEORIGIN"], own["headers"]
    assert header_values(own, b"content-security-policy") == [b"frame-ancestors 'self'"], own["headers"]
    for site in (b"cross-site", b"same-site", b"none"):
        assert start_of(through_guard(path, [(b"sec-fetch-dest", b"iframe"), (b"sec-fetch-site", site)]))["status"] == 403
    other = "/component/some.other.component/index.html"
    assert start_of(through_guard(other, [(b"sec-fetch-dest", b"iframe"), (b"sec-fetch-site", b"same-origin")])
                    )["status"] == 403
    assert_not_frameable(start_of(through_guard(other)))


def test_the_chart_frames_scripts_are_kept_by_the_browser_when_named_by_version() -> None:
    """The component's page names its scripts with their contents' version (``?v=``): the browser keeps
    them (one 4.8 MB plotly.min.js download for every chart frame); the page itself is asked again."""
    script = "/component/app.components.live_chart.live_chart/plotly.min.js"
    public = answer(200, [(b"cache-control", b"public")])

    def cache(path: str, query: bytes) -> list[bytes]:
        sent: list[dict] = []

        async def send(message: dict) -> None:
            sent.append(message)

        async def receive() -> dict:
            return {"type": "http.request", "body": b""}

        scope = {"type": "http", "path": path, "query_string": query, "scheme": "http", "headers": [HOST],
                 "client": ("127.0.0.1", 50000)}
        asyncio.run(HostGuard(public)(scope, receive, send))
        return header_values(start_of(sent), b"cache-control")

    assert cache(script, b"v=0123abcd") == [b"public, max-age=31536000, immutable"]
    assert cache(script, b"") == [b"public"]  # not named by version: as Streamlit serves it
    assert cache(LIVE_CHART, b"v=0123abcd") == [b"public"]
    assert cache("/static/js/main.js", b"v=1") == [b"public"]  # only the dashboard's own component


def test_the_chart_frame_still_needs_a_signed_in_browser(wide) -> None:
    sent = through_guard(LIVE_CHART, [(b"sec-fetch-dest", b"iframe"), (b"sec-fetch-site", b"same-origin")])
    assert start_of(sent)["status"] == 403 and b"Sign in" in sent[-1]["body"]


def test_a_page_loaded_as_a_document_or_without_fetch_metadata_is_served() -> None:
    assert start_of(through_guard("/", [(b"sec-fetch-dest", b"document")]))["status"] == 200
    assert start_of(through_guard("/"))["status"] == 200  # curl, older browsers
    websocket = through_guard("/_stcore/stream", [(b"sec-fetch-dest", b"websocket")], kind="websocket")
    assert websocket == [{"type": "websocket.accept"}]


# ---- endpoints that serve signed-in browsers only


@pytest.mark.parametrize("path", GATED)
def test_streamlit_endpoints_that_tell_something_need_a_signed_in_browser(wide, path: str) -> None:
    cookie = (b"cookie", f"{BROWSER_COOKIE}={BROWSER}".encode())
    refused = through_guard(path, [cookie])
    assert start_of(refused)["status"] == 403 and b"Sign in" in refused[-1]["body"]
    SIGN_INS.sign_in(fingerprint(STORED), BROWSER)
    assert start_of(through_guard(path, [cookie]))["status"] == 200
    assert start_of(through_guard(path, [(b"cookie", f"{BROWSER_COOKIE}={'o' * 43}".encode())]))["status"] == 403


@pytest.mark.parametrize("path", OPEN)
def test_the_pages_the_sign_in_form_needs_stay_open(wide, path: str) -> None:
    assert start_of(through_guard(path))["status"] == 200


def test_the_websocket_stays_open_for_the_sign_in_form(wide) -> None:
    assert through_guard("/_stcore/stream", kind="websocket") == [{"type": "websocket.accept"}]
    assert through_guard("/_stcore/other", kind="websocket") == [{"type": "websocket.close", "code": 1008}]


def test_sign_out_and_a_password_change_close_the_endpoints(wide, monkeypatch) -> None:
    cookie = (b"cookie", f"{BROWSER_COOKIE}={BROWSER}".encode())
    token = SIGN_INS.sign_in(fingerprint(STORED), BROWSER)
    assert start_of(through_guard("/_stcore/metrics", [cookie]))["status"] == 200
    SIGN_INS.sign_out(token)
    assert start_of(through_guard("/_stcore/metrics", [cookie]))["status"] == 403
    SIGN_INS.sign_in(fingerprint(STORED), BROWSER)
    monkeypatch.setenv("COOPLAB_UI_PASSWORD_HASH", hash_password("a brand new password", n=2**10))
    assert start_of(through_guard("/_stcore/metrics", [cookie]))["status"] == 403


@pytest.mark.parametrize("path", GATED)
def test_on_this_machine_only_nothing_needs_sign_in(path: str) -> None:
    assert start_of(through_guard(path))["status"] == 200


def test_the_gate_names_streamlits_own_routes() -> None:
    from app.guard_rules import needs_signin

    for route in (routes.ROUTE_METRICS, routes.ROUTE_SCRIPT_HEALTH, routes.BASE_ROUTE_MEDIA + "/x.png",
                  routes.BASE_ROUTE_UPLOAD_FILE + "/s/f", routes.BASE_ROUTE_COMPONENT + "/c/x.js",
                  routes.BASE_ROUTE_APP_STATIC + "/x", routes.BASE_ROUTE_CORE + "/bidi-components/c/x.js"):
        assert needs_signin("/" + route), route
    for route in (routes.ROUTE_HEALTH, routes.ROUTE_HOST_CONFIG, "_stcore/stream"):
        assert not needs_signin("/" + route), route
    assert needs_signin("/dash/_stcore/metrics", "dash") and needs_signin("/dash/media/x", "/dash/")
    assert not needs_signin("/dash/_stcore/health", "dash")


# ---- Secure cookies


def set_cookies(sent: list[dict]) -> list[str]:
    return [v.decode() for v in header_values(start_of(sent), b"set-cookie")]


STREAMLITS_COOKIE = [(b"set-cookie", b"_streamlit_xsrf=abc; Path=/; SameSite=Lax")]


def test_cookies_are_not_secure_over_plain_http() -> None:
    cookies = set_cookies(through_guard("/", app=answer(200, STREAMLITS_COOKIE)))
    assert len(cookies) == 2 and not [c for c in cookies if "Secure" in c]


def test_cookies_are_secure_when_the_server_speaks_tls() -> None:
    previous = config.get_option("server.sslCertFile")
    config.set_option("server.sslCertFile", "/etc/ssl/dashboard.pem")
    try:
        cookies = set_cookies(through_guard("/", scheme="https", app=answer(200, STREAMLITS_COOKIE)))
    finally:
        config.set_option("server.sslCertFile", previous)
    assert len(cookies) == 2 and all(c.endswith("; Secure") for c in cookies), cookies
    assert [c for c in cookies if c.startswith(f"{BROWSER_COOKIE}=") and "HttpOnly; SameSite=Strict" in c]


def test_https_from_a_configured_proxy_makes_cookies_secure(monkeypatch) -> None:
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "10.0.0.2")  # how `cooplab ui` starts the server
    monkeypatch.setenv("COOPLAB_UI_TRUSTED_PROXIES", "10.0.0.2")
    assert all("; Secure" in c for c in set_cookies(through_guard("/", scheme="https")))


def test_https_believed_from_a_proxy_that_is_not_configured_does_not(monkeypatch) -> None:
    # `streamlit run` by hand: uvicorn believes X-Forwarded-Proto from any loopback peer
    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)
    monkeypatch.setenv("COOPLAB_UI_TRUSTED_PROXIES", "")
    assert not [c for c in set_cookies(through_guard("/", scheme="https")) if "Secure" in c]
