"""Who may use the dashboard: the address rule, password hashes and a limit on guessing.

Pure Python (hashlib, hmac, ipaddress): the sign-in page (``app/signin.py``) and the launcher
(``cooplab ui`` / ``cooplab up``, ``cooplab hash-password``) share it.

- Listening on this machine only (``127.0.0.1``, ``localhost`` or ``::1``) the dashboard stays open.
  Any other address, and an empty one (which means every interface), requires sign-in.
- The password is never stored: the ``COOPLAB_UI_PASSWORD_HASH`` setting holds a salted scrypt hash,
  ``scrypt:<n>:<r>:<p>:<salt hex>:<key hex>`` (no ``$``, so shells and compose files keep it as is).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

SETTING = "COOPLAB_UI_PASSWORD_HASH"
HASH_COMMAND = "cooplab hash-password"
OPEN_ADDRESSES = ("127.0.0.1", "::1")
MIN_PASSWORD_LENGTH = 8

_N, _R, _P, _SALT_BYTES, _KEY_BYTES = 2**15, 8, 1, 16, 32


def signin_required(address: str | None) -> bool:
    """Whether a dashboard listening on ``address`` must ask for a password (fail closed)."""
    address = (address or "").strip().strip("[]")
    if address.lower() == "localhost":
        return False
    try:
        return str(ipaddress.ip_address(address)) not in OPEN_ADDRESSES
    except ValueError:
        return True  # empty (every interface), a host name, or something unreadable


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=256 * r * n, dklen=_KEY_BYTES)


def hash_password(password: str, *, n: int = _N) -> str:
    """A salted scrypt hash of ``password`` in the form :func:`verify_password` reads."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise ValueError(f"the password must have at least {MIN_PASSWORD_LENGTH} characters")
    salt = os.urandom(_SALT_BYTES)
    return f"scrypt:{n}:{_R}:{_P}:{salt.hex()}:{_scrypt(password, salt, n, _R, _P).hex()}"


@dataclass(frozen=True)
class _Hash:
    n: int
    r: int
    p: int
    salt: bytes
    key: bytes


def _parse(stored: str) -> _Hash:
    parts = stored.strip().split(":")
    if len(parts) != 6 or parts[0] != "scrypt":
        raise ValueError("not of the form scrypt:<n>:<r>:<p>:<salt>:<key>")
    try:
        n, r, p = (int(x) for x in parts[1:4])
        salt, key = bytes.fromhex(parts[4]), bytes.fromhex(parts[5])
    except ValueError:
        raise ValueError("its numbers or hex digits are not readable") from None
    if not (2**10 <= n <= 2**20 and n & (n - 1) == 0 and 1 <= r <= 32 and 1 <= p <= 16):
        raise ValueError("its scrypt parameters are out of range")
    if len(salt) < 8 or len(key) != _KEY_BYTES:
        raise ValueError("its salt or key has the wrong length")
    return _Hash(n, r, p, salt, key)


def hash_problem(stored: str | None) -> str | None:
    """Why ``stored`` cannot be used to check passwords (None when it can)."""
    if not stored or not stored.strip():
        return f"no password is configured: {SETTING} is not set"
    try:
        _parse(stored)
    except ValueError as exc:
        return f"{SETTING} is not a hash made by `{HASH_COMMAND}` ({exc})"
    return None


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches the stored hash (a constant-time comparison; False if unreadable)."""
    try:
        parsed = _parse(stored)
    except ValueError:
        return False
    candidate = _scrypt(password, parsed.salt, parsed.n, parsed.r, parsed.p)
    return hmac.compare_digest(candidate, parsed.key)


def fingerprint(stored: str) -> str:
    """A short digest of the configured hash: a session signed in under another hash is signed out."""
    return hashlib.sha256(stored.strip().encode()).hexdigest()[:16]


class FailureLimiter:
    """At most ``max_failures`` failed sign-ins per ``window_s`` seconds per client; thread-safe."""

    def __init__(self, max_failures: int = 5, window_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_failures, self.window_s, self.clock = max_failures, window_s, clock
        self._failures: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, client: str) -> list[float]:
        now = self.clock()
        recent = [t for t in self._failures.get(client, []) if now - t < self.window_s]
        self._failures[client] = recent
        return recent

    def wait_s(self, client: str) -> float:
        """Seconds until ``client`` may try again (0 when it may now)."""
        with self._lock:
            recent = self._recent(client)
            if len(recent) < self.max_failures:
                return 0.0
            return max(0.0, recent[-self.max_failures] + self.window_s - self.clock())

    def failed(self, client: str) -> None:
        with self._lock:
            self._recent(client).append(self.clock())

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._failures.pop(client, None)
