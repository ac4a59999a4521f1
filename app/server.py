"""The dashboard's server: ``streamlit run app/server.py`` (what ``cooplab up`` / ``cooplab ui`` run).

The pages are ``app/main.py`` as before; this wraps them in an ``st.App`` so the same server also
answers ``/api/download/<token>/<file>`` (see :mod:`app.components.downloads`): downloads are plain
HTTP responses streamed from the database, never Streamlit's deferred media files, so two
downloads in quick succession both arrive. ``streamlit run app/main.py`` still works, with
Streamlit's download buttons instead.

Every request and websocket first passes :class:`app.guard.HostGuard`: a ``Host`` the dashboard does not
answer to (DNS rebinding) or a foreign ``Origin`` is refused with 403, on loopback too. User middleware
wraps all of ``st.App`` (its routes and the static mount of the frontend), so every HTTP response gets the
guard's framing headers, and Streamlit's endpoints beyond the sign-in form answer signed-in browsers only.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # running from a source tree: make `app`, `db`, `jobs`, `engine` importable
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402
from starlette.middleware import Middleware  # noqa: E402

from app import guard  # noqa: E402
from app.components import downloads  # noqa: E402

downloads.activate_route()
guard.activate()

app = st.App(Path(__file__).resolve().with_name("main.py"), routes=downloads.routes(),
             middleware=[Middleware(guard.HostGuard)])
