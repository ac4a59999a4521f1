"""The dashboard's server: ``streamlit run app/server.py`` (what ``cooplab up`` / ``cooplab ui`` run).

The pages are ``app/main.py`` as before; this wraps them in an ``st.App`` so the same server also
answers ``/api/download/<token>/<file>`` (see :mod:`app.components.downloads`): downloads are plain
HTTP responses streamed from the database, never Streamlit's deferred media files, so two
downloads in quick succession both arrive. ``streamlit run app/main.py`` still works, with
Streamlit's download buttons instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # running from a source tree: make `app`, `db`, `jobs`, `engine` importable
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app.components import downloads  # noqa: E402

downloads.activate_route()

app = st.App(Path(__file__).resolve().with_name("main.py"), routes=downloads.routes())
