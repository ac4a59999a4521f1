"""Who may use the dashboard: the address rule, password hashes and the limits on guessing.

Pure Python (hashlib, hmac, ipaddress): the sign-in page (``app/signin.py``) and the launcher
(``cooplab ui`` / ``cooplab up``, ``cooplab hash-password``) share it.

- Listening on this machine only (``127.0.0.1``, ``localhost`` or ``::1``) the dashboard stays open.
  Any other address, and an empty one (which means every interface), requires sign-in.
- The password is never stored: the ``COOPLAB_UI_PASSWORD_HASH`` setting holds a salted scrypt hash,
  ``scrypt:<n>:<r>:<p>:<salt hex>:<key hex>`` (no ``$``, so shells and compose files keep it as is).
- Guessing is limited per client, per browser and for the account, with backoff
  (:class:`SigninLimiter`); which host names the dashboard answers to is ``app/hosts.py``.
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


IPV6_CLIENT_PREFIX = 64


def client_bucket(client: str) -> str:
    """The client a sign-in attempt from ``client`` counts against: an IPv4 address as it is, an IPv6
    address as its /64 (one home or host is handed a whole /64, so rotating addresses inside it buys no
    guesses), an IPv4-mapped IPv6 address as the IPv4 address; anything else (``forwarded``,
    ``local``) as it is."""
    try:
        address = ipaddress.ip_address(client.strip().strip("[]"))
    except ValueError:
        return client
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, IPV6_CLIENT_PREFIX), strict=False))
    return str(address)


@dataclass
class _Bucket:
    """Failed sign-ins counted against one key: consecutive failures, the last one, attempts in flight."""

    failures: int = 0
    last: float = 0.0
    in_flight: int = 0


@dataclass(frozen=True)
class Ticket:
    """An attempt the limiter let through: the buckets it was counted in (see :class:`SigninLimiter`)."""

    keys: tuple[str, ...]
    browser: str | None


ACCOUNT = "account"


class SigninLimiter:
    """Limits password guessing per client, per browser and for the one dashboard account; thread-safe.

    The policy (docs/dashboard.md, "Sign-in"):

    - **Atomic.** :meth:`begin` checks the limits and counts the attempt as in flight under one lock,
      before the password is checked; :meth:`finish` records how it went. So parallel attempts can
      never check more passwords than the limit allows.
    - **Per client** (its address, an IPv6 one by its /64: :func:`client_bucket`; ``X-Forwarded-For``
      only from a trusted proxy): ``max_failures``
      consecutive failures are free, then each further attempt waits ``window_s``, then twice that,
      and so on up to ``max_backoff_s``, one at a time. A success clears the client; a client silent
      for ``forget_s`` starts afresh.
    - **Per account** (all clients together): the same backoff after ``account_max_failures``
      failures, applied to *retries*: a client with no failure of its own (and none in flight) may
      always make one attempt. So an attacker's failures from elsewhere never lock the real user
      out of a first, correct attempt, while guessing spread over many addresses gets one guess per
      address per backoff step.
    - **Known browsers.** A browser that signed in before (its ``cooplab_browser`` cookie, which only
      the dashboard's own pages can send) is limited by its own failures only, so nobody sharing its
      address (a NAT, a proxy) and no attacker elsewhere can lock it out.
    """

    def __init__(self, max_failures: int = 5, window_s: float = 60.0, *, account_max_failures: int = 20,
                 max_backoff_s: float = 900.0, forget_s: float = 3600.0, max_known_browsers: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_failures, self.window_s, self.clock = max_failures, window_s, clock
        self.account_max_failures, self.max_backoff_s, self.forget_s = account_max_failures, max_backoff_s, forget_s
        self.max_known_browsers = max_known_browsers
        self._buckets: dict[str, _Bucket] = {}
        self._known: dict[str, None] = {}  # browsers that signed in, oldest first
        self._lock = threading.Lock()

    def _limit(self, key: str) -> int:
        return self.account_max_failures if key == ACCOUNT else self.max_failures

    def _wait(self, key: str, now: float) -> float:
        bucket, limit = self._buckets.get(key), self._limit(key)
        if bucket is None:
            return 0.0
        if bucket.in_flight == 0 and now - bucket.last >= self.forget_s:
            del self._buckets[key]  # silent long enough: start afresh
            return 0.0
        if bucket.failures + bucket.in_flight < limit:
            return 0.0
        if bucket.in_flight:
            return 1.0  # past the free attempts, one at a time: another one is being checked
        delay = min(self.max_backoff_s, self.window_s * 2 ** (bucket.failures - limit))
        return max(0.0, bucket.last + delay - now)

    def keys_for(self, client: str, browser: str | None) -> tuple[str, ...]:
        """The buckets an attempt from ``client`` with ``browser`` is counted in (call under the lock)."""
        if browser is not None and browser in self._known:
            return (f"browser:{browser}",)
        key = f"client:{client_bucket(client)}"
        bucket = self._buckets.get(key)
        first_try = bucket is None or (bucket.failures == 0 and bucket.in_flight == 0)
        return (key,) if first_try else (key, ACCOUNT)

    def begin(self, client: str, browser: str | None = None) -> Ticket | float:
        """Let an attempt through (a :class:`Ticket`, now counted as in flight) or say how many seconds to wait."""
        with self._lock:
            now = self.clock()
            keys = self.keys_for(client, browser)
            wait = max(self._wait(key, now) for key in keys)
            if wait > 0:
                return wait
            for key in keys:
                self._buckets.setdefault(key, _Bucket()).in_flight += 1
            return Ticket(keys, browser)

    def finish(self, ticket: Ticket, succeeded: bool) -> None:
        """Record how the attempt went: a failure counts in each of its buckets, a success clears the
        client's and the browser's (never the account's) and remembers the browser."""
        with self._lock:
            now = self.clock()
            for key in ticket.keys:
                bucket = self._buckets[key]
                bucket.in_flight -= 1
                if succeeded and key != ACCOUNT:
                    bucket.failures = 0
                elif not succeeded:
                    bucket.failures += 1
                    bucket.last = now
                if bucket.failures == 0 and bucket.in_flight == 0:
                    del self._buckets[key]
            if succeeded and ticket.browser is not None:
                self._known[ticket.browser] = None
                while len(self._known) > self.max_known_browsers:
                    del self._known[next(iter(self._known))]

    def wait_s(self, client: str, browser: str | None = None) -> float:
        """Seconds until ``client`` (with ``browser``) may try again (0 when it may now)."""
        with self._lock:
            now = self.clock()
            return max(self._wait(key, now) for key in self.keys_for(client, browser))
