"""Where a run may send HTTP requests, and which API key may go where: the operator's API hosts.

A run config names a URL (``comparator_api_url``) and, through ``comparator_api_key_env``, one of
the operator's ``COOPLAB_API_KEY_*`` variables. Anyone who may submit a run config could otherwise
send that key, or the worker's requests, anywhere: to a listener of theirs, to Redis on loopback, to
a cloud metadata address. The operator therefore lists hosts (the ``COOPLAB_API_HOSTS`` setting,
read in ``jobs.settings`` and passed in :class:`engine.permissions.operator.OperatorPermissions`; the engine reads
no environment):

- ``COOPLAB_API_KEY_NAME=host[:port]`` binds that key to the host; repeat the variable for more
  hosts. A key is sent only to a host bound to it;
- ``host[:port]`` alone lists a host a run may reach without a key.

Entries are separated by commas, e.g.
``COOPLAB_API_HOSTS=COOPLAB_API_KEY_OPENAI=api.openai.com,COOPLAB_API_KEY_LAB=llm.lab.internal:8000``.
A host is matched as the URL writes it (a name, an IPv4 address, or an IPv6 address in brackets),
without case; an entry without a port matches the scheme's default port (443 for https, 80 for http).

A URL is then accepted when (:func:`url_problem`, :func:`address_problem`):

- its scheme is ``https``, or ``http`` to a listed host (``file``, ``gopher``, ``ftp`` ... never);
- it carries no user info (``user:password@``);
- a key from a variable goes only to a host bound to that variable;
- an unlisted host is public: every address its name resolves to is a global unicast address (no
  loopback, private, link-local, site-local, carrier-grade NAT, multicast, reserved or unspecified
  address). An IPv6 address that carries an IPv4 address a router or this host may turn into an IPv4
  connection is judged by that IPv4 address: IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible
  ``::a.b.c.d`` (deprecated: refused even when public), the NAT64 prefix ``64:ff9b::/96`` and 6to4
  ``2002::/16`` (the IPv4 address in bits 16-47). Teredo ``2001::/32`` and the local-use NAT64 prefix
  ``64:ff9b:1::/48`` are refused whole. A listed host may be private (the operator vouched for it).

The connection goes to an address that was checked (:func:`checked_target`), so a name that
resolves to a public address when checked and to 127.0.0.1 a moment later (DNS rebinding) cannot
redirect the request: the client connects to the checked address, never resolves the name again.

The listing travels in :class:`engine.permissions.operator.OperatorPermissions` (``api_hosts``); it is None
for a script using the engine as a library, as CoMLRL's users do: the API client then sends where its
caller says. Every CoopLab process (dashboard, CLI, workers) sets it, an empty listing by default; the
pre-flight checks and :func:`engine.build.run.run_training` treat None as an empty listing.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

SETTING = "COOPLAB_API_HOSTS"
DEFAULT_PORTS = {"http": 80, "https": 443}
_VARIABLE = re.compile(r"[A-Z][A-Z0-9_]*")
_HOST_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")
# IPv6 ranges that carry an IPv4 address a router or this host may turn into an IPv4 connection
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
# IPv6 ranges refused whole, whatever this Python's ipaddress tables say about them
_REFUSED_V6 = (
    (ipaddress.ip_network("fec0::/10"), "a site-local address"),
    (ipaddress.ip_network("2001::/32"), "a Teredo address"),
    (ipaddress.ip_network("64:ff9b:1::/48"), "a local-use NAT64 address"),
)

Resolver = Callable[[str, int], list[str]]


class OutboundRefused(ValueError):
    """A request the operator's API hosts do not allow; the message says what to change."""


@dataclass(frozen=True, order=True)
class Endpoint:
    """A host as a URL writes it (lower case, IPv6 without brackets) and a port (None: the scheme's default)."""

    host: str
    port: int | None = None

    def matches(self, host: str, port: int, default_port: int) -> bool:
        """Whether a request to ``host``:``port`` (``default_port`` is its scheme's) is this entry."""
        return self.host == host and (self.port if self.port is not None else default_port) == port

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"


@dataclass(frozen=True)
class ApiHosts:
    """The operator's listing: hosts reachable without a key, and each key variable's hosts."""

    open: frozenset[Endpoint] = frozenset()
    keys: Mapping[str, frozenset[Endpoint]] = field(default_factory=dict)

    def listed(self, host: str, port: int, default_port: int) -> bool:
        """Whether ``host``:``port`` is listed at all (alone or for some key)."""
        entries = set(self.open).union(*self.keys.values()) if self.keys else set(self.open)
        return any(e.matches(host, port, default_port) for e in entries)

    def bound(self, variable: str, host: str, port: int, default_port: int) -> bool:
        """Whether the key in ``variable`` may be sent to ``host``:``port``."""
        return any(e.matches(host, port, default_port) for e in self.keys.get(variable, ()))

    def hosts_of(self, variable: str) -> list[str]:
        """The hosts ``variable``'s key may go to, as written in the setting."""
        return [str(e) for e in sorted(self.keys.get(variable, ()))]

    def __str__(self) -> str:
        entries = [f"{v}={e}" for v in sorted(self.keys) for e in sorted(self.keys[v])]
        return ",".join(entries + [str(e) for e in sorted(self.open)])


def normalise_host(host: str) -> str:
    """``host`` as entries and URLs are compared: lower case, no brackets, no trailing dot; an IP
    address in its canonical form."""
    text = str(host).strip().lower().removeprefix("[").removesuffix("]").rstrip(".")
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text


def parse_endpoint(text: str) -> Endpoint:
    """``host``, ``host:port``, ``[ipv6]`` or ``[ipv6]:port`` as an :class:`Endpoint`; ValueError else."""
    raw = text.strip()
    parts = urllib.parse.urlsplit(f"//{raw}")
    try:
        port = parts.port
    except ValueError:
        port = -1
    host = normalise_host(parts.hostname or "")
    shape_ok = bool(host) and "@" not in raw and "/" not in raw and not parts.query and not parts.fragment
    is_ip = _is_ip(host)
    if ":" in host and not raw.startswith("["):
        shape_ok = False  # an IPv6 address needs brackets, else its colons read as a port
    if not shape_ok or port == -1 or port == 0 or not (is_ip or _HOST_NAME.fullmatch(host)):
        raise ValueError(f"{raw!r} is not a host or host:port (IPv6 in brackets: [fd00::1]:8000)")
    return Endpoint(host, port)


def parse_api_hosts(text: str | Iterable[str] | None) -> ApiHosts:
    """The ``COOPLAB_API_HOSTS`` setting (see the module docstring) as :class:`ApiHosts`.

    Raises ``ValueError`` naming the entry that is neither ``VARIABLE=host[:port]`` nor ``host[:port]``.
    """
    items = (text or "").split(",") if isinstance(text, str) or text is None else list(text)
    open_hosts: set[Endpoint] = set()
    keys: dict[str, set[Endpoint]] = {}
    for item in items:
        entry = str(item).strip()
        if not entry:
            continue
        variable, sep, host = entry.partition("=")
        try:
            endpoint = parse_endpoint(host if sep else entry)
        except ValueError as exc:
            raise ValueError(f"{SETTING} entry {entry!r}: {exc}; write VARIABLE=host[:port] to bind a key, or "
                             f"host[:port] for a host reachable without one") from None
        if not sep:
            open_hosts.add(endpoint)
            continue
        variable = variable.strip()
        if not _VARIABLE.fullmatch(variable):
            raise ValueError(f"{SETTING} entry {entry!r}: {variable!r} is not an environment variable name (a run "
                             f"names its key as COOPLAB_API_KEY_...)")
        keys.setdefault(variable, set()).add(endpoint)
    return ApiHosts(frozenset(open_hosts), {v: frozenset(e) for v, e in keys.items()})


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def address_kind(address: str) -> str | None:
    """Why ``address`` is not a public unicast address ("a loopback address", ...), or None when it is."""
    ip = ipaddress.ip_address(normalise_host(address.split("%", 1)[0]))
    if isinstance(ip, ipaddress.IPv6Address):
        return _ipv6_kind(ip)
    return _plain_kind(ip)


def _ipv6_kind(ip: ipaddress.IPv6Address) -> str | None:
    """:func:`address_kind` of an IPv6 address: an embedded IPv4 address judged as itself first."""
    if ip.sixtofour is not None:
        kind = _plain_kind(ip.sixtofour)
        return f"{kind} inside 6to4" if kind else None
    compatible = ip in _IPV4_COMPATIBLE and int(ip) > 1  # :: and ::1 are themselves
    if ip.ipv4_mapped or ip in _NAT64 or compatible:
        kind = _plain_kind(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        if kind:
            return f"{kind} inside IPv6"
        return "a deprecated IPv4-compatible address" if compatible else None
    refused = next((kind for network, kind in _REFUSED_V6 if ip in network), None)
    return refused or _plain_kind(ip)


def _plain_kind(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    checks = (("an unspecified", ip.is_unspecified), ("a loopback", ip.is_loopback),
              ("a link-local", ip.is_link_local), ("a multicast", ip.is_multicast), ("a reserved", ip.is_reserved),
              ("a private", ip.is_private), ("a non-global", not ip.is_global))
    return next((f"{kind} address" for kind, hit in checks if hit), None)


@dataclass(frozen=True)
class Target:
    """A checked request target: scheme, host (as written), port, path with query, and the addresses to
    connect to (checked ones: the connection never resolves the name again)."""

    scheme: str
    host: str
    port: int
    path: str
    addresses: tuple[str, ...]


def _split(url: str) -> tuple[urllib.parse.SplitResult, str, int, int]:
    """The URL's parts, normalised host, port and its scheme's default port; OutboundRefused when malformed."""
    parts = urllib.parse.urlsplit(str(url).strip())
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        shown = scheme + "://" if scheme else "no scheme"
        raise OutboundRefused(f"requests go to https:// addresses (http:// only to a host the operator lists in "
                              f"{SETTING}); got {shown}")
    try:
        port = parts.port
    except ValueError:
        raise OutboundRefused("the URL's port is not a number from 1 to 65535") from None
    host = normalise_host(parts.hostname or "")
    if not host:
        raise OutboundRefused(f"the URL names no host; write {scheme}://host/path")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise OutboundRefused("the URL carries user info (user:password@): a run config is stored, so credentials "
                              "do not belong in it; the operator binds a COOPLAB_API_KEY_* variable to the host")
    default = DEFAULT_PORTS[scheme]
    return parts, host, port or default, default


def _listing_hint(host: str, port: int, default: int, variable: str | None = None) -> str:
    entry = host if ":" not in host else f"[{host}]"
    entry = entry if port == default else f"{entry}:{port}"
    return f"{variable}={entry}" if variable else entry


def url_problem(url: str, hosts: ApiHosts | None, *, key_variable: str | None = None,
                has_key: bool = False) -> str | None:
    """What the operator's ``hosts`` (None: an empty listing) refuse about a request to ``url``, or None.

    ``key_variable`` names the variable whose key the request carries; ``has_key`` says a key is sent at
    all (a library caller's own key needs no binding, only an allowed host). Checks the scheme, the user
    info, the key's binding, http to listed hosts only, and an address written in the URL; a name is
    checked once resolved (:func:`address_problem`).
    """
    hosts = hosts or ApiHosts()
    try:
        parts, host, port, default = _split(url)
    except OutboundRefused as exc:
        return str(exc)
    listed = hosts.listed(host, port, default)
    shown = _listing_hint(host, port, default)
    if key_variable is not None and not hosts.bound(key_variable, host, port, default):
        bound = hosts.hosts_of(key_variable)
        where = f"it is bound to {', '.join(bound)}" if bound else f"{SETTING} binds it to no host"
        return (f"the key in {key_variable} is not sent to {shown}: {where}. An operator who trusts {shown} with "
                f"that key adds {_listing_hint(host, port, default, key_variable)} to the {SETTING} setting of "
                f"the dashboard and the workers; or point the URL at a host bound to {key_variable}")
    kind = address_kind(host) if _is_ip(host) and not listed else None
    if kind:
        return f"{host} is {kind}, reachable only when the operator lists it in {SETTING} (e.g. {SETTING}={shown})"
    if parts.scheme.lower() == "http" and not listed:
        return (f"plain http:// to {shown} is refused{' (it would carry the key unencrypted)' if has_key else ''}: "
                f"use https://, or an operator lists the host in {SETTING} (e.g. {SETTING}={shown})")
    return None


def address_problem(url: str, hosts: ApiHosts | None, addresses: Iterable[str]) -> str | None:
    """Why ``url``'s host may not be reached at ``addresses`` (what its name resolved to), or None: an
    unlisted host must resolve to public addresses only, every one of them."""
    hosts = hosts or ApiHosts()
    _parts, host, port, default = _split(url)
    if hosts.listed(host, port, default):
        return None
    found = list(addresses)
    if not found:
        return f"{host} resolves to no address"
    for address in found:
        kind = address_kind(address)
        if kind:
            shown = _listing_hint(host, port, default)
            return (f"{host} resolves to {address}, {kind}; a run reaches such an address only when the operator "
                    f"lists the host in {SETTING} (e.g. {SETTING}={shown})")
    return None


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to for a TCP connection to ``port`` (OSError when it does not)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    out: list[str] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = str(sockaddr[0])
        if address not in out:
            out.append(address)
    return out


def checked_target(url: str, hosts: ApiHosts | None, *, key_variable: str | None = None, has_key: bool = False,
                   resolver: Resolver = resolve, check: bool = True) -> Target:
    """Resolve ``url``'s host once and check it (:func:`url_problem`, :func:`address_problem`); the
    :class:`Target` holds the checked addresses to connect to. ``check=False`` (no operator listing in
    this process) resolves without checking. OutboundRefused when refused; OSError when the name does
    not resolve."""
    if check:
        problem = url_problem(url, hosts, key_variable=key_variable, has_key=has_key)
        if problem:
            raise OutboundRefused(problem)
    parts, host, port, _default = _split(url)
    addresses = [host] if _is_ip(host) else resolver(host, port)
    if check:
        problem = address_problem(url, hosts, addresses)
        if problem:
            raise OutboundRefused(problem)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(parts.scheme.lower(), host, port, path, tuple(addresses))


__all__ = [
    "SETTING", "ApiHosts", "Endpoint", "OutboundRefused", "Target", "address_kind", "address_problem",
    "checked_target", "normalise_host", "parse_api_hosts", "parse_endpoint", "resolve",
    "url_problem",
]
