"""CoMLRL's two writing benchmarks: TLDR summarisation (``tldr``) and arXiv abstract expansion (``arxiv``).

Two agents write the two parts of one answer (TLDR: a concise summary, then a detailed expansion;
arXiv: background and motivation, then method and implications); one agent alone writes both parts
separated by :data:`SPLIT_MARKER`. Single turn. The reward is CoMLRL's level reward (max 3.0), each
level logged as its own term and each gated on the one below (a level that fails stops the ladder):

* ``structure`` (0 or 0.5): both parts' word counts (whitespace-split) lie in the range;
* ``coordination`` (0..1): the character-length ratio part 2 / part 1, full credit inside the
  optimal range, falling linearly to 0 at the acceptable range's ends; outside it the ladder stops;
* ``vocabulary`` (0..0.5): the ratio of distinct words (part 2 / part 1), the same shape;
* ``style`` (0..1): 0.4 x transition-word category coverage + 0.6 x the parts' content-word Jaccard
  overlap, capped and rescaled to 0..1.

The numbers are CoMLRL's (LLM_Collab_Writing, ``rewards/{tldr,arxiv}_rewards.py``); the word lists
(stopwords, transition words) are CoopLab's own, and a transition word counts only as a whole word
or phrase (CoMLRL matches substrings, so its ``so`` also matches ``also``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from engine.rewards.reward_terms import RewardTerm, RewardTerms
from engine.schema.task_params import ComlrlWritingParams
from engine.tasks.base import Task, TaskError
from engine.tasks.datasets import load_cached_items, split_items, task_from_items
from engine.tasks.text_metrics import STOPWORDS, jaccard

SPLIT_MARKER = "[PARAGRAPH_SPLIT]"
LEVELS = ("structure", "coordination", "vocabulary", "style")
STRUCTURE_REWARD = 0.5
VOCABULARY_REWARD = 0.5

# CoopLab's own transition words in twelve categories (the category count is what the reward reads)
TRANSITIONS: dict[str, tuple[str, ...]] = {
    "addition": ("furthermore", "moreover", "in addition", "additionally", "besides"),
    "example": ("for example", "for instance", "such as", "to illustrate", "in particular"),
    "clarification": ("in other words", "that is to say", "to put it simply", "put differently"),
    "cause": ("because", "since", "due to", "owing to", "given that"),
    "effect": ("therefore", "consequently", "as a result", "hence", "thus"),
    "contrast": ("however", "in contrast", "on the other hand", "whereas", "conversely"),
    "concession": ("although", "even though", "nevertheless", "nonetheless", "despite"),
    "sequence": ("first", "second", "next", "finally", "subsequently"),
    "emphasis": ("indeed", "notably", "in fact", "above all", "significantly"),
    "summary": ("in summary", "in short", "overall", "to sum up", "in conclusion"),
    "comparison": ("similarly", "likewise", "in the same way", "by comparison", "just as"),
    "condition": ("if", "unless", "provided that", "as long as", "otherwise"),
}
_TRANSITION_PATTERNS = {
    category: re.compile(r"\b(?:" + "|".join(re.escape(p) for p in phrases) + r")\b")
    for category, phrases in TRANSITIONS.items()
}
_WORD = re.compile(r"\b\w+\b")


@dataclass(frozen=True)
class WritingLevels:
    """One benchmark's thresholds. A ramp is ``(zero_low, full_low, full_high, zero_high)``: full
    credit inside ``[full_low, full_high]``, linear to 0 at the ``zero`` ends, the ladder stops outside."""

    words: tuple[int, int]
    length_ratio: tuple[float, float, float, float]
    unique_ratio: tuple[float, float, float, float]
    jaccard_cap: float
    transitions_in_both: bool  # arXiv reads transitions in both parts, TLDR in part 2 only


TLDR = WritingLevels(words=(8, 256), length_ratio=(1.1, 1.6, 3.2, 5.0), unique_ratio=(1.3, 2.0, math.inf, math.inf),
                     jaccard_cap=0.03, transitions_in_both=False)
ARXIV = WritingLevels(words=(128, 256), length_ratio=(0.8, 1.3, 1.6, 2.0), unique_ratio=(0.5, 0.7, 1.3, 1.7),
                      jaccard_cap=0.23, transitions_in_both=True)
BENCHMARKS = {"tldr": TLDR, "arxiv": ARXIV}


def ramp_gate(value: float, bounds: tuple[float, float, float, float]) -> float | None:
    """Credit in 0..1 for ``value`` on the ramp ``bounds``, or ``None`` outside ``[zero_low, zero_high]``."""
    zero_low, full_low, full_high, zero_high = bounds
    if not zero_low <= value <= zero_high:
        return None
    if value < full_low:
        return (value - zero_low) / (full_low - zero_low)
    if value > full_high:
        return 1.0 - (value - full_high) / (zero_high - full_high)
    return 1.0


def transition_score(text: str) -> float:
    """0 without transition words; 0.4 for the first category found, +0.05 for each more, at most 1."""
    lower = text.lower()
    found = sum(1 for pattern in _TRANSITION_PATTERNS.values() if pattern.search(lower))
    return 0.0 if found == 0 else min(1.0, 0.4 + 0.05 * (found - 1))


def content_jaccard(a: str, b: str) -> float:
    """Jaccard overlap of the parts' distinct words without stopwords (1.0 when both have none)."""
    first = {w for w in _WORD.findall(a.lower()) if w not in STOPWORDS}
    second = {w for w in _WORD.findall(b.lower()) if w not in STOPWORDS}
    return 1.0 if not first and not second else jaccard(first, second)


def level_terms(first: str, second: str, levels: WritingLevels) -> dict[str, float]:
    """Each level's value for one joint answer (pure function of the two parts)."""
    terms = dict.fromkeys(LEVELS, 0.0)
    low, high = levels.words
    if not all(low <= len(part.split()) <= high for part in (first, second)):
        return terms
    terms["structure"] = STRUCTURE_REWARD
    if not first:
        return terms
    coordination = ramp_gate(len(second) / len(first), levels.length_ratio)
    if coordination is None:
        return terms
    terms["coordination"] = coordination
    unique_first = len(set(_WORD.findall(first.lower())))
    if unique_first == 0:
        return terms
    vocabulary = ramp_gate(len(set(_WORD.findall(second.lower()))) / unique_first, levels.unique_ratio)
    if vocabulary is None:
        return terms
    terms["vocabulary"] = VOCABULARY_REWARD * vocabulary
    transitions = transition_score(first + " " + second if levels.transitions_in_both else second)
    overlap = min(content_jaccard(first, second), levels.jaccard_cap) / levels.jaccard_cap
    terms["style"] = 0.4 * transitions + 0.6 * overlap
    return terms


def split_single(completion: str) -> tuple[str, str]:
    """One agent's answer as (part 1, part 2): the text before and after :data:`SPLIT_MARKER` (part 2
    empty without the marker, which fails the structure level)."""
    first, _, second = completion.partition(SPLIT_MARKER)
    return first.strip(), second.strip()


def parts_of(agent_completions: Sequence[Sequence[str]]) -> list[tuple[str, str]]:
    """(part 1, part 2) of every joint action, for teams of two and for one agent alone."""
    if len(agent_completions) == 1:
        return [split_single(c) for c in agent_completions[0]]
    return list(zip(agent_completions[0], agent_completions[1], strict=True))


def writing_level_reward(task: str, levels: WritingLevels) -> RewardTerms:
    """The four levels as reward terms over joint answers (weights 1: the sum is CoMLRL's reward)."""

    def make(level: str):
        def term(agent_completions, batch_items, prompts):
            return [level_terms(a, b, levels)[level] for a, b in parts_of(agent_completions)]

        term.__name__ = level
        return term

    return RewardTerms(task=task, terms=[RewardTerm(level, make(level), 1.0) for level in LEVELS])


ROLE_PROMPTS = {
    "tldr": (
        ("summary", "Write a concise summary (one or two sentences) of the post below.\n\n{text}\n\nSummary:"),
        ("expansion", "Write a detailed account of the post below: explain the situation, the details and why "
                      "they matter, at two to three times the length of a short summary.\n\n{text}\n\nDetails:"),
    ),
    "arxiv": (
        ("background", "From the abstract below, write the background and motivation paragraph of the paper's "
                       "introduction.\n\nAbstract: {text}\n\nBackground:"),
        ("method", "From the abstract below, write the paragraph of the paper's introduction on its method and "
                   "its implications.\n\nAbstract: {text}\n\nMethod:"),
    ),
}


def single_prompt(task: str, text: str) -> str:
    first, second = (role for role, _ in ROLE_PROMPTS[task])
    return (f"Write two paragraphs about the text below: first the {first}, then the {second}. Separate them "
            f"with the line {SPLIT_MARKER}.\n\n{text}\n")


def formatters_for(task: str, num_agents: int):
    def make(builder):
        def formatter(item: dict, external_prompts: str | None = None) -> str:
            return external_prompts if external_prompts is not None else builder(item["prompt"])

        return formatter

    if num_agents == 1:
        return [make(lambda text: single_prompt(task, text))]
    return [make(lambda text, template=template: template.format(text=text)) for _, template in ROLE_PROMPTS[task]]


def _texts(source: str, column: str, task: str, limit: int | None, param: str = "dataset") -> list[dict]:
    data = load_cached_items(source, task=task, param=param)
    if column not in data.column_names:
        raise TaskError(f"task {task!r}: dataset {source!r} has no column {column!r} (columns: {data.column_names}); "
                        "set text_column")
    items = [{"prompt": str(row[column]).strip()} for row in data if str(row.get(column) or "").strip()]
    if limit is not None:
        items = items[:limit]
    if not items:
        raise TaskError(f"task {task!r}: dataset {source!r} has no non-empty texts in column {column!r}")
    return items


def writing_splits(task: str, params: ComlrlWritingParams) -> tuple[list[dict], list[dict]]:
    """(train, eval) items: the eval dataset when one is named, else the last ``eval_items`` of the
    training data. Splits that share a text are refused."""
    train = _texts(params.dataset, params.text_column, task, params.max_items)
    if params.eval_dataset is None:
        return split_items(train, params.eval_items)
    evals = _texts(params.eval_dataset, params.text_column, task, params.max_eval_items, "eval_dataset")
    shared = {item["prompt"] for item in train} & {item["prompt"] for item in evals}
    if shared:
        raise TaskError(f"task {task!r}: {len(shared)} evaluation texts are also training texts (dataset "
                        f"{params.dataset!r}, eval_dataset {params.eval_dataset!r}); a held-out result needs "
                        "disjoint splits: point eval_dataset at other items")
    return train, evals


def make_level_eval_logger(levels: WritingLevels):
    """Per evaluated item, each turn's level values and their sum (``turn_{t}/<level>``, ``turn_{t}/level_total``)."""

    def eval_logger(*, agent_completions_turns, batch_items, prompts=None, **_) -> list[dict[str, float]]:
        rows = []
        for index in range(len(batch_items)):
            per_agent = [agent[index] for agent in agent_completions_turns]
            row: dict[str, float] = {}
            for turn in range(min(len(turns) for turns in per_agent)):
                (first, second), = parts_of([[turns[turn]] for turns in per_agent])
                values = level_terms(first, second, levels)
                row.update({f"turn_{turn + 1}/{name}": value for name, value in values.items()})
                row[f"turn_{turn + 1}/level_total"] = sum(values.values())
            rows.append(row)
        return rows

    return eval_logger


def build_comlrl_writing(task: str, params: ComlrlWritingParams, num_agents: int) -> Task:
    from engine.tasks.humaneval.task import mean_aggregator

    levels = BENCHMARKS[task]
    train, evals = writing_splits(task, params)
    roles = [role for role, _ in ROLE_PROMPTS[task]] if num_agents == 2 else ["writer"]
    return task_from_items(train, evals, name=task, roles=roles, max_turns=1,
                           formatters=formatters_for(task, num_agents), reward_func=writing_level_reward(task, levels),
                           eval_logger=make_level_eval_logger(levels), eval_aggregator=mean_aggregator,
                           description=f"CoMLRL's {task} writing benchmark with its level reward.")


def build_tldr(params: ComlrlWritingParams, num_agents: int) -> Task:
    """TLDR: a concise summary and a detailed expansion of a post (CoMLRL's level reward)."""
    return build_comlrl_writing("tldr", params, num_agents)


def build_arxiv(params: ComlrlWritingParams, num_agents: int) -> Task:
    """arXiv: an introduction's background and its method paragraphs from an abstract (CoMLRL's level reward)."""
    return build_comlrl_writing("arxiv", params, num_agents)
