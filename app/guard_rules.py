"""What the server's guard (``app/guard.py``) adds to responses and which requests it holds back (pure).

- **Framing.** Every HTTP response carries ``X-Frame-Options: DENY`` and ``Content-Security-Policy:
  frame-ancestors 'none'``: no page (another site's, nor the dashboard's own) may show the dashboard
  in a frame, where it could be overlaid to trick clicks (clickjacking). A page load that says it is
  for a frame (``Sec-Fetch-Dest: iframe``, ``frame``, ``embed``, ``object``, ``fencedframe``, which a
  page cannot forge) is refused outright. The websocket cannot be judged that way: its
  ``Sec-Fetch-Site`` names the page that opened it (the framed dashboard itself: ``same-origin``) and
  its ``Sec-Fetch-Dest`` is ``websocket``, framed or not; since no framed page loads, none opens it.
- **The dashboard's own chart frames.** The one exception: the files of the dashboard's own live chart
  component (``component/app.components.live_chart.live_chart/``, static HTML and JS that draw a chart
  from what the page posts them) are shown by the dashboard's pages in a frame, so a frame load of them
  from the same origin (``Sec-Fetch-Site: same-origin``) is served, with ``X-Frame-Options:
  SAMEORIGIN`` and ``frame-ancestors 'self'``: only a dashboard page may frame them, and no page
  may frame the dashboard, so no other site reaches them.
- **Endpoints for signed-in browsers.** When the dashboard requires sign-in, the Streamlit endpoints
  that tell or serve something beyond the sign-in form answer only a browser whose
  ``cooplab_browser`` cookie has a valid sign-in (``app/signins.py``): everything under
  ``_stcore/`` but the health check, the host config and the websocket (the sign-in page needs those;
  they tell nothing: ``ok`` and Streamlit's fixed client settings), plus ``media/``, ``component/``,
  ``app/static/`` and the downloads (``api/download/``). The rest is the frontend's own code.
- **Secure cookies.** Over https, every cookie set (the guard's and Streamlit's) gets ``Secure``;
  https is what the server saw when it speaks TLS itself, or what a proxy listed in
  ``COOPLAB_UI_TRUSTED_PROXIES`` said in ``X-Forwarded-Proto`` (when the server believes exactly those).
"""

from __future__ import annotations

import posixpath

FRAMING_HEADERS = ((b"x-frame-options", b"DENY"), (b"content-security-policy", b"frame-ancestors 'none'"))
OWN_FRAME_HEADERS = ((b"x-frame-options", b"SAMEORIGIN"), (b"content-security-policy", b"frame-ancestors 'self'"))
OWN_FRAMES = ("component/app.components.live_chart.live_chart/",)
"""Paths (after the base URL, lower case) of the dashboard's own components, which its pages frame."""
FRAME_DESTINATIONS = frozenset({"iframe", "frame", "embed", "object", "fencedframe"})
OPEN_CORE = frozenset({"health", "host-config", "stream"})
SIGNED_IN_PREFIXES = ("media/", "component/", "app/static/", "api/download/")

FRAMED_REFUSAL = ("This dashboard is not shown inside another page (a frame): open it in a tab of its own, "
                  "at its own address.")
SIGNIN_REFUSAL = ("Sign in to the dashboard first: this address serves only browsers that are signed in "
                  "(open the dashboard's page and sign in, in this browser).")


def framed(sec_fetch_dest: str | None) -> bool:
    """Whether a request says it loads a page into a frame (its ``Sec-Fetch-Dest``)."""
    return (sec_fetch_dest or "").strip().lower() in FRAME_DESTINATIONS


def with_framing_headers(headers: list[tuple[bytes, bytes]], *, own_frame: bool = False) -> list[tuple[bytes, bytes]]:
    """A response's headers with :data:`FRAMING_HEADERS` (:data:`OWN_FRAME_HEADERS` for one of
    :func:`own_frame`'s files); an ``X-Frame-Options`` of its own is replaced (two different ones would
    void both), a policy of its own is kept (the browser applies both)."""
    kept = [(k, v) for k, v in headers if k.lower() != b"x-frame-options"]
    return [*kept, *(OWN_FRAME_HEADERS if own_frame else FRAMING_HEADERS)]


IMMUTABLE = b"public, max-age=31536000, immutable"


def own_frame_caching(headers: list[tuple[bytes, bytes]], path: str, query: str) -> list[tuple[bytes, bytes]]:
    """A response's headers for a file of :data:`OWN_FRAMES`: a script asked for by its contents'
    version (``?v=``, as the component's page names them) may be kept by the browser for good."""
    if path.lower().endswith(".js") and query.startswith("v="):
        return [*[(k, v) for k, v in headers if k.lower() != b"cache-control"], (b"cache-control", IMMUTABLE)]
    return headers


def _relative(path: str, base_url: str | None) -> str:
    normal = posixpath.normpath("/" + path).lstrip("/").lower()
    base = (base_url or "").strip("/").lower()
    if base and (normal == base or normal.startswith(base + "/")):
        normal = normal[len(base):].lstrip("/")
    return normal


def own_frame(path: str, base_url: str | None = "", sec_fetch_site: str | None = None) -> bool:
    """Whether ``path`` is a file of one of the dashboard's own framed components (:data:`OWN_FRAMES`),
    requested from the same origin when ``sec_fetch_site`` is given."""
    if sec_fetch_site is not None and sec_fetch_site.strip().lower() != "same-origin":
        return False
    return _relative(path, base_url).startswith(OWN_FRAMES)


def needs_signin(path: str, base_url: str | None = "") -> bool:
    """Whether a request for ``path`` must come from a signed-in browser when the dashboard requires
    sign-in (see the module docstring). ``base_url`` is Streamlit's ``server.baseUrlPath``. The path is
    normalised (``//``, ``.``, ``..``, letter case) so a spelling the router might still match is judged
    the same way."""
    normal = _relative(path, base_url)
    head, _, rest = normal.partition("/")
    if head == "_stcore":
        return rest not in OPEN_CORE
    return (normal + "/").startswith(SIGNED_IN_PREFIXES)


def secure_request(scheme: str | None, server_tls: bool, server_trusts_configured_proxies: bool) -> bool:
    """Whether the request came over https (see the module docstring). ``scheme`` is what the ASGI server
    reports: with proxy headers believed, a trusted proxy's ``X-Forwarded-Proto``."""
    if scheme not in ("https", "wss"):
        return False
    return server_tls or server_trusts_configured_proxies


def secure_cookie(value: bytes) -> bytes:
    """A ``Set-Cookie`` value with the ``Secure`` attribute (unchanged when it has one)."""
    attributes = [part.strip().lower() for part in value.split(b";")[1:]]
    return value if b"secure" in attributes else value + b"; Secure"
