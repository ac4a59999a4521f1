"""Who is signed in, kept by the server: sign-out in one tab ends the sign-in of every tab of that browser.

Pure Python (secrets, threading). A session that signs in gets a random token
(``st.session_state``) and the server records it under its browser (the ``cooplab_browser`` cookie
the guard sets, ``app/guard.py``) with the configured hash's fingerprint. So:

- **Sign out ends the browser's sign-in.** :meth:`SignIns.sign_out` forgets the browser's record
  with every token in it: the other tabs of that browser show the sign-in form on their next rerun,
  and the HTTP endpoints that serve signed-in browsers only (``app/guard_rules.py``) refuse it.
  A session without the cookie (``streamlit run app/main.py``, which has no guard) is its own record.
- **A password change ends every sign-in**: a record made under another hash is not valid.
- **Idle sign-ins end.** A record unused (no rerun of a signed-in page, no request to a guarded
  endpoint) for :data:`IDLE_S` is forgotten, and at most ``max_records`` are kept (the oldest go).

One :data:`SIGN_INS` serves the whole server process: the sessions (``app/signin.py``) and the guard.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

IDLE_S = 24 * 3600.0


@dataclass
class _Record:
    """One browser's (or one cookie-less session's) sign-in: the hash it was made under, its tokens."""

    fingerprint: str
    last: float
    tokens: set[str] = field(default_factory=set)


class SignIns:
    """Signed-in browsers and their sessions' tokens; thread-safe."""

    def __init__(self, idle_s: float = IDLE_S, max_records: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_s, self.max_records, self.clock = idle_s, max_records, clock
        self._records: dict[str, _Record] = {}  # least recently used first
        self._owner: dict[str, str] = {}  # token -> record key
        self._lock = threading.Lock()

    def _drop(self, key: str) -> None:
        record = self._records.pop(key, None)
        for token in record.tokens if record else ():
            self._owner.pop(token, None)

    def _live(self, key: str, fingerprint: str) -> _Record | None:
        """The record under ``key`` when it is valid now (touched), else None (and forgotten if stale)."""
        record = self._records.get(key)
        if record is None:
            return None
        now = self.clock()
        if record.fingerprint != fingerprint or now - record.last >= self.idle_s:
            self._drop(key)
            return None
        record.last = now
        self._records[key] = self._records.pop(key)  # most recently used last
        return record

    def sign_in(self, fingerprint: str, browser: str | None) -> str:
        """Record a sign-in of a session of ``browser`` (None: a session without the cookie) under the
        hash with ``fingerprint``; returns the session's token."""
        token = secrets.token_urlsafe(32)
        key = f"browser:{browser}" if browser else f"session:{token}"
        with self._lock:
            record = self._live(key, fingerprint)
            if record is None:
                self._drop(key)
                record = self._records[key] = _Record(fingerprint, self.clock())
            record.tokens.add(token)
            self._owner[token] = key
            while len(self._records) > self.max_records:
                self._drop(next(iter(self._records)))
        return token

    def valid(self, token: object, fingerprint: str) -> bool:
        """Whether the session holding ``token`` is still signed in under the hash with ``fingerprint``."""
        with self._lock:
            key = self._owner.get(token) if isinstance(token, str) else None
            return key is not None and self._live(key, fingerprint) is not None

    def browser_signed_in(self, browser: str | None, fingerprint: str) -> bool:
        """Whether ``browser`` (its cookie) has a valid sign-in: what the guard asks for endpoints that
        serve signed-in browsers only."""
        if not browser:
            return False
        with self._lock:
            return self._live(f"browser:{browser}", fingerprint) is not None

    def sign_out(self, token: object) -> None:
        """End the sign-in the session holding ``token`` belongs to: every tab of its browser."""
        with self._lock:
            key = self._owner.get(token) if isinstance(token, str) else None
            if key is not None:
                self._drop(key)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
            self._owner.clear()


SIGN_INS = SignIns()
