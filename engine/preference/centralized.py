"""The centralized protocol: one prompt asks one model for every role's answer in tagged sections,
and one completion is split back into the roles' answers (CoMLRL's
``TaggedCentralizedComparatorAdapter``, ``CentralizedCollaboration``). Torch-free.

The task's reward sees the roles' answers exactly as it would from a team of agents; the model is
trained on the whole joint completion.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from engine.rewards.team_reward import TeamReward
from engine.trainer.rollout import call_formatter


class CentralizedComparatorParseError(ValueError):
    """A centralized completion holds no tagged section at all."""


class CentralizedComparatorAdapter(Protocol):
    """Builds the joint prompt and splits a joint completion (CoMLRL's protocol)."""

    def build_prompt(self, batch_item: dict[str, Any], agent_prompts: Sequence[str]) -> str: ...

    def parse_completion(self, completion: str, batch_item: dict[str, Any], num_agents: int) -> Sequence[str]: ...


@dataclass(frozen=True)
class TaggedCentralizedComparatorAdapter:
    """Roles answer in ``<agent_i>...</agent_i>`` sections (tags matched case-insensitively)."""

    def build_prompt(self, batch_item: dict[str, Any], agent_prompts: Sequence[str]) -> str:
        sections = "\n\n".join(f"Agent {i} original prompt:\n{p}" for i, p in enumerate(agent_prompts))
        tags = "\n".join(f"<agent_{i}>\n...\n</agent_{i}>" for i in range(len(agent_prompts)))
        return (f"You are a centralized coordinator producing the separate outputs of {len(agent_prompts)} agents.\n\n"
                "Each output must satisfy its corresponding original prompt. Keep the outputs separate;\n"
                f"do not merge them or add commentary outside the required tags.\n\n{sections}\n\n"
                f"Return exactly one section for each agent in this format:\n{tags}\n")

    def parse_completion(self, completion: str, batch_item: dict[str, Any], num_agents: int) -> list[str]:
        outputs, found = [], False
        for i in range(num_agents):
            match = re.search(rf"<\s*agent_{i}\s*>(.*?)<\s*/\s*agent_{i}\s*>", str(completion),
                              flags=re.IGNORECASE | re.DOTALL)
            found = found or match is not None
            outputs.append(match.group(1).strip() if match is not None else "")
        if not found:
            raise CentralizedComparatorParseError("the completion holds no <agent_i>...</agent_i> section")
        return outputs


@dataclass(frozen=True)
class EqualPartsCentralizedAdapter:
    """Roles answer one after the other: the completion is cut into ``num_agents`` parts of equal
    length (in characters), the first part is role 0's answer. It never fails to parse, so even a
    model that has not learnt the tags (a tiny random one) gives its roles answers the reward can
    tell apart. Not in CoMLRL; a task offers it (``Task.centralized_adapter``)."""

    def build_prompt(self, batch_item: dict[str, Any], agent_prompts: Sequence[str]) -> str:
        sections = "\n\n".join(f"Agent {i} original prompt:\n{p}" for i, p in enumerate(agent_prompts))
        return (f"You are a centralized coordinator producing the separate outputs of {len(agent_prompts)} agents.\n\n"
                f"{sections}\n\nWrite the outputs one after the other, all of the same length: your text is cut "
                f"into {len(agent_prompts)} equal parts, agent 0's output first.\n")

    def parse_completion(self, completion: str, batch_item: dict[str, Any], num_agents: int) -> list[str]:
        text = str(completion)
        bounds = [round(i * len(text) / num_agents) for i in range(num_agents + 1)]
        return [text[bounds[i]:bounds[i + 1]].strip() for i in range(num_agents)]


def prompt_text(value: Any) -> str:
    """A role formatter's result as text: a string as it is, chat messages as their contents."""
    if isinstance(value, list | tuple):
        return "\n".join(str(m.get("content", "")) for m in value if isinstance(m, dict))
    return str(value)


@dataclass
class CentralizedCollaboration:
    """Joint prompts from the roles' formatters, and the task reward on the split roles.

    It is a reward-term object for :class:`engine.rewards.team_reward.TeamReward` (``score``/``term_names``):
    the role reward's own terms pass through, and ``unparsed`` counts completions without any
    tagged section (their roles get empty answers, as in CoMLRL, and the count is reported).
    """

    adapter: Any
    formatters: list[Any]
    role_reward: TeamReward
    num_roles: int
    unparsed: int = 0
    scored: int = 0

    def __post_init__(self) -> None:
        for name in ("build_prompt", "parse_completion"):
            if not callable(getattr(self.adapter, name, None)):
                raise TypeError(f"centralized_adapter.{name} must be callable")

    @property
    def term_names(self) -> list[str]:
        return self.role_reward.term_names

    def role_prompts(self, item: dict[str, Any]) -> list[str]:
        """Each role's own prompt for ``item`` (its formatter's, as text)."""
        return [prompt_text(call_formatter(fmt, item)) for fmt in self.formatters]

    def build_prompt(self, item: dict[str, Any]) -> str:
        prompt = self.adapter.build_prompt(item, self.role_prompts(item))
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("centralized_adapter.build_prompt must return a non-empty string")
        return prompt

    def split(self, completion: str, item: dict[str, Any], *, count: bool = False) -> list[str]:
        """The roles' answers in ``completion`` (empty answers when no section is found)."""
        try:
            outputs = self.adapter.parse_completion(completion, item, self.num_roles)
        except CentralizedComparatorParseError:
            outputs = [""] * self.num_roles
            if count:
                self.unparsed += 1
        if isinstance(outputs, str | bytes) or len(list(outputs)) != self.num_roles:
            raise ValueError(f"centralized_adapter.parse_completion must return {self.num_roles} answers, "
                             f"got {outputs!r:.200}")
        if count:
            self.scored += 1
        return [str(o) for o in outputs]

    def score(self, agent_completions: Sequence[Sequence[str]], batch_items: Sequence[dict],
              prompts: Sequence[Sequence[str]]) -> tuple[list[float], dict[str, list[float]]]:
        """Team rewards of J joint completions (``agent_completions[0][j]``), split into roles first."""
        joint = agent_completions[0]
        roles = [self.split(text, item, count=True) for text, item in zip(joint, batch_items, strict=True)]
        per_item = [self.role_prompts(item) for item in batch_items]
        return self.role_reward.score([[r[i] for r in roles] for i in range(self.num_roles)], batch_items,
                                      [[p[i] for p in per_item] for i in range(self.num_roles)])

    def take_unparsed_share(self) -> float | None:
        """Share of completions scored since the last call that had no tagged section (None: none scored)."""
        share = self.unparsed / self.scored if self.scored else None
        self.unparsed = self.scored = 0
        return share
