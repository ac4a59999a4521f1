"""The dashboard's access rules (``app/access.py``): which addresses need sign-in, password hashes,
and the limits on failed attempts (per client, per browser, per account, with backoff)."""

from __future__ import annotations

import hmac

import pytest

from app import access
from app.access import (
    ACCOUNT,
    SigninLimiter,
    Ticket,
    hash_password,
    hash_problem,
    signin_required,
    verify_password,
)

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


def _fail(limiter: SigninLimiter, client: str, browser: str | None = None) -> None:
    ticket = limiter.begin(client, browser)
    assert isinstance(ticket, Ticket), f"{client} was told to wait {ticket} s"
    limiter.finish(ticket, False)


def test_a_client_gets_its_free_failures_then_doubling_waits() -> None:
    now = [100.0]
    limiter = SigninLimiter(max_failures=3, window_s=60, account_max_failures=100, max_backoff_s=200,
                            forget_s=1000, clock=lambda: now[0])
    for _ in range(3):
        _fail(limiter, "a")
        now[0] += 1
    assert limiter.wait_s("a") == pytest.approx(59)  # the third failure was at 102: 102 + 60 - 103
    assert limiter.wait_s("b") == 0  # another client is not held back
    now[0] = 162
    _fail(limiter, "a")  # the 4th failure, at 162: the next wait is 120 s
    assert limiter.begin("a") == pytest.approx(120)
    now[0] = 282
    _fail(limiter, "a")  # the 5th: 240 s, capped at max_backoff_s
    assert limiter.wait_s("a") == pytest.approx(200)
    now[0] = 482
    ticket = limiter.begin("a")
    limiter.finish(ticket, True)  # a right password clears the client
    assert limiter.wait_s("a") == 0
    for _ in range(3):
        _fail(limiter, "a")
    now[0] += 1000  # silent for forget_s: starts afresh
    assert limiter.wait_s("a") == 0


def test_an_attempt_is_counted_before_the_password_is_checked() -> None:
    limiter = SigninLimiter(max_failures=2, window_s=60, clock=lambda: 0.0)
    first, second = limiter.begin("a"), limiter.begin("a")
    assert isinstance(first, Ticket) and isinstance(second, Ticket)
    assert limiter.begin("a") == 1.0  # two are being checked: a third waits, before any has failed
    limiter.finish(first, True)
    limiter.finish(second, True)
    assert isinstance(limiter.begin("a"), Ticket)


def test_the_account_limit_applies_to_retries_not_to_a_clients_first_attempt() -> None:
    limiter = SigninLimiter(max_failures=5, window_s=60, account_max_failures=4, clock=lambda: 0.0)
    for address in range(4):  # an attacker fails twice from each of four addresses...
        _fail(limiter, f"10.0.0.{address}")
    for address in range(4):
        _fail(limiter, f"10.0.0.{address}")
    assert limiter.wait_s("10.0.0.0") == 60  # ...the account is over its limit: retries wait
    assert limiter.wait_s("10.0.0.9") == 0  # a client with no failure of its own still gets an attempt
    ticket = limiter.begin("192.168.1.7")  # the real user, from anywhere
    assert isinstance(ticket, Ticket) and ticket.keys == ("client:192.168.1.7",)
    limiter.finish(ticket, True)
    assert limiter.wait_s("10.0.0.1") == 60  # a success elsewhere does not reset the account


def test_a_browser_that_signed_in_before_is_limited_by_its_own_failures_only() -> None:
    limiter = SigninLimiter(max_failures=3, window_s=60, account_max_failures=3, clock=lambda: 0.0)
    known = "k" * 43
    ticket = limiter.begin("10.0.0.5", known)
    limiter.finish(ticket, True)  # signed in once from this browser
    for _ in range(3):
        _fail(limiter, "10.0.0.5")  # someone behind the same NAT guesses
    assert limiter.wait_s("10.0.0.5") == 60 and limiter.wait_s("10.0.0.5", "u" * 43) == 60
    assert limiter.wait_s("10.0.0.5", known) == 0  # the known browser is not locked out
    assert limiter.keys_for("10.0.0.5", known) == (f"browser:{known}",)
    for _ in range(3):
        _fail(limiter, "10.0.0.5", known)
    assert limiter.wait_s("10.0.0.5", known) == 60  # its own failures do count
    assert ACCOUNT not in limiter.keys_for("10.0.0.5", known)


@pytest.mark.parametrize(("client", "bucket"), [
    ("203.0.113.9", "203.0.113.9"),  # IPv4: per address
    ("2001:db8:0:1::7", "2001:db8:0:1::/64"),
    ("2001:DB8:0:1:ffff:ffff:ffff:fffe", "2001:db8:0:1::/64"),  # any address of the same /64
    ("::ffff:203.0.113.9", "203.0.113.9"),  # IPv4-mapped IPv6 is the IPv4 address
    ("[2001:db8::1]", "2001:db8::/64"),
    ("forwarded", "forwarded"),
    ("local", "local"),
])
def test_clients_are_counted_per_ipv4_address_and_per_ipv6_64(client: str, bucket: str) -> None:
    assert access.client_bucket(client) == bucket


def test_2000_addresses_of_one_ipv6_64_get_the_free_failures_of_one_client() -> None:
    limiter = SigninLimiter(max_failures=5, window_s=60, clock=lambda: 0.0)
    checked = 0
    for host in range(1, 2001):  # one /64 holds 2**64 addresses: rotating them must not buy guesses
        ticket = limiter.begin(f"2001:db8:0:1::{host:x}")
        if isinstance(ticket, Ticket):
            limiter.finish(ticket, False)
            checked += 1
    assert checked == 5
    assert limiter.wait_s("2001:db8:0:1::ffff") == 60 and limiter.wait_s("::ffff:198.51.100.1") == 0
    assert isinstance(limiter.begin("2001:db8:0:2::1"), Ticket)  # the next /64 is another client
