"""Study runs held back: children a study has not queued yet, listed on the Workers page with why
(its cap on runs in flight, or the study being stopped), so a queue that looks short is not read as
all there is."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from app.escape import md_code, md_text
from db import states
from db.store import Store
from db.study_records import ACTIVE, PENDING, STOPPED, Study, StudyTrial
from db.study_store import StudyStore


def held_back_line(study: Study, trials: Sequence[StudyTrial]) -> str | None:
    """``study lr sweep · 6 runs held back: at most 2 at once, 2 in flight`` (Markdown, the name as
    text); None when the study holds nothing back (or has finished)."""
    waiting = sum(t.status == PENDING for t in trials)
    if not waiting or study.status not in (ACTIVE, STOPPED):
        return None
    head = f"study {md_text(study.name)} · {waiting} run{'s' if waiting != 1 else ''} held back: "
    if study.status == STOPPED:
        return head + "the study is stopped; **Resume all** on the Studies page queues them"
    in_flight = sum(t.status in states.ACTIVE_STATUSES for t in trials)
    return (head + f"at most {study.max_concurrent} at once (the study's `max_concurrent`), {in_flight} in "
            f"flight; each is queued on {md_code(study.queue)} as one of them ends")


def render_held_back(store: Store) -> None:
    """One line per study that holds runs back, under the queues."""
    studies = StudyStore(store)
    lines = [line for study in studies.list_studies([ACTIVE, STOPPED])
             if (line := held_back_line(study, studies.trials(study.id)))]
    if lines:
        st.markdown("**Held back by their study** (not in a queue yet)")
        for line in lines:
            st.markdown(f"- {line}")
