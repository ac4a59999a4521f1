"""Dialogue rendering of stored episodes: turn by turn, what the environment told the agents between turns
(its feedback, in a bubble of its own), one chat bubble per agent with its role name, the prompt it saw
(collapsible, "view as agent"), its reply, and reward/return/advantage beside it, with
its credit where the step measured it; preference pairs (winner and loser side by side with the reward
gap). Replies are shown by ``app.reply_text``: whole characters, code highlighted."""

from __future__ import annotations

from itertools import groupby

import streamlit as st

from app.escape import md_text
from app.pairs import pair_title, pairs_by_gap, preference_pairs
from app.reply_text import reply_parts, whole_characters
from app.turn_feedback import feedback_between
from db.records import EpisodeView
from engine.transcripts import TurnRecord

ENVIRONMENT_AVATAR = ":material/forum:"
AVATARS = (":material/smart_toy:", ":material/psychology:", ":material/support_agent:", ":material/engineering:",
           ":material/person:", ":material/face:")


CREDIT_HELP = ("credit: the team reward of this joint action less the team reward with this agent's reply "
               "left empty (what its reply added; measured for `credit_samples` joint actions per step).")


def turn_caption(turn: TurnRecord) -> str:
    """``reward 0.500 · return 0.750 · advantage +0.120``, then ``· credit +0.300`` where the turn's
    credit was measured (nothing when it is None)."""
    caption = f"reward {turn.reward:.3f} · return {turn.ret:.3f} · advantage {turn.advantage:+.3f}"
    return caption if turn.credit is None else f"{caption} · credit {turn.credit:+.3f}"


def has_credit(episodes: list[EpisodeView]) -> bool:
    """Whether any turn of these episodes carries a measured credit."""
    return any(turn.credit is not None for episode in episodes for turn in episode.turns)


def episode_title(episode: EpisodeView) -> str:
    item = f" · item {episode.item_index}" if episode.item_index is not None else ""
    return (f"step {episode.step} · {md_text(episode.split)} · sample {episode.sample_index}{item} · "
            f"team reward {episode.reward:.3f} · return {episode.ret:.3f}")


def render_reply(completion: str, *, code: bool = False) -> None:
    """A reply as the agent wrote it: whole characters (a character the token limit cut is left out, and
    said so), prose as plain text, code (fenced, or all of a coding task's reply) highlighted."""
    text, cut = whole_characters(completion or "")
    parts = reply_parts(text, code=code)
    if not parts:
        st.text("(empty reply)")
    for part in parts:
        if part.language is None:
            st.text(part.text)
        else:
            st.code(part.text, language=part.language, wrap_lines=True)
    if cut:
        st.caption("The last character was cut by the token limit (max_new_tokens) and is left out.")


def render_feedback(turns: list[TurnRecord], previous: dict[int, TurnRecord]) -> None:
    """The environment's text between the previous turn and ``turns`` (:func:`app.turn_feedback.feedback_between`),
    shown in the dialogue, not only inside the collapsed prompt: one bubble when every agent got the same
    text, else one line per agent."""
    said = {turn.agent_name: text for turn in turns if turn.agent_index in previous
            and (text := feedback_between(previous[turn.agent_index].prompt, previous[turn.agent_index].completion,
                                          turn.prompt))}
    if not said:
        return
    with st.chat_message("environment", avatar=ENVIRONMENT_AVATAR):
        if len(said) == len(turns) and len(set(said.values())) == 1:
            st.markdown("**environment** · to every agent")
            st.text(next(iter(said.values())))
            return
        for name, text in said.items():
            st.markdown(f"**environment** · to {md_text(name)}")
            st.text(text)


def render_episode(episode: EpisodeView, *, key: str, show_prompts: bool = False, code: bool = False) -> None:
    """One episode as a dialogue (``code``: a coding task, its replies shown as code); from the second turn
    on, what the environment told the agents between turns comes first (:func:`render_feedback`)."""
    previous: dict[int, TurnRecord] = {}
    with st.container(border=True):
        st.markdown(f"**{episode_title(episode)}**")
        for turn_index, grouped in groupby(episode.turns, key=lambda t: t.turn):
            st.caption(f"turn {turn_index}")
            turns = list(grouped)
            render_feedback(turns, previous)
            previous = {turn.agent_index: turn for turn in turns}
            for turn in turns:
                with st.chat_message(turn.agent_name, avatar=AVATARS[turn.agent_index % len(AVATARS)]):
                    name = md_text(turn.agent_name)  # a stored name: shown as text, never as markdown
                    st.markdown(f"**{name}** · {turn_caption(turn)}",
                                help=None if turn.credit is None else CREDIT_HELP)
                    with st.expander(f"view as {name}: the prompt it saw", expanded=show_prompts):
                        st.code(turn.prompt, language="text", wrap_lines=True)
                    render_reply(turn.completion, code=code)


def render_episodes(episodes: list[EpisodeView], *, key: str, show_prompts: bool = False, code: bool = False,
                    as_pairs: bool = False, gap: tuple[float | None, float | None] = (None, None),
                    max_pairs: int | None = None) -> None:
    """Episodes one after the other, or (``as_pairs``) preference pairs: winner and loser side by
    side, each agent's reply in both, under the pair's reward gap; only pairs whose gap lies in
    ``gap`` (min, max; None = unbounded), at most ``max_pairs`` of them. Where a turn carries credit,
    one caption says what credit is."""
    if has_credit(episodes):
        st.caption(CREDIT_HELP[0].upper() + CREDIT_HELP[1:])
    if not as_pairs:
        for episode in episodes:
            render_episode(episode, key=f"{key}.{episode.id}", show_prompts=show_prompts, code=code)
        return
    pairs = pairs_by_gap(preference_pairs(episodes), *gap)[:max_pairs]
    if not pairs and episodes:
        st.info("No pair at this step has a reward gap in the chosen range.")
    for index, (winner, loser) in enumerate(pairs, start=1):
        if loser is None:
            render_episode(winner, key=f"{key}.{winner.id}", show_prompts=show_prompts, code=code)
            continue
        st.markdown(f"#### {pair_title(index, winner, loser)}")
        left, right = st.columns(2)
        for column, side, episode in ((left, "winner", winner), (right, "loser", loser)):
            with column:
                st.caption(side)
                render_episode(episode, key=f"{key}.{episode.id}", show_prompts=show_prompts, code=code)
