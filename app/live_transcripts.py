"""Live transcripts that cost almost nothing: a running run's newest sampled dialogues held in the
browser session and replaced only when a newer step's episodes arrive.

:class:`LiveEpisodes` asks the store only for episodes past the last one seen
(:meth:`db.ops_transcripts.TranscriptOps.episodes_since`): a poll with nothing new is one indexed read
and redraws the held dialogues from memory; a poll after new steps reads the newest step's matching
episodes once, and counts the new ones. :func:`follow_latest` is the polled region (``st.fragment``
with ``run_every``, like the live charts of :mod:`app.live`); it polls only while the run is active,
and reruns the page once the run has ended, so an ended run's transcripts are read once and never
polled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from db.records import EpisodesSince, EpisodeView
from db.states import TERMINAL_STATUSES
from db.store import Store

Before = tuple[int, int, list[EpisodeView]]
"""A step shown while the followed attempt has no episode yet: (step, the run that logged it, episodes)."""


@dataclass
class LiveEpisodes:
    """The newest step's episodes of one run matching the filters (``look``), brought up to date by
    :meth:`refresh` with only what was stored since the last read.

    ``queries`` and ``rows`` count the reads and the episodes they brought (what a test checks: a poll
    brings only new episodes); ``latest`` is how many new matching episodes the last read that found
    any brought, ``arrived`` how many came since the view opened (the first read not counted)."""

    run_id: int
    look: tuple = ()
    after_id: int = 0
    step_from: int = 0
    step: int | None = None
    episodes: tuple[EpisodeView, ...] = ()
    before: Before | None = None
    latest: int = 0
    arrived: int = 0
    reads: int = 0
    queries: int = 0
    rows: int = 0

    def refresh(self, store: Store, filters: dict[str, Any], limit: int) -> bool:
        """Bring the newest step's episodes up to date; True when newer ones arrived. Other filters or
        another limit than the last read's start over from the run's first episode."""
        look = (tuple(sorted(filters.items())), int(limit))
        if look != self.look:
            self.look, self.after_id, self.step_from, self.step, self.episodes = look, 0, 0, None, ()
            self.before, self.latest, self.arrived, self.reads = None, 0, 0, 0
        found: EpisodesSince = store.episodes_since(self.run_id, after_id=self.after_id, step_from=self.step_from,
                                                    limit=int(limit), **filters)
        self.queries += 1
        self.rows += len(found.episodes)
        self.after_id, self.step_from = found.top_id, found.top_step
        first, self.reads = not self.reads, self.reads + 1
        if found.step is None:
            return False
        self.step, self.episodes = found.step, found.episodes
        if not first:
            self.latest = found.count
            self.arrived += found.count
        return True


def live_episodes(state: dict, key: str, run_id: int) -> LiveEpisodes:
    """The session's held episodes under ``key`` following ``run_id`` (made anew when it follows
    another run, e.g. a resumed attempt), kept in ``state`` (``st.session_state``)."""
    found = state.get(key)
    if not isinstance(found, LiveEpisodes) or found.run_id != run_id:
        found = state[key] = LiveEpisodes(run_id)
    return found


def follow_latest(store: Store, held: LiveEpisodes, *, every: float | None, filters: dict[str, Any], limit: int,
                  show: Callable[[list[EpisodeView]], None], before: Callable[[], Before | None],
                  name_run: bool) -> None:
    """The newest step's dialogues of the run ``held`` follows (an active one), polled every ``every``
    seconds (None: live refresh off): each poll reads only the episodes stored since the last. While
    that run has no matching episode yet, the step ``before`` names is shown (read once; an earlier
    attempt's, for a resumed run). ``name_run``: say which run logged the step shown."""

    @st.fragment(run_every=every)
    def live_latest() -> None:
        if store.get_run(held.run_id).status in TERMINAL_STATUSES:
            st.rerun()  # the run ended: the page draws its transcripts once, and nothing polls
        held.refresh(store, filters, limit)
        if held.step is not None:
            step, owner, episodes = held.step, held.run_id, list(held.episodes)
        else:
            if held.before is None:
                held.before = before()
            if held.before is None:
                st.info("No episode matches the filters yet.")
                return
            step, owner, episodes = held.before
        note = f" (run #{owner})" if name_run else ""
        if held.arrived:
            note += f" · {held.latest:,} new episode(s) at the last update, {held.arrived:,} since this view opened"
        st.caption(f"latest step: {step}{note}")
        if not episodes:
            st.info("No episode at this step matches the filters.")
        show(episodes)

    live_latest()
