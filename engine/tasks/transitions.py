"""Reusable external transitions: self-refinement with feedback and role-switching self-play.

Both factories return a function with CoMLRL's keyword-only transition signature::

    transition(*, prompt, agent_completions, num_agents,
               prompt_history_per_agent, response_history_per_agent) -> list[str]

``prompt`` is the item's original prompt, ``agent_completions[i]`` agent ``i``'s reply this turn,
the histories hold each agent's earlier prompts and replies (this turn's reply may or may not be
appended yet; both are handled). The returned list holds each agent's next prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from engine.permissions.invisible_text import strip_invisible
from engine.tasks.base import TaskError

FeedbackFunc = Callable[..., str]

DEFAULT_REVISE_TEMPLATE = (
    "{original}\n\nYour previous answer:\n{previous}\n\nFeedback:\n{feedback}\n\n"
    "Write an improved answer."
)
DEFAULT_FEEDBACK = "Check your answer for mistakes and make it clearer and more complete."


def _as_text(completion: Any) -> str:
    if isinstance(completion, (list, tuple)):  # one-element lists from some callers
        return str(completion[0]) if completion else ""
    return str(completion)


def _turn_number(histories: Sequence[Sequence[str]] | None, agent: int) -> int:
    """1-based turn that just finished, read from the prompt history (one prompt per turn so far)."""
    if not histories or agent >= len(histories):
        return 1
    return max(1, len(histories[agent]))


def _comlrl_transition(name: str, next_prompt: Callable[[str, list[str], int, int], str]) -> Callable[..., list[str]]:
    """CoMLRL's transition signature around ``next_prompt(prompt, replies, agent_index, turn_done)``:
    the replies read as text and counted against the team, one next prompt per agent."""

    def transition(
        *,
        prompt: str,
        agent_completions: Sequence[Any],
        num_agents: int,
        prompt_history_per_agent: Sequence[Sequence[str]] | None = None,
        response_history_per_agent: Sequence[Sequence[str]] | None = None,
        **_: Any,
    ) -> list[str]:
        replies = [_as_text(c) for c in agent_completions]
        if len(replies) != num_agents:
            raise TaskError(f"{name}: got {len(replies)} completions for {num_agents} agents")
        return [next_prompt(prompt, replies, i, _turn_number(prompt_history_per_agent, i)) for i in range(num_agents)]

    transition.__name__ = name
    return transition


def revise_with_feedback(
    feedback: FeedbackFunc | None = None,
    *,
    template: str = DEFAULT_REVISE_TEMPLATE,
    include_original: bool = True,
    original: Callable[[str, int], str] | None = None,
) -> Callable[..., list[str]]:
    """A transition that asks every agent to revise its own previous answer given feedback.

    ``feedback(prompt=, completion=, agent_index=, turn=, agent_completions=)`` returns the feedback
    text (for code, the test results, which a partner's code can shape); characters a reader cannot
    see are stripped from it (:func:`engine.permissions.invisible_text.strip_invisible`), newlines and tabs stay.
    Without ``feedback`` a generic request to improve is used. The ``template`` may use
    ``{original}``, ``{previous}``, ``{feedback}`` and ``{turn}``.
    ``original(prompt, agent_index)`` rewrites the task text per agent (e.g. its role's
    instructions); by default ``{original}`` is the item's prompt, or empty when
    ``include_original`` is False (shorter prompts for later turns).
    """
    _check_template(template, {"original", "previous", "feedback", "turn"}, "revise_with_feedback")

    def revised(prompt: str, replies: list[str], i: int, turn: int) -> str:
        text = (
            strip_invisible(feedback(prompt=prompt, completion=replies[i], agent_index=i, turn=turn,
                                     agent_completions=replies))
            if feedback is not None
            else DEFAULT_FEEDBACK
        )
        return template.format(original=_original_text(prompt, i, original, include_original), previous=replies[i],
                               feedback=text, turn=turn + 1).strip()

    return _comlrl_transition("revise_with_feedback", revised)


def _original_text(
    prompt: str, agent: int, original: Callable[[str, int], str] | None, include_original: bool
) -> str:
    if not include_original:
        return ""
    return original(prompt, agent) if original is not None else prompt


def alternate_roles(
    roles: Sequence[str],
    *,
    role_templates: Sequence[str] | None = None,
) -> Callable[..., list[str]]:
    """A transition where each agent plays the next role every turn (self-play with one agent).

    At turn ``t`` (1-based) agent ``i`` plays ``roles[(i + t - 1) % len(roles)]``; the transition
    builds the prompt of the role it plays next from ``role_templates[role]``, which may use
    ``{original}``, ``{previous}`` (the reply of whoever played the previous role: this agent's own
    reply when it is alone), ``{role}`` and ``{turn}``. Use :func:`role_for_turn` in the first-turn
    formatter so turn 1 matches.
    """
    roles = list(roles)
    if len(roles) < 2:
        raise TaskError("alternate_roles: give at least two roles to switch between")
    templates = list(role_templates) if role_templates is not None else [
        "You are the {role}.\nTask: {original}\n\nPrevious message:\n{previous}\n\nReply as the {role}."
        for _ in roles
    ]
    if len(templates) != len(roles):
        raise TaskError(f"alternate_roles: {len(templates)} role templates for {len(roles)} roles")
    for template in templates:
        _check_template(template, {"original", "previous", "role", "turn"}, "alternate_roles")

    def next_role(prompt: str, replies: list[str], i: int, turn: int) -> str:
        role_index = role_for_turn(i, turn + 1, len(roles))
        # whoever played the role before this one in the cycle: agent i-1 (wrapping), or itself
        previous = replies[(i - 1) % len(replies)]
        return templates[role_index].format(original=prompt, previous=previous, role=roles[role_index], turn=turn + 1)

    return _comlrl_transition("alternate_roles", next_role)


def role_for_turn(agent_index: int, turn: int, num_roles: int) -> int:
    """Index of the role agent ``agent_index`` plays at 1-based ``turn``."""
    return (agent_index + turn - 1) % num_roles


def _check_template(template: str, allowed: set[str], where: str) -> None:
    import string

    for _, field_name, _, _ in string.Formatter().parse(template):
        if field_name is not None and field_name not in allowed:
            raise TaskError(
                f"{where}: template field {{{field_name}}} is unknown; use {sorted('{' + a + '}' for a in allowed)}"
            )
