"""Study runs held back: children a study has not queued yet, listed on the Workers page with why
(its cap on runs in flight, or the study being stopped), so a queue that looks short is not read as
all there is."""

from __future__ import annotations

import streamlit as st

from app.escape import md_code, md_text
from db.store import Store
from db.study_records import ACTIVE, STOPPED, Study
from db.study_store import StudyStore


def held_back_line(study: Study, waiting: int, in_flight: int) -> str | None:
    """``study lr sweep · 6 runs held back: at most 2 at once, 2 in flight`` (Markdown, the name as
    text) from the study's children waiting for a run and those in flight; None when the study holds
    nothing back (or has finished)."""
    if not waiting or study.status not in (ACTIVE, STOPPED):
        return None
    head = f"study {md_text(study.name)} · {waiting} run{'s' if waiting != 1 else ''} held back: "
    if study.status == STOPPED:
        return head + "the study is stopped; **Resume all** on the Studies page queues them"
    return (head + f"at most {study.max_concurrent} at once (the study's `max_concurrent`), {in_flight} in "
            f"flight; each is queued on {md_code(study.queue)} as one of them ends")


def render_held_back(store: Store) -> None:
    """One line per study that holds runs back, under the queues (two statements however many studies)."""
    studies = StudyStore(store)
    listed = studies.list_studies([ACTIVE, STOPPED])
    counts = studies.waiting_and_in_flight(study.id for study in listed)
    lines = [line for study in listed if (line := held_back_line(study, *counts.get(study.id, (0, 0))))]
    if lines:
        st.markdown("**Held back by their study** (not in a queue yet)")
        for line in lines:
            st.markdown(f"- {line}")
