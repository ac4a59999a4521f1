"""Transcripts: the sampled episodes of a training step as dialogues, filterable, two steps side by side;
a preference run's pairs as winner and loser side by side."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from app import context
from app.components.run_controls import choose_run
from app.components.study_seeds import study_point_seeds
from app.components.transcript_view import render_episode, render_episodes
from app.live_transcripts import follow_latest, live_episodes
from app.pairs import stores_pairs
from app.queries import episodes_by_item, history_caption
from app.reply_text import is_code_task
from db.records import EpisodeView, Lineage
from db.states import TERMINAL_STATUSES
from db.store import Store

GAP_SCAN = 5000  # with a reward-gap range, a step's episodes are read up to this many, then `limit` are shown


@dataclass(frozen=True)
class Reading:
    """What the page reads: the run and its history, the filters, and how episodes are shown."""

    run_id: int
    history: Lineage
    split: str | None
    filters: dict[str, Any]
    limit: int
    show_prompts: bool
    code: bool
    as_pairs: bool
    gap: tuple[float | None, float | None]

    def step_owners(self, store: Store) -> dict[int, int]:
        """Step → the run (attempt) whose episodes of that step are shown."""
        if self.history.joined:
            return dict(store.lineage_episode_steps(self.history, split=self.split))
        return dict.fromkeys(store.episode_steps(self.run_id, split=self.split), self.run_id)

    @property
    def scan(self) -> int:
        """How many episodes of a step are read: with a reward-gap range, enough to find pairs in it."""
        return GAP_SCAN if self.gap != (None, None) else self.limit

    def episodes_at(self, store: Store, step: int, owners: dict[int, int]) -> list[EpisodeView]:
        return store.episodes(owners.get(step, self.run_id), step=step, limit=self.scan, **self.filters)

    def show(self, episodes: list[EpisodeView]) -> None:
        render_episodes(episodes, key="tr", show_prompts=self.show_prompts, code=self.code, as_pairs=self.as_pairs,
                        gap=self.gap, max_pairs=max(1, self.limit // 2) if self.gap != (None, None) else None)


def reading(store: Store, run_id: int) -> Reading:
    """The run's history, the filters (split, text, reward range, how many), and how to show episodes
    (every prompt, as code, as preference pairs with a reward-gap range)."""
    history = store.lineage(run_id)  # a resumed run's attempts read as one history
    if history.joined:
        st.caption(f"History: {history_caption(history)}; each step is read from the latest attempt that "
                   "logged it.")
    f1, f2, f3, f4 = st.columns([1, 2, 2, 1])
    split = f1.selectbox("split", [None, "train", "eval"], key="tr_split",
                         format_func=lambda s: "(all)" if s is None else s)
    text = f2.text_input("text search", placeholder="words in a prompt or reply", key="tr_text") or None
    r1, r2 = f3.columns(2)
    min_reward = r1.number_input("min reward", value=None, format="%g", key="tr_min")
    max_reward = r2.number_input("max reward", value=None, format="%g", key="tr_max")
    limit = f4.selectbox("episodes", [5, 10, 20, 50], index=1, key="tr_limit")
    t1, t2 = st.columns(2)
    show_prompts = t1.toggle("show every prompt", key="tr_prompts")
    code = is_code_task(store.get_run(run_id).config, context.task_catalog())  # replies shown as code
    as_pairs = stores_pairs(store.get_run(run_id).config) and t2.toggle(
        "show as preference pairs", value=True, key="tr_pairs",
        help="This run trains on preference pairs: each pair's winner and loser side by side, with the reward gap.")
    gap: tuple[float | None, float | None] = (None, None)
    if as_pairs:
        g1, g2, _ = st.columns([1, 1, 4])
        gap = (g1.number_input("min reward gap", value=None, min_value=0.0, format="%g", key="tr_gap_min",
                               help="Only pairs whose winner beats the loser by at least this much team reward."),
               g2.number_input("max reward gap", value=None, min_value=0.0, format="%g", key="tr_gap_max"))
    filters = {"split": split, "text": text, "min_reward": min_reward, "max_reward": max_reward}
    return Reading(run_id, history, split, filters, limit, show_prompts, code, as_pairs, gap)


def one_step(store: Store, read: Reading, steps: list[int], owners: dict[int, int]) -> None:
    """The latest step, followed while the run trains, or a step picked on a slider."""
    s1, s2 = st.columns([1, 4])
    latest = s1.toggle("latest step", value=True, key="tr_latest", help="Follow the newest step while the run trains.")
    if latest:
        newest = max(steps)
        if read.history.attempts[-1].status in TERMINAL_STATUSES:  # ended: read once, never polled
            attempt = f" (run #{owners[newest]})" if read.history.joined else ""
            st.caption(f"latest step: {newest}{attempt}")
            episodes = read.episodes_at(store, newest, owners)
            if not episodes:
                st.info("No episode at this step matches the filters.")
            read.show(episodes)
            return
        # a live run: each poll reads only the episodes stored since the last (app.live_transcripts)
        follow_latest(store, live_episodes(st.session_state, f"live_transcripts.{read.run_id}", read.history.latest),
                      every=context.refresh_every(), filters=read.filters, limit=read.scan, show=read.show,
                      before=lambda: (newest, owners[newest], read.episodes_at(store, newest, owners)),
                      name_run=read.history.joined)
        return
    step = s2.select_slider("step", steps, value=steps[-1], key=f"tr_step_{read.run_id}")
    episodes = read.episodes_at(store, step, owners)
    if not episodes:
        st.info("No episode at this step matches the filters.")
    read.show(episodes)


def two_steps(store: Store, read: Reading, steps: list[int], owners: dict[int, int]) -> None:
    """The same dataset items at an earlier and a later step, with the reward change."""
    c1, c2 = st.columns(2)
    step_a = c1.selectbox("earlier step", steps, index=0, key=f"tr_a_{read.run_id}")
    step_b = c2.selectbox("later step", steps, index=len(steps) - 1, key=f"tr_b_{read.run_id}")
    left = episodes_by_item(read.episodes_at(store, step_a, owners))
    right = episodes_by_item(read.episodes_at(store, step_b, owners))
    shared = [item for item in left if item in right]
    if not shared:
        st.info("These two steps share no dataset item (with these filters); pick other steps.")
    for item in shared:
        a, b = left[item], right[item]
        st.markdown(f"#### item {item} · team reward {a.reward:.3f} → {b.reward:.3f} "
                    f"({b.reward - a.reward:+.3f})")
        col_a, col_b = st.columns(2)
        with col_a:
            render_episode(a, key=f"tra.{a.id}", show_prompts=read.show_prompts, code=read.code)
        with col_b:
            render_episode(b, key=f"trb.{b.id}", show_prompts=read.show_prompts, code=read.code)


def transcripts_page() -> None:
    store = context.store()
    st.title("Transcripts")
    study_point_seeds(store)  # a study point's seeds side by side (only when there are studies)
    run_id = choose_run(store, key="tr_pick", when_none="No runs yet. Launch one from the Experiments page; each "
                        "training step stores sampled episodes that you can read here.")
    read = reading(store, run_id)
    owners = read.step_owners(store)
    steps = list(owners)
    if not steps:
        st.info("This run has no stored episodes yet; they appear after its first training step.")
        st.stop()
    if st.toggle("compare two steps side by side", key="tr_compare"):
        two_steps(store, read, steps, owners)
    else:
        one_step(store, read, steps, owners)


transcripts_page()
