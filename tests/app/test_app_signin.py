"""Sign-in, decided from the address the server listens on (``server.address``): off 127.0.0.1 a page
shows only the sign-in form until the right password is given."""

from __future__ import annotations

import time

import pytest
from streamlit.testing.v1 import AppTest

from app import signin
from app.access import hash_password
from app.signins import SIGN_INS

PASSWORD = "correct horse battery staple"
STORED = hash_password(PASSWORD, n=2**10)  # cheap parameters keep the tests fast; the format is the same


@pytest.fixture(autouse=True)
def fresh_limiter() -> None:
    signin.limiter.clear()
    SIGN_INS.clear()


@pytest.fixture
def wide(server_address, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboard on every interface with a password configured."""
    server_address("0.0.0.0")
    monkeypatch.setenv("COOPLAB_UI_PASSWORD_HASH", STORED)


def _only_the_form(at: AppTest) -> None:
    assert not at.exception
    assert [t.value for t in at.title] == ["Sign in to CoopLab"]
    assert [w.label for w in at.text_input] == ["Password"]
    assert [b.label for b in at.button] == ["Sign in"]
    assert not at.sidebar.toggle and not at.sidebar.button  # no live controls, no pages
    assert not at.selectbox and not at.dataframe and not at.metric


def _sign_in(at: AppTest, password: str) -> AppTest:
    at.text_input(key="signin_password").input(password)
    return at.button[0].click().run()


def test_off_loopback_a_page_shows_only_the_form_until_signed_in(wide, app, store) -> None:
    at = app()
    _only_the_form(at)
    _sign_in(at, PASSWORD)
    assert not at.exception
    assert at.title[0].value == "Experiments"
    assert at.sidebar.toggle(key="live_refresh").value is True
    at.switch_page("app_pages/workers.py").run()  # the session stays signed in across pages
    assert at.title[0].value == "Workers"
    at.sidebar.button(key="sign_out").click().run()
    _only_the_form(at)


def test_a_wrong_password_is_refused_after_a_delay(wide, app, store) -> None:
    at = app("runs")
    start = time.perf_counter()
    _sign_in(at, "wrong horse battery staple")
    assert time.perf_counter() - start >= signin.FAILURE_DELAY_S
    assert [e.value for e in at.error] == ["Wrong password: try again."]
    assert [t.value for t in at.title] == ["Sign in to CoopLab"] and not at.sidebar.toggle
    _sign_in(at, PASSWORD)  # the page asked for by the link opens after sign-in
    assert at.title[0].value == "Runs" and not at.error


def test_repeated_failures_lock_the_form_for_a_while(wide, app, store, monkeypatch) -> None:
    monkeypatch.setattr(signin, "FAILURE_DELAY_S", 0.0)
    at = app()
    for _ in range(signin.limiter().max_failures):
        _sign_in(at, "not the password")
        assert at.error[0].value == "Wrong password: try again."
    _sign_in(at, PASSWORD)  # even the right one waits until the window has passed
    assert at.error[0].value.startswith("Too many failed attempts: try again in ")
    _only_the_form(at)


@pytest.mark.parametrize("address", [None, "0.0.0.0", "127.0.0.2"])
def test_without_a_credential_the_page_says_so_and_nothing_else(address, server_address, app, store,
                                                                monkeypatch) -> None:
    server_address(address)
    monkeypatch.delenv("COOPLAB_UI_PASSWORD_HASH", raising=False)
    at = app("runs")
    assert not at.exception
    assert [t.value for t in at.title] == ["Sign-in is not set up"]
    (message,) = [e.value for e in at.error]
    assert f"listens on {address or 'every interface'}, so it requires sign-in" in message
    assert "COOPLAB_UI_PASSWORD_HASH is not set" in message and "cooplab hash-password" in message
    assert not at.text_input and not at.button and not at.sidebar.toggle and not at.dataframe


def test_an_unreadable_hash_is_reported(server_address, app, store, monkeypatch) -> None:
    server_address("0.0.0.0")
    monkeypatch.setenv("COOPLAB_UI_PASSWORD_HASH", PASSWORD)  # a password where the hash belongs
    at = app()
    assert "COOPLAB_UI_PASSWORD_HASH is not a hash made by `cooplab hash-password`" in at.error[0].value
    assert not at.text_input


def test_changing_the_password_signs_sessions_out(wide, app, store, monkeypatch) -> None:
    at = _sign_in(app(), PASSWORD)
    assert at.title[0].value == "Experiments"
    monkeypatch.setenv("COOPLAB_UI_PASSWORD_HASH", hash_password("a brand new password", n=2**10))
    _only_the_form(at.run())


@pytest.mark.parametrize("address", ["127.0.0.1", "localhost", "::1"])
def test_on_this_machine_only_no_signin_is_asked(address, server_address, app, store, monkeypatch) -> None:
    server_address(address)
    monkeypatch.delenv("COOPLAB_UI_PASSWORD_HASH", raising=False)
    at = app()
    assert at.title[0].value == "Experiments"
    assert "sign_out" not in [b.key for b in at.sidebar.button]


def _tab(app, monkeypatch, browser: str | None):
    """A new tab (session) of the browser with this ``cooplab_browser`` cookie (None: without one)."""
    monkeypatch.setattr(signin, "browser_key", lambda: browser)
    return app()


def _as(monkeypatch, browser: str | None):
    monkeypatch.setattr(signin, "browser_key", lambda: browser)


def test_signing_out_in_one_tab_signs_out_the_browsers_other_tabs(wide, app, store, monkeypatch) -> None:
    mine, theirs = "m" * 43, "t" * 43
    first = _sign_in(_tab(app, monkeypatch, mine), PASSWORD)
    second = _sign_in(_tab(app, monkeypatch, mine), PASSWORD)
    other_browser = _sign_in(_tab(app, monkeypatch, theirs), PASSWORD)
    for at in (first, second, other_browser):
        assert at.title[0].value == "Experiments"
    _as(monkeypatch, mine)
    first.sidebar.button(key="sign_out").click().run()
    _only_the_form(first)
    _only_the_form(second.run())  # the other tab of the same browser is signed out too
    _as(monkeypatch, theirs)
    assert other_browser.run().title[0].value == "Experiments"  # another browser is not


def test_a_session_without_the_browser_cookie_signs_out_alone(wide, app, store, monkeypatch) -> None:
    first = _sign_in(_tab(app, monkeypatch, None), PASSWORD)
    second = _sign_in(_tab(app, monkeypatch, None), PASSWORD)
    first.sidebar.button(key="sign_out").click().run()
    _only_the_form(first)
    assert second.run().title[0].value == "Experiments"
