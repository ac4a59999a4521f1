"""The dashboard's sign-in gate (the rules are in ``app/access.py`` and ``app/hosts.py``).

``app/main.py`` asks :func:`current` before drawing anything. The decision comes from the address the
Streamlit server really listens on (``server.address``), so ``streamlit run`` with any
``--server.address`` is covered as well as ``cooplab ui``. A signed-in session holds a token in
``st.session_state`` that the server keeps per browser (``app/signins.py``): signing out in one tab
signs out every tab of that browser, and changing the password signs everyone out.

A session whose websocket came with a ``Host`` the dashboard does not answer to (or a foreign
``Origin``) sees only why: the server's guard (``app/guard.py``) refuses those already, and this
covers ``streamlit run app/main.py``, which has no guard.
"""

from __future__ import annotations

import math
import os
import socket
import time
from dataclasses import dataclass

import streamlit as st

from app import hosts
from app.access import (
    HASH_COMMAND,
    SETTING,
    SigninLimiter,
    Ticket,
    fingerprint,
    hash_problem,
    signin_required,
    verify_password,
)
from app.components import downloads
from app.signins import SIGN_INS
from jobs.settings import get_settings

SESSION_KEY = "cooplab_signed_in"
FAILURE_DELAY_S = 1.0  # each wrong password costs the guesser this long
SIGNED_IN = "signed in"
WRONG = "wrong"


@dataclass(frozen=True)
class Access:
    """Whether the server needs sign-in, why nobody can sign in (no or an unreadable hash), and why this
    session is refused outright (a Host or Origin the dashboard does not answer to)."""

    required: bool
    address: str
    stored: str | None = None
    problem: str | None = None
    refused: str | None = None

    @property
    def where(self) -> str:
        return self.address or "every interface"


def _host_refusal(address: str) -> str | None:
    """Why this session's websocket handshake names a host or origin the dashboard does not answer to."""
    headers = st.context.headers
    host, origin = headers.get("Host"), headers.get("Origin")
    if not isinstance(host, str):
        return None  # no handshake headers (AppTest)
    try:
        extra = hosts.parse_allowed_hosts(get_settings().ui_allowed_hosts)
    except ValueError as exc:
        return str(exc)
    names = hosts.allowed_names(address, extra, (socket.gethostname(),))
    return hosts.refusal(host, origin if isinstance(origin, str) else None, names)


def current() -> Access:
    """The access rule for this server, with the credential read from the settings now."""
    address = str(st.get_option("server.address") or "")
    refused = _host_refusal(address)
    if not signin_required(address):
        return Access(required=False, address=address, refused=refused)
    stored = get_settings().ui_password_hash
    return Access(required=True, address=address, stored=stored, problem=hash_problem(stored), refused=refused)


def granted(access: Access) -> bool:
    """Whether this session may see the dashboard."""
    if access.refused:
        return False
    if not access.required:
        return True
    if access.problem or not access.stored:
        return False
    return SIGN_INS.valid(st.session_state.get(SESSION_KEY), fingerprint(access.stored))


@st.cache_resource(show_spinner=False)
def limiter() -> SigninLimiter:
    """One limiter for the whole server (every session): per client, per browser and for the account."""
    return SigninLimiter()


def show(access: Access) -> None:
    """The whole page for a session that is not signed in: the form, or why there is none."""
    _, middle, _ = st.columns([1, 2, 1])
    with middle:
        if access.refused:
            st.title("This address is not allowed")
            st.error(access.refused)
            return
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


def client_key() -> str:
    """The address this session's attempts count against: what the server's guard determined, else
    (``streamlit run app/main.py``) the connection's address, shared by every forwarded request."""
    from app import guard

    headers = st.context.headers
    if guard.active():
        client = headers.get(hosts.CLIENT_HEADER)
        return client if isinstance(client, str) and client else "local"
    uvicorn_trusts = os.environ.get("FORWARDED_ALLOW_IPS", guard.UVICORN_DEFAULT_FORWARDED_ALLOW_IPS)
    forwarded = any(isinstance(headers.get(name), str) for name in ("X-Forwarded-For", "Forwarded"))
    address = st.context.ip_address
    return hosts.client_identity(address if isinstance(address, str) else None, forwarded,
                                 hosts.same_address_list(uvicorn_trusts, get_settings().ui_trusted_proxies))


def browser_key() -> str | None:
    """This browser's ``cooplab_browser`` cookie (set by the server's guard), when it has one."""
    return hosts.browser_id(st.context.cookies.get(hosts.BROWSER_COOKIE))


def try_password(access: Access, password: str, client: str, browser: str | None = None) -> str | float:
    """One sign-in attempt: :data:`SIGNED_IN`, :data:`WRONG`, or the seconds to wait before trying again.

    The limiter counts the attempt before the password is checked (see :class:`app.access.SigninLimiter`).
    """
    ticket = limiter().begin(client, browser)
    if not isinstance(ticket, Ticket):
        return ticket
    ok = False
    try:
        ok = bool(access.stored and password and verify_password(password, access.stored))
        if not ok:
            time.sleep(FAILURE_DELAY_S)
    finally:
        limiter().finish(ticket, ok)
    return SIGNED_IN if ok else WRONG


def _attempt(access: Access, password: str) -> None:
    outcome = try_password(access, password, client_key(), browser_key())
    if outcome == SIGNED_IN and access.stored:
        st.session_state[SESSION_KEY] = SIGN_INS.sign_in(fingerprint(access.stored), browser_key())
        st.rerun()
    if isinstance(outcome, float):
        st.error(f"Too many failed attempts: try again in {math.ceil(outcome)} s.")
        return
    st.error("Wrong password: try again.")


def sign_out_button(access: Access) -> None:
    """A Sign out button in the sidebar, when this server requires sign-in. Signing out ends the sign-in
    of every tab of this browser (:meth:`app.signins.SignIns.sign_out`) and revokes every download link
    this session was given (the other tabs' links need a signed-in browser at the guard)."""
    if access.required and st.sidebar.button("Sign out", icon=":material/logout:", key="sign_out"):
        SIGN_INS.sign_out(st.session_state.pop(SESSION_KEY, None))
        downloads.revoke_session()
        st.rerun()
