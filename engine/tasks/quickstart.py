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
from typing import Literal

from pydantic import Field, field_validator

from engine.preference.centralized import EqualPartsCentralizedAdapter
from engine.rewards.reward_terms import RewardTerm, RewardTerms
from engine.tasks.base import Task, TaskParams
from engine.tasks.datasets import task_from_items

ROLES = ("first", "second")

_TOPICS = (
    "animals", "colours", "food", "music", "rivers", "stars", "tools", "games",
    "cities", "plants", "weather", "boats", "books", "birds", "stones", "clouds",
)
# held out: evaluation prompts no training step ever samples
_HELD_OUT_TOPICS = ("islands", "lamps", "bridges", "forests", "trains", "castles", "gardens", "oceans",
                    "deserts", "markets", "valleys", "kitchens")


class QuickstartParams(TaskParams):
    first_letters: str = Field("abcdefghijklm", min_length=1, description="Characters the first agent should write.")
    second_letters: str = Field("nopqrstuvwxyz", min_length=1, description="Characters the second agent should write.")
    num_items: int = Field(16, ge=1, le=len(_TOPICS), description="Training prompts (topics) in the dataset.")
    eval_items: int = Field(4, ge=0, le=len(_HELD_OUT_TOPICS), description="Held-out evaluation prompts (topics "
                            "never used for training; up to 12).")
    centralized_protocol: Literal["tags", "halves"] = Field(
        "tags", description="When one model writes both parts (centralized_magrpo, collaboration_mode centralized): "
        "'tags' (<agent_0>...</agent_0> sections, as CoMLRL) or 'halves' (the first half of its text is the first "
        "part; a tiny random model has no tags yet, so only halves gives it rewards to compare).")

    @field_validator("second_letters")
    @classmethod
    def _disjoint(cls, value: str, info) -> str:
        first = info.data.get("first_letters") or ""
        shared = sorted(set(first) & set(value))
        if shared:
            raise ValueError(f"the two halves must not share characters; both contain {''.join(shared)!r}")
        return value


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

    train = _items(_TOPICS[: params.num_items])
    evals = _items(_HELD_OUT_TOPICS[: params.eval_items])
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
