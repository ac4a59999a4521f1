"""Which requests the dashboard answers: the Host/Origin rule against DNS rebinding, and who a client is.

Pure Python (ipaddress, urllib): the server's guard (``app/guard.py``) and the sign-in page
(``app/signin.py``) share it; the rules are in docs/dashboard.md ("Host check").

- **Host.** A web page whose name an attacker re-points at 127.0.0.1 (DNS rebinding) reaches a
  loopback server with its own name in ``Host``: ``Host: evil.test:8501``. So a name must be one the
  dashboard knows: ``localhost``, the address it listens on, this machine's name when it listens
  beyond loopback, and the names an operator lists in ``COOPLAB_UI_ALLOWED_HOSTS``. An IP address in
  ``Host`` is always accepted: a browser sends one only when it connected to that address itself, and
  no DNS answer can change where an address points. The port is not compared (a proxy may change it).
- **Origin.** A page may talk to the dashboard only from the dashboard's own origin: when the browser
  sends ``Origin``, its ``host[:port]`` must equal ``Host`` (what Streamlit's websocket also demands).
- **Client.** The address a sign-in attempt is counted against is the connection's peer, unless a
  trusted proxy is configured (``COOPLAB_UI_TRUSTED_PROXIES``).
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

BROWSER_COOKIE = "cooplab_browser"
CLIENT_HEADER = "x-cooplab-client"
ALLOWED_HOSTS_SETTING = "COOPLAB_UI_ALLOWED_HOSTS"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_LISTEN = ("", "0.0.0.0", "::")
SHARED_FORWARDED_CLIENT = "forwarded"

_NAME = re.compile(r"^(\*\.)?[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*$")
_COOKIE_VALUE = re.compile(r"^[A-Za-z0-9_-]{32,64}$")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def parse_allowed_hosts(text: str | None) -> tuple[str, ...]:
    """The names in ``COOPLAB_UI_ALLOWED_HOSTS`` (lower case); a bad entry raises ValueError naming it."""
    names = []
    for raw in (text or "").split(","):
        name = raw.strip().lower().rstrip(".")
        if not name:
            continue
        if not (_NAME.match(name) or _is_ip(name.strip("[]"))):
            raise ValueError(f"{ALLOWED_HOSTS_SETTING} has {raw.strip()!r}, which is not a host name: list bare "
                             "names such as dashboard.example.com or *.example.com, without scheme, port or path")
        names.append(name.strip("[]"))
    return tuple(names)


def allowed_names(listen_address: str | None, extra: tuple[str, ...] = (), machine_names: tuple[str, ...] = ()
                  ) -> frozenset[str]:
    """The host names a dashboard listening on ``listen_address`` answers to (IP addresses always are).

    ``machine_names`` (this machine's host name) count only when the dashboard listens beyond loopback.
    """
    from app.access import signin_required

    address = (listen_address or "").strip().strip("[]").lower()
    names = set(LOOPBACK_NAMES) | set(extra)
    if address not in WILDCARD_LISTEN:
        names.add(address)
    if signin_required(address):
        names.update(n.lower().rstrip(".") for n in machine_names if n)
    return frozenset(names)


def hostname_of(host_header: str | None) -> str | None:
    """The name in a ``Host`` header (lower case, no port, no trailing dot); None when unreadable."""
    if not host_header or any(c in host_header for c in "/?#@\\ \t"):
        return None
    try:
        parts = urlsplit(f"//{host_header}")
        _ = parts.port  # a port must be a number in range
    except ValueError:
        return None
    name = (parts.hostname or "").rstrip(".")
    return name or None


def host_allowed(host_header: str | None, names: frozenset[str]) -> bool:
    """Whether a request with this ``Host`` is for this dashboard (see the module docstring)."""
    name = hostname_of(host_header)
    if name is None:
        return False
    if _is_ip(name) or name in names:
        return True
    return any(pattern.startswith("*.") and name.endswith(pattern[1:]) for pattern in names)


def origin_allowed(origin: str | None, host_header: str | None) -> bool:
    """Whether ``Origin`` (when the browser sent one) is the dashboard's own origin."""
    if origin is None:
        return True  # not a cross-origin browser request (a link, a typed URL, curl)
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.netloc or not host_header:
        return False  # includes "null" (sandboxed frames, file pages)
    return parts.netloc.lower() == host_header.strip().lower()


def refusal(host_header: str | None, origin: str | None, names: frozenset[str]) -> str | None:
    """Why a request is refused (a message for the response), or None when it may go on."""
    if not host_allowed(host_header, names):
        shown = (host_header or "")[:100]
        return (f"This CoopLab dashboard does not answer to the host name {shown!r}. Open it by an address "
                f"it knows (for example http://127.0.0.1), or list the name in {ALLOWED_HOSTS_SETTING} where "
                "the dashboard runs.")
    if not origin_allowed(origin, host_header):
        return (f"A page from {origin[:100]!r} may not use this dashboard: requests must come from the "
                "dashboard's own pages.")
    return None


def browser_id(value: object) -> str | None:
    """The browser cookie's value when it has the form the server gives it, else None."""
    return value if isinstance(value, str) and _COOKIE_VALUE.match(value) else None


def client_identity(peer: str | None, has_forwarded_header: bool, server_trusts_configured_proxies: bool) -> str:
    """The address sign-in attempts are counted against.

    ``peer`` is what the ASGI server reports. When the server was started believing exactly the
    configured proxies (``cooplab ui`` / ``cooplab up`` see to it), that is the real client. Started
    any other way, the server may have taken ``peer`` from a forged ``X-Forwarded-For``, so every
    request carrying one counts as one shared client.
    """
    if has_forwarded_header and not server_trusts_configured_proxies:
        return SHARED_FORWARDED_CLIENT
    return peer or "local"


def same_address_list(a: str | None, b: str | None) -> bool:
    """Whether two comma-separated address lists (uvicorn's FORWARDED_ALLOW_IPS form) hold the same items."""
    def items(text: str | None) -> set[str]:
        return {x.strip() for x in (text or "").split(",") if x.strip()}

    return items(a) == items(b)
