"""The dashboard's sign-in gate (the rules are in ``app/access.py``).

``app/main.py`` asks :func:`current` before drawing anything. The decision comes from the address the
Streamlit server really listens on (``server.address``), so ``streamlit run`` with any
``--server.address`` is covered as well as ``cooplab ui``. A signed-in session is remembered in
``st.session_state`` (tied to the configured hash: changing the password signs everyone out).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import streamlit as st

from app.access import (
    HASH_COMMAND,
    SETTING,
    FailureLimiter,
    fingerprint,
    hash_problem,
    signin_required,
    verify_password,
)
from jobs.settings import get_settings

SESSION_KEY = "cooplab_signed_in"
FAILURE_DELAY_S = 1.0  # each wrong password costs the guesser this long


@dataclass(frozen=True)
class Access:
    """Whether the server needs sign-in, and why nobody can sign in (no or an unreadable hash)."""

    required: bool
    address: str
    stored: str | None = None
    problem: str | None = None

    @property
    def where(self) -> str:
        return self.address or "every interface"


def current() -> Access:
    """The access rule for this server, with the credential read from the settings now."""
    address = str(st.get_option("server.address") or "")
    if not signin_required(address):
        return Access(required=False, address=address)
    stored = get_settings().ui_password_hash
    return Access(required=True, address=address, stored=stored, problem=hash_problem(stored))


def granted(access: Access) -> bool:
    """Whether this session may see the dashboard."""
    if not access.required:
        return True
    if access.problem or not access.stored:
        return False
    return st.session_state.get(SESSION_KEY) == fingerprint(access.stored)


@st.cache_resource(show_spinner=False)
def limiter() -> FailureLimiter:
    """One limiter for the whole server (every session), keyed by the client's address."""
    return FailureLimiter()


def show(access: Access) -> None:
    """The whole page for a session that is not signed in: the form, or why there is none."""
    _, middle, _ = st.columns([1, 2, 1])
    with middle:
        if access.problem:
            st.title("Sign-in is not set up")
            st.error(f"This dashboard listens on {access.where}, so it requires sign-in, but {access.problem}. "
                     f"Set {SETTING} to the output of `{HASH_COMMAND}` and restart the dashboard.")
            return
        st.title("Sign in to CoopLab")
        st.caption(f"This dashboard listens on {access.where}: it asks for the password its operator set.")
        with st.form("signin", clear_on_submit=True):
            password = st.text_input("Password", type="password", key="signin_password")
            submitted = st.form_submit_button("Sign in", type="primary")
        if submitted:
            _attempt(access, password)


def _attempt(access: Access, password: str) -> None:
    address = st.context.ip_address  # None when the browser is on this machine
    client = address if isinstance(address, str) and address else "local"
    wait = limiter().wait_s(client)
    if wait > 0:
        st.error(f"Too many failed attempts: try again in {math.ceil(wait)} s.")
        return
    if access.stored and password and verify_password(password, access.stored):
        limiter().succeeded(client)
        st.session_state[SESSION_KEY] = fingerprint(access.stored)
        st.rerun()
    limiter().failed(client)
    time.sleep(FAILURE_DELAY_S)
    st.error("Wrong password: try again.")


def sign_out_button(access: Access) -> None:
    """A Sign out button in the sidebar, when this server requires sign-in."""
    if access.required and st.sidebar.button("Sign out", icon=":material/logout:", key="sign_out"):
        st.session_state.pop(SESSION_KEY, None)
        st.rerun()
