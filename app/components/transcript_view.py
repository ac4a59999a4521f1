"""Dialogue rendering of stored episodes: turn by turn, one chat bubble per agent with its role name,
the prompt it saw (collapsible, "view as agent"), its reply, and reward/return/advantage beside it;
preference pairs (winner and loser side by side with the reward gap)."""

from __future__ import annotations

from itertools import groupby

import streamlit as st

from app.escape import md_text
from app.pairs import pair_title, pairs_by_gap, preference_pairs
from db.records import EpisodeView
from transcripts import TurnRecord

AVATARS = (":material/smart_toy:", ":material/psychology:", ":material/support_agent:", ":material/engineering:",
           ":material/person:", ":material/face:")


def turn_caption(turn: TurnRecord) -> str:
    """``reward 0.50 · return 0.75 · advantage +0.12``."""
    return f"reward {turn.reward:.3f} · return {turn.ret:.3f} · advantage {turn.advantage:+.3f}"


def episode_title(episode: EpisodeView) -> str:
    item = f" · item {episode.item_index}" if episode.item_index is not None else ""
    return (f"step {episode.step} · {md_text(episode.split)} · sample {episode.sample_index}{item} · "
            f"team reward {episode.reward:.3f} · return {episode.ret:.3f}")


def render_episode(episode: EpisodeView, *, key: str, show_prompts: bool = False) -> None:
    """One episode as a dialogue."""
    with st.container(border=True):
        st.markdown(f"**{episode_title(episode)}**")
        for turn_index, turns in groupby(episode.turns, key=lambda t: t.turn):
            st.caption(f"turn {turn_index}")
            for turn in turns:
                with st.chat_message(turn.agent_name, avatar=AVATARS[turn.agent_index % len(AVATARS)]):
                    name = md_text(turn.agent_name)  # a stored name: shown as text, never as markdown
                    st.markdown(f"**{name}** · {turn_caption(turn)}")
                    with st.expander(f"view as {name}: the prompt it saw", expanded=show_prompts):
                        st.code(turn.prompt, language="text", wrap_lines=True)
                    st.text(turn.completion if turn.completion else "(empty reply)")


def render_episodes(episodes: list[EpisodeView], *, key: str, show_prompts: bool = False,
                    as_pairs: bool = False, gap: tuple[float | None, float | None] = (None, None),
                    max_pairs: int | None = None) -> None:
    """Episodes one after the other, or (``as_pairs``) preference pairs: winner and loser side by
    side, each agent's reply in both, under the pair's reward gap; only pairs whose gap lies in
    ``gap`` (min, max; None = unbounded), at most ``max_pairs`` of them."""
    if not as_pairs:
        for episode in episodes:
            render_episode(episode, key=f"{key}.{episode.id}", show_prompts=show_prompts)
        return
    pairs = pairs_by_gap(preference_pairs(episodes), *gap)[:max_pairs]
    if not pairs and episodes:
        st.info("No pair at this step has a reward gap in the chosen range.")
    for index, (winner, loser) in enumerate(pairs, start=1):
        if loser is None:
            render_episode(winner, key=f"{key}.{winner.id}", show_prompts=show_prompts)
            continue
        st.markdown(f"#### {pair_title(index, winner, loser)}")
        left, right = st.columns(2)
        for column, side, episode in ((left, "winner", winner), (right, "loser", loser)):
            with column:
                st.caption(side)
                render_episode(episode, key=f"{key}.{episode.id}", show_prompts=show_prompts)
