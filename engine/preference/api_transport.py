"""One HTTP(S) POST to addresses that were already checked (:func:`engine.permissions.outbound.checked_target`).

The connection goes to one of the target's addresses and never resolves the host name again, so what
was checked is what is reached (DNS rebinding cannot swap the address in between); TLS still verifies
the certificate against the host name. Redirects are not followed (a 3xx answer is returned like any
other status): a redirect must not carry the key to another host. Proxy variables are not used, for
the same reason: the address checked is the address connected to. Stdlib only.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from dataclasses import dataclass

from engine.permissions.outbound import Target


@dataclass(frozen=True)
class Reply:
    """A server's answer: the HTTP status and the body as text."""

    status: int
    text: str


class _PinnedHTTP(http.client.HTTPConnection):
    """Plain HTTP to ``address``; the Host header names ``host``."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """TLS to ``address``, the certificate checked against ``host`` (which SNI names too)."""

    def __init__(self, host: str, port: int, address: str, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._address = address
        self._tls = context

    def connect(self) -> None:
        raw = socket.create_connection((self._address, self.port), self.timeout)
        try:
            self.sock = self._tls.wrap_socket(raw, server_hostname=self.host)
        except BaseException:
            raw.close()
            raise


def _connection(target: Target, address: str, timeout: float) -> http.client.HTTPConnection:
    if target.scheme == "https":
        return _PinnedHTTPS(target.host, target.port, address, timeout, ssl.create_default_context())
    return _PinnedHTTP(target.host, target.port, address, timeout)


def post(target: Target, body: bytes, headers: dict[str, str], timeout: float) -> Reply:
    """POST ``body`` to ``target`` at the first of its addresses that accepts a connection.

    Raises ``OSError`` (``TimeoutError``, ``ConnectionError`` ...) or ``http.client.HTTPException`` when
    no address answers or the exchange breaks; any HTTP status comes back as a :class:`Reply`.
    """
    last: OSError | None = None
    for address in target.addresses:
        connection = _connection(target, address, timeout)
        try:
            try:
                connection.connect()
            except OSError as exc:  # refused, unreachable, timed out, a TLS failure: the next address may answer
                last = exc
                continue
            connection.request("POST", target.path, body=body, headers=headers)
            response = connection.getresponse()
            return Reply(int(response.status), response.read().decode("utf-8", errors="replace"))
        finally:
            connection.close()
    raise last or ConnectionError(f"{target.host} has no address to connect to")
