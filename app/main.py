"""CoopLab dashboard entry point: ``streamlit run app/main.py`` (``cooplab up`` starts it).

A router only: it sets the page frame, asks for sign-in when the server is reachable from other
machines (``app/signin.py``), says so in one line while the database is unreachable
(``app/db_outage.py``), and hands over to the chosen view in ``app/app_pages``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # running from a source tree: make `app`, `db`, `jobs`, `engine` importable
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app import context, db_outage, signin  # noqa: E402

PAGES = Path(__file__).resolve().parent / "app_pages"
STILL_PLACEHOLDERS = '<style>[data-testid="stSkeleton"] { animation: none !important; }</style>'

# A local SVG (sent inline as a data URL): a ":material/...:" page icon makes the browser fetch it from
# fonts.gstatic.com, and the dashboard must make no request beyond its own server.
ICON = Path(__file__).resolve().parent / "icon.svg"
st.set_page_config(page_title="CoopLab", page_icon=str(ICON), layout="wide")
# Streamlit draws a pulsing placeholder for each element whose code is still loading (a chart, a
# widget); the pulse makes the browser composite a new frame 60 times a second until the last one is
# drawn, which on a machine without GPU compositing was most of a page load's browser CPU (docs/dashboard.md,
# "Opening a page"). The placeholders stay, still.
st.html(STILL_PLACEHOLDERS)
access = signin.current()
signed_in = signin.granted(access)

sections = {
    "Configure": [
        st.Page(PAGES / "experiments.py", title="Experiments", icon=":material/science:", default=True),
        st.Page(PAGES / "studies.py", title="Studies", icon=":material/grid_view:"),
    ],
    "Track": [
        st.Page(PAGES / "runs.py", title="Runs", icon=":material/directions_run:"),
        st.Page(PAGES / "run_detail.py", title="Run detail", icon=":material/monitoring:"),
        st.Page(PAGES / "transcripts.py", title="Transcripts", icon=":material/forum:"),
        st.Page(PAGES / "compare.py", title="Compare", icon=":material/compare_arrows:"),
    ],
    "Operate": [
        st.Page(PAGES / "workers.py", title="Workers", icon=":material/dns:"),
    ],
}
# The sidebar's page links are drawn by context.sidebar_navigation (signed in only): they carry the
# selected run (?run=N) and experiment, so a page switch keeps them in one history entry.
navigation = st.navigation(sections, position="hidden")
if not signed_in:  # the sign-in form (or why there is none) and nothing else
    signin.show(access)
    st.stop()
context.sidebar_navigation(sections)
context.live_controls()
signin.sign_out_button(access)
db_outage.gate(context.settings().resolved_database_url)  # one line and a retry instead of a traceback
navigation.run()
