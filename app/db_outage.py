"""While the database cannot be reached, every page says so in one line and tries again by itself.

:func:`gate` runs in the page frame (``app/main.py``) before the chosen page: it opens a connection
to the configured database (PostgreSQL gives up after :data:`CONNECT_TIMEOUT_S`) and, when that fails,
shows *The database at postgresql://lab:***@db:5432/cooplab is unreachable (connection to server at
"db" (10.0.0.5), port 5432 failed: Connection refused); retrying every 5 s* instead of the page, then
checks again every :data:`RETRY_S` s and shows the page as soon as the database answers. Inside a
refreshing region (a fragment) that finds the database gone, the same line replaces the region until
its next refresh. The URL is shown without its password (``db.urls.redact_url``).

The database is probed once per script run, whichever comes first of the page frame and
``app.context.store()`` (a page, and the components it draws, may ask for the store several times): a
full run of the page, and each rerun of a refreshing region, opens one connection for the check.
"""

from __future__ import annotations

import time

import streamlit as st
from sqlalchemy import Engine

from db.engine import make_engine
from db.urls import redact_url

RETRY_S = 5
"""Seconds between tries while the database is unreachable."""
CONNECT_TIMEOUT_S = 3
"""How long one try may wait for a PostgreSQL server to answer (libpq's minimum is 2)."""
_LAST_TRY = "_db_outage_last_try"
_PROBED = "_db_outage_probed"


@st.cache_resource(show_spinner=False)
def _probe_engine(url: str) -> Engine:
    """An engine of its own for the reachability check: its short connect timeout applies to the
    check only, and it exists before the store (whose creation needs the database)."""
    return make_engine(url, connect_timeout_s=CONNECT_TIMEOUT_S)


def unreachable(url: str) -> str | None:
    """None when a connection to ``url`` opens, else why not, in one line."""
    try:
        with _probe_engine(url).connect():
            return None
    except Exception as exc:  # any failure to connect is the reason, whatever the driver raised
        return reason(exc)


def _this_run() -> object | None:
    """What tells this script run from the next: the run context's element cursors, a new dict at the
    start of every run (a full run or a fragment's); None outside a script run (a bare call)."""
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    return None if ctx is None else ctx.cursors


def unreachable_now(url: str) -> str | None:
    """:func:`unreachable`, asked once per script run and URL: a second call in the same run answers
    from the first (the probe's result is kept in the session with the run it belongs to)."""
    run = _this_run()
    if run is None:
        return unreachable(url)
    kept = st.session_state.get(_PROBED)
    if kept is not None and kept[0] is run and kept[1] == url:
        return kept[2]
    why = unreachable(url)
    st.session_state[_PROBED] = (run, url, why)
    return why


def reason(exc: BaseException) -> str:
    """The driver's own first line (``connection to server at ... failed: Connection refused``)."""
    said = str(getattr(exc, "orig", None) or exc)
    for line in said.splitlines():
        if line.strip():
            return " ".join(line.split())
    return type(exc).__name__


def message(url: str, why: str) -> str:
    return f"The database at {redact_url(url)} is unreachable ({why}); retrying every {RETRY_S} s"


def gate(url: str, *, retry: bool = True) -> None:
    """Stop the page with the one-line message while ``url`` is unreachable; with ``retry`` (the page
    frame) try again every :data:`RETRY_S` s and rerun the whole page once it answers. Without (the
    store, also called from a page's refreshing regions, which run again by themselves) only the line.
    The database is probed once per script run (:func:`unreachable_now`)."""
    why = unreachable_now(url)
    if why is None:
        return
    st.session_state[_LAST_TRY] = time.monotonic()
    st.warning(message(url, why), icon=":material/cloud_off:")
    if retry:

        @st.fragment(run_every=RETRY_S)
        def _retry() -> None:
            if time.monotonic() - st.session_state.get(_LAST_TRY, 0.0) < 1.0:
                return  # the try just made: this is the fragment's first, inline run
            st.session_state[_LAST_TRY] = time.monotonic()
            if unreachable(url) is None:
                st.rerun(scope="app")

        _retry()
    st.stop()
