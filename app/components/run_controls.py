"""Run header and controls shared by the Runs and Run detail pages: status, stop, cancel, resume,
delete (with confirmation), tags and notes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from app import commands, context, control
from app.components.store_outage import render_run_outage
from app.escape import md_code, md_message
from app.live import poll_every
from app.queries import experiment_names, heartbeat_age, run_label
from app.runinfo import actions_for, format_duration, header_step, redraws_page, status_markdown
from db.errors import NotFoundError, RunActiveError
from db.records import Run
from db.states import TERMINAL_STATUSES
from db.store import Store


def status_line(store: Store, run_id: int) -> Run | None:
    """Status badge, progress, rate and heartbeat of a run (refreshed inside a live fragment); a finished
    run shows when it ended instead of a heartbeat age that would keep growing."""
    try:
        run = store.get_run(run_id)
    except NotFoundError:
        st.warning(f"Run #{run_id} no longer exists.")
        return None
    rate = store.run_rate(run_id)
    resumed = resume_point(store, run) if run.resumed_from is not None and run.step == 0 else None
    step = header_step(run, resumed[0] if resumed else None)
    c1, c2, c3, c4, c5 = st.columns([2, 1, 1, 1, 1])
    c1.metric("status", status_markdown(run.status))
    c2.metric("step", f"{step}/{run.total_steps}" if run.total_steps else str(step))
    c3.metric("steps/s", f"{rate.steps_per_s:.2f}" if rate.steps_per_s else "—")
    c4.metric("ETA", format_duration(rate.eta_s) if run.status in ("starting", "running") else "—")
    now = store.server_now()
    if run.status in TERMINAL_STATUSES:  # no heartbeat comes any more: its age would only grow
        c5.metric("ended (UTC)", end_time(run.finished_at, now),
                  help="When the run reached its final state"
                       + (f" ({run.finished_at:%Y-%m-%d %H:%M:%S} UTC)" if run.finished_at else "")
                       + "; a finished run sends no heartbeat.")
    else:
        c5.metric("heartbeat", heartbeat_age(run.heartbeat_at, now))
    if run.total_steps:
        st.progress(min(1.0, step / run.total_steps))
    st.caption(f"device {md_code(run.device or run.queue)} · worker {md_code(run.worker) if run.worker else '—'} · "
               f"attempt {run.attempt}"
               + (f" · resumed from #{run.resumed_from}" if run.resumed_from else "")
               + (f" · continues from step {resumed[0]} (the checkpoint of #{resumed[1]})" if resumed else ""))
    if run.status == "stopping":
        st.info("Stopping: the worker saves a checkpoint and ends the run; the final state appears here.")
    render_run_outage(store, run)
    if run.error:
        with st.expander("error", expanded=run.status == "failed"):
            st.code(run.error, language="text")
    return run


def end_time(finished_at: datetime | None, now: datetime) -> str:
    """A finished run's end as a header's narrow column holds it: ``14:05`` the same day (UTC), else
    ``06 Dec``; ``—`` when it was not recorded."""
    if finished_at is None:
        return "—"
    return f"{finished_at:%H:%M}" if finished_at.date() == now.date() else f"{finished_at:%d %b}"


def resume_point(store: Store, run: Run) -> tuple[int, int] | None:
    """``(step, run id)`` of the checkpoint a resumed attempt continues from: the newest checkpoint
    along its ``resumed_from`` chain (an attempt that saved none passes on the one it started from)."""
    seen: set[int] = set()
    source = run.resumed_from
    while source is not None and source not in seen:
        seen.add(source)
        checkpoint = store.latest_checkpoint(source)
        if checkpoint is not None:
            return checkpoint.step, source
        try:
            source = store.get_run(source).resumed_from
        except NotFoundError:
            return None
    return None


def action_buttons(store: Store, run: Run, key: str) -> None:
    """The buttons a run's state allows; each goes through ``jobs.client`` (delete through ``app.commands``)."""
    allowed = actions_for(run.status)
    shown = [name for name, on in (("stop", allowed.stop), ("cancel", allowed.cancel),
                                   ("resume", allowed.resume), ("delete", allowed.delete)) if on]
    if not shown:
        return
    cols = dict(zip(shown, st.columns(max(4, len(shown))), strict=False))
    try:
        if allowed.stop and cols["stop"].button("Stop", key=f"{key}.stop", icon=":material/stop:"):
            control.stop(run.id)
            st.toast(f"Asked run #{run.id} to stop.")
            st.rerun()
        if allowed.cancel and cols["cancel"].button("Cancel", key=f"{key}.cancel", icon=":material/cancel:"):
            control.cancel(run.id)
            st.toast(f"Cancelled queued run #{run.id}.")
            st.rerun()
        if allowed.resume and cols["resume"].button(
            "Resume", key=f"{key}.resume", icon=":material/play_arrow:",
            help="A new attempt that continues from the last checkpoint.",
        ):
            new_id = control.resume(run.id)
            context.select_run(new_id)
            st.toast(f"Resumed as run #{new_id}.")
            st.rerun()
    except control.ControlError as exc:
        st.error(md_message(exc))
    if allowed.delete:
        with cols["delete"].popover("Delete", icon=":material/delete:"):
            st.markdown(f"Delete run #{run.id} with its metrics and transcripts? Files on disk stay.")
            if st.button("Yes, delete", type="primary", key=f"{key}.delete"):
                try:
                    commands.delete_run(store, run.id)
                except RunActiveError as exc:
                    st.error(md_message(exc))
                else:
                    context.select_run(None)
                    st.toast(f"Deleted run #{run.id}.")
                    st.rerun()


@dataclass(frozen=True)
class Header:
    """A run's header as drawn: the run as the page was drawn for, and the box its status goes in (filled
    by :meth:`follow`, inside the page's live region)."""

    run: Run
    box: DeltaGenerator

    @property
    def every(self) -> float | None:
        """How often the page's live region reruns for the run as drawn (None: an ended run, not polled)."""
        return poll_every(context.refresh_every(), self.run.status)

    def status(self, store: Store) -> Run | None:
        """The status line here, read afresh; the page is drawn again when the run's state changes what it
        shows (its buttons, or whether it polls: :func:`app.runinfo.redraws_page`)."""
        run = status_line(store, self.run.id)
        if run is not None and redraws_page(self.run.status, run.status):
            st.rerun()
        return run

    def follow(self, store: Store) -> Run | None:
        """:meth:`status` in the header's box, from a live region drawn elsewhere on the page."""
        with self.box:
            return self.status(store)


def header_box(store: Store, run_id: int, key: str) -> Header | None:
    """A run's header with its status left to :meth:`Header.follow`: an empty box for the status, the
    control buttons below it (outside any refreshing region, so they stay put under the pointer; the page
    is redrawn when the state changes them). A page that polls one live region fills the box from it."""
    try:
        shown = store.get_run(run_id)
    except NotFoundError:
        st.warning(f"Run #{run_id} no longer exists.")
        return None
    box = st.container()
    action_buttons(store, shown, key)
    return Header(shown, box)


def run_header(store: Store, run_id: int, key: str) -> Run | None:
    """Live status of a run, with its control buttons below.

    Only the status refreshes on the timer (its own region); the buttons are drawn outside the
    auto-refreshing region so that they stay put under the pointer, and the page is redrawn when the
    state changes what it shows (so the buttons always match the state, e.g. Resume appears once a run
    has stopped; not from starting to running, :func:`app.runinfo.redraws_page`).
    """
    header = header_box(store, run_id, key)
    if header is None:
        return None
    poll_status(store, header)
    return header.run


def poll_status(store: Store, header: Header) -> None:
    """The header's status as a region of its own, in its box, polled while the run is active."""

    @st.fragment(run_every=header.every)  # an ended run is not polled
    def live_status() -> None:
        header.status(store)

    with header.box:
        live_status()


def notes_editor(store: Store, run: Run, key: str) -> None:
    """Tags and notes of a run (a form: nothing is written until Save)."""
    with st.form(f"{key}.notes_form"):
        tags = st.text_input("tags (comma-separated)", value=", ".join(run.tags), key=f"{key}.tags")
        notes = st.text_area("notes (markdown)", value=run.notes, key=f"{key}.notes", height=80)
        if st.form_submit_button("Save tags and notes"):
            commands.set_run_notes(store, run.id, tags=tags, notes=notes)
            st.toast("Saved.")
            st.rerun()


def choose_run(store: Store, *, key: str, when_none: str, runs_link: bool = False) -> int:
    """The run a run page shows: from the URL or this session, picked among the 200 newest (a run
    linked directly is added to them). With no runs at all, says ``when_none`` and stops the page."""
    names = experiment_names(store)
    recent = store.list_runs(limit=200)
    if not recent and "run" not in st.query_params:
        st.info(when_none)
        if runs_link:
            st.page_link("app_pages/runs.py", label="Go to Runs", icon=":material/directions_run:")
        st.stop()
    current = context.page_run(store, recent[0].id if recent else None)
    labels = {r.id: run_label(r, names) for r in recent}
    if current not in labels:  # an older run linked directly
        labels = {current: run_label(store.get_run(current), names), **labels}
    return context.run_picker(labels, key=key, current=current)
