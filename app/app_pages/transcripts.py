"""Transcripts: the sampled episodes of a training step as dialogues, filterable, two steps side by side;
a preference run's pairs as winner and loser side by side."""

from __future__ import annotations

import streamlit as st

from app import context
from app.components.run_controls import choose_run
from app.components.study_seeds import study_point_seeds
from app.components.transcript_view import render_episode, render_episodes
from app.pairs import stores_pairs
from app.queries import episodes_by_item, history_caption
from app.reply_text import is_code_task

store = context.store()
st.title("Transcripts")
study_point_seeds(store)  # a study point's seeds side by side (only when there are studies)

run_id = choose_run(store, key="tr_pick", when_none="No runs yet. Launch one from the Experiments page; each "
                    "training step stores sampled episodes that you can read here.")

# A resumed run's attempts read as one history: each step from the attempt that owns it.
history = store.lineage(run_id)
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
GAP_SCAN = 5000  # with a gap range, a step's episodes are read up to this many, then `limit` are shown


def step_owners() -> dict[int, int]:
    """Step → the run (attempt) whose episodes of that step are shown."""
    if history.joined:
        return dict(store.lineage_episode_steps(history, split=split))
    return dict.fromkeys(store.episode_steps(run_id, split=split), run_id)


def episodes_at(step: int, owners: dict[int, int]):
    scan = GAP_SCAN if gap != (None, None) else limit
    return store.episodes(owners.get(step, run_id), step=step, limit=scan, **filters)


def show(episodes) -> None:
    render_episodes(episodes, key="tr", show_prompts=show_prompts, code=code, as_pairs=as_pairs, gap=gap,
                    max_pairs=max(1, limit // 2) if gap != (None, None) else None)


owners = step_owners()
steps = list(owners)
if not steps:
    st.info("This run has no stored episodes yet; they appear after its first training step.")
    st.stop()

side_by_side = st.toggle("compare two steps side by side", key="tr_compare")
if not side_by_side:
    s1, s2 = st.columns([1, 4])
    latest = s1.toggle("latest step", value=True, key="tr_latest",
                       help="Follow the newest step while the run trains.")
    if latest:
        @st.fragment(run_every=context.refresh_every())
        def live_latest() -> None:
            now = step_owners()
            newest = max(now)
            attempt = f" (run #{now[newest]})" if history.joined else ""
            st.caption(f"latest step: {newest}{attempt}")
            episodes = episodes_at(newest, now)
            if not episodes:
                st.info("No episode at this step matches the filters.")
            show(episodes)

        live_latest()
    else:
        step = s2.select_slider("step", steps, value=steps[-1], key=f"tr_step_{run_id}")
        episodes = episodes_at(step, owners)
        if not episodes:
            st.info("No episode at this step matches the filters.")
        show(episodes)
else:
    c1, c2 = st.columns(2)
    step_a = c1.selectbox("earlier step", steps, index=0, key=f"tr_a_{run_id}")
    step_b = c2.selectbox("later step", steps, index=len(steps) - 1, key=f"tr_b_{run_id}")
    left = episodes_by_item(episodes_at(step_a, owners))
    right = episodes_by_item(episodes_at(step_b, owners))
    shared = [item for item in left if item in right]
    if not shared:
        st.info("These two steps share no dataset item (with these filters); pick other steps.")
    for item in shared:
        a, b = left[item], right[item]
        st.markdown(f"#### item {item} · team reward {a.reward:.3f} → {b.reward:.3f} "
                    f"({b.reward - a.reward:+.3f})")
        col_a, col_b = st.columns(2)
        with col_a:
            render_episode(a, key=f"tra.{a.id}", show_prompts=show_prompts, code=code)
        with col_b:
            render_episode(b, key=f"trb.{b.id}", show_prompts=show_prompts, code=code)
