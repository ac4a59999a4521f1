"""The server's record of who is signed in (``app/signins.py``): per browser, ended for every tab by
one sign-out, by a password change and by idleness."""

from __future__ import annotations

from app.signins import SignIns

BROWSER, OTHER = "b" * 43, "o" * 43


def test_sign_out_ends_every_token_of_the_browser_and_nothing_else() -> None:
    sign_ins = SignIns()
    tab1, tab2 = sign_ins.sign_in("fp", BROWSER), sign_ins.sign_in("fp", BROWSER)
    elsewhere, cookieless = sign_ins.sign_in("fp", OTHER), sign_ins.sign_in("fp", None)
    assert all(sign_ins.valid(t, "fp") for t in (tab1, tab2, elsewhere, cookieless))
    assert sign_ins.browser_signed_in(BROWSER, "fp") and not sign_ins.browser_signed_in(None, "fp")
    sign_ins.sign_out(tab2)
    assert not sign_ins.valid(tab1, "fp") and not sign_ins.valid(tab2, "fp")
    assert not sign_ins.browser_signed_in(BROWSER, "fp")
    assert sign_ins.valid(elsewhere, "fp") and sign_ins.valid(cookieless, "fp")
    again = sign_ins.sign_in("fp", BROWSER)  # signing in again is a new sign-in; old tokens stay dead
    assert sign_ins.valid(again, "fp") and not sign_ins.valid(tab1, "fp")


def test_a_token_is_valid_only_under_the_hash_it_was_made_under() -> None:
    sign_ins = SignIns()
    token = sign_ins.sign_in("old", BROWSER)
    assert not sign_ins.valid(token, "new") and not sign_ins.browser_signed_in(BROWSER, "new")
    assert not sign_ins.valid(token, "old")  # forgotten, not kept for a change back
    assert not sign_ins.valid(None, "old") and not sign_ins.valid(["x"], "old") and not sign_ins.valid("x", "old")


def test_idle_sign_ins_end_and_use_keeps_them() -> None:
    now = [0.0]
    sign_ins = SignIns(idle_s=100, clock=lambda: now[0])
    kept, idle = sign_ins.sign_in("fp", BROWSER), sign_ins.sign_in("fp", OTHER)
    for _ in range(3):
        now[0] += 60
        assert sign_ins.valid(kept, "fp")
    assert not sign_ins.valid(idle, "fp")


def test_the_oldest_records_go_beyond_the_limit() -> None:
    sign_ins = SignIns(max_records=2)
    first = sign_ins.sign_in("fp", "1" * 43)
    second = sign_ins.sign_in("fp", "2" * 43)
    assert sign_ins.valid(first, "fp")  # used: now the newest
    sign_ins.sign_in("fp", "3" * 43)
    assert sign_ins.valid(first, "fp") and not sign_ins.valid(second, "fp")
