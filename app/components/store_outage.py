""""Store unreachable since ...": runs whose job waits for the artifact store, as their jobs noted it
(:meth:`db.store.Store.note_store_outage`), on the run's page and the Workers page."""

from __future__ import annotations

from datetime import datetime

import streamlit as st

from app.escape import md_code, md_text
from app.queries import heartbeat_age
from db.errors import NotFoundError
from db.ops_store_outages import StoreOutageNote
from db.records import Run
from db.store import Store

LIVE = ("starting", "running", "stopping")


def outage_line(note: StoreOutageNote, now: datetime) -> str:
    """``store unreachable since 22:14:03 UTC (41s ago): <its error>``, as markdown."""
    return (f"store unreachable since {note.since:%H:%M:%S} UTC ({heartbeat_age(note.since, now)}): "
            f"{md_text(note.problem)}")


def render_run_outage(store: Store, run: Run) -> None:
    """A warning on a live run whose job cannot reach the artifact store."""
    if run.status not in LIVE:
        return
    note = store.store_outages([run.id]).get(run.id)
    if note is not None:
        st.warning(f"Artifact {outage_line(note, store.server_now())}. Training goes on; its checkpoints wait on "
                   "the worker's disk and their uploads are tried again for up to `COOPLAB_STORE_OUTAGE_S`.")


def render_worker_outages(store: Store) -> None:
    """One warning line per live run (and its worker) whose job cannot reach the artifact store."""
    notes = store.store_outages()
    if not notes:
        return
    now = store.server_now()
    for run_id, note in sorted(notes.items()):
        try:
            run = store.get_run(run_id)
        except NotFoundError:  # deleted meanwhile
            continue
        if run.status in LIVE:
            st.warning(f"Run #{run_id} on {md_code(run.worker or run.queue)}: artifact {outage_line(note, now)}")
