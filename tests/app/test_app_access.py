"""The dashboard's access rules (``app/access.py``): which addresses need sign-in, password hashes,
and the limit on failed attempts."""

from __future__ import annotations

import hmac

import pytest

from app import access
from app.access import FailureLimiter, hash_password, hash_problem, signin_required, verify_password

PASSWORD = "correct horse battery staple"


@pytest.mark.parametrize("address", ["127.0.0.1", "localhost", "LOCALHOST", "::1", "[::1]", " 127.0.0.1 "])
def test_this_machine_only_stays_open(address: str) -> None:
    assert not signin_required(address)


@pytest.mark.parametrize("address", [None, "", "0.0.0.0", "::", "127.0.0.2", "127.1.2.3", "192.168.1.5",
                                     "10.0.0.1", "::ffff:127.0.0.1", "myhost", "localhost.example.com"])
def test_any_other_address_requires_signin(address: str | None) -> None:
    assert signin_required(address)


def test_a_hash_verifies_its_password_only() -> None:
    stored = hash_password(PASSWORD)
    assert stored.startswith("scrypt:32768:8:1:") and "$" not in stored and PASSWORD not in stored
    assert hash_problem(stored) is None
    assert verify_password(PASSWORD, stored)
    assert not verify_password(PASSWORD + " ", stored)
    assert not verify_password("", stored)
    assert hash_password(PASSWORD) != stored  # salted: the same password hashes differently each time


def test_verification_compares_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    stored = hash_password(PASSWORD, n=2**10)
    calls: list[tuple[bytes, bytes]] = []
    compare = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return compare(a, b)

    monkeypatch.setattr(access.hmac, "compare_digest", spy)
    assert verify_password(PASSWORD, stored)
    assert len(calls) == 1 and calls[0][1] == bytes.fromhex(stored.split(":")[5])


def test_short_passwords_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 8 characters"):
        hash_password("short")


@pytest.mark.parametrize("stored, reason", [
    (None, "COOPLAB_UI_PASSWORD_HASH is not set"),
    ("  ", "COOPLAB_UI_PASSWORD_HASH is not set"),
    ("hunter2-in-plain-text", "not of the form"),
    ("pbkdf2:1000:8:1:00112233445566778899aabbccddeeff:" + "00" * 32, "not of the form"),
    ("scrypt:x:8:1:00112233445566778899aabbccddeeff:" + "00" * 32, "not readable"),
    ("scrypt:1000:8:1:00112233445566778899aabbccddeeff:" + "00" * 32, "out of range"),  # not a power of 2
    ("scrypt:4194304:8:1:00112233445566778899aabbccddeeff:" + "00" * 32, "out of range"),  # 4 GiB of memory
    ("scrypt:1024:8:1:0011:" + "00" * 32, "wrong length"),
    ("scrypt:1024:8:1:00112233445566778899aabbccddeeff:00ff", "wrong length"),
])
def test_unusable_hashes_are_named_and_never_verify(stored: str | None, reason: str) -> None:
    problem = hash_problem(stored)
    assert problem is not None and reason in problem
    if stored and stored.strip():
        assert "COOPLAB_UI_PASSWORD_HASH" in problem and "cooplab hash-password" in problem
        assert not verify_password(PASSWORD, stored)


def test_failures_are_limited_per_client_and_expire() -> None:
    now = [100.0]
    limiter = FailureLimiter(max_failures=3, window_s=60, clock=lambda: now[0])
    for _ in range(3):
        assert limiter.wait_s("a") == 0
        limiter.failed("a")
        now[0] += 1
    assert limiter.wait_s("a") == pytest.approx(57)  # the first of the three expires at 160
    assert limiter.wait_s("b") == 0  # another client is not held back
    now[0] = 160.5
    assert limiter.wait_s("a") == 0
    limiter.failed("a")
    limiter.succeeded("a")  # a right password clears the count
    limiter.failed("a")
    limiter.failed("a")
    assert limiter.wait_s("a") == 0
