"""The quick-start task "split the alphabet": two agents that visibly learn to cooperate on a CPU.

Agent ``first`` should write letters from the first half of the alphabet (a-m), agent ``second``
from the second half (n-z). Each part is scored by the fraction of its characters that come from
its half; the team reward is the geometric mean of the two fractions, so it is high only when both
parts fit together and zero when either agent fails. The signal is dense (every character counts),
which is why two tiny random models learn it in about a minute: random text scores about 0.3 and
the team reward climbs toward 1.0 (see ``docs/tasks.md`` for the measured curve).
"""

from __future__ import annotations

import math

from engine.preference.centralized import EqualPartsCentralizedAdapter
from engine.rewards.reward_terms import RewardTerm, RewardTerms
from engine.schema.task_params import QUICKSTART_HELD_OUT_TOPICS, QUICKSTART_TOPICS, QuickstartParams
from engine.tasks.base import Task
from engine.tasks.datasets import task_from_items

ROLES = ("first", "second")


def letter_fraction(text: str, letters: str) -> float:
    """Fraction of the characters of ``text`` that are in ``letters`` (0 for an empty text)."""
    if not text:
        return 0.0
    allowed = set(letters)
    return sum(ch in allowed for ch in text) / len(text)


def team_fit(first: str, second: str, first_letters: str, second_letters: str) -> float:
    """Geometric mean of both parts' on-role fractions: high only when both parts fit."""
    return math.sqrt(letter_fraction(first, first_letters) * letter_fraction(second, second_letters))


def quickstart_reward(first_letters: str, second_letters: str, *, task: str = "quickstart") -> RewardTerms:
    """The team reward ``team`` plus the two per-part fractions (logged, weight 0)."""

    def first_part(agent_completions, batch_items, prompts):
        return [letter_fraction(text, first_letters) for text in agent_completions[0]]

    def second_part(agent_completions, batch_items, prompts):
        return [letter_fraction(text, second_letters) for text in agent_completions[1]]

    def team(agent_completions, batch_items, prompts):
        return [
            team_fit(a, b, first_letters, second_letters)
            for a, b in zip(agent_completions[0], agent_completions[1], strict=True)
        ]

    return RewardTerms(
        task=task,
        terms=[
            RewardTerm("team", team, 1.0),
            RewardTerm("first_part", first_part, 0.0),
            RewardTerm("second_part", second_part, 0.0),
        ],
    )


def _items(topics: tuple[str, ...]) -> list[dict]:
    return [{"prompt": f"Split the alphabet. Topic: {topic}.", "topic": topic} for topic in topics]


def build_quickstart(params: QuickstartParams, num_agents: int) -> Task:
    """Two agents, one half of the alphabet each."""
    first, second = params.first_letters, params.second_letters

    def first_formatter(item: dict) -> str:
        return f"{item['prompt']} Write letters from {first[0]} to {first[-1]}:\n"

    def second_formatter(item: dict) -> str:
        return f"{item['prompt']} Write letters from {second[0]} to {second[-1]}:\n"

    train = _items(QUICKSTART_TOPICS[: params.num_items])
    evals = _items(QUICKSTART_HELD_OUT_TOPICS[: params.eval_items])
    return task_from_items(
        train,
        evals,
        name="quickstart",
        roles=list(ROLES),
        formatters=[first_formatter, second_formatter],
        reward_func=quickstart_reward(first, second),
        check=lambda item, completions: team_fit(completions[0], completions[1], first, second) >= 0.9,
        max_turns=1,
        description="Two agents each write one half of the alphabet; the team scores when both halves fit.",
        centralized_adapter=EqualPartsCentralizedAdapter() if params.centralized_protocol == "halves" else None,
    )
