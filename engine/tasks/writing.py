"""Cooperative writing: one agent writes a concise summary, the other an elaboration of the same text.

Scored by transparent heuristics (:mod:`engine.tasks.text_metrics`), each a separate reward term:

* ``length_ratio``: the elaboration should be ``ratio_low``-``ratio_high`` times longer (characters);
* ``length_range``: both parts within their word ranges;
* ``diversity``: varied vocabulary across the two parts (type-token ratio);
* ``coherence``: the parts share content vocabulary (they talk about the same thing);
* ``relevance``: the summary's content words come from the source text.

Items come from the shipped prompt set (20 short passages) or any dataset with a text column.
"""

from __future__ import annotations

import json
from importlib import resources

from engine.rewards.reward_terms import RewardTerm, RewardTerms
from engine.schema.task_params import WritingParams
from engine.tasks.base import Task, TaskError
from engine.tasks.datasets import load_items, split_items, task_from_items
from engine.tasks.text_metrics import (
    diversity_score,
    length_ratio_score,
    overlap_score,
    relevance_score,
    word_range_score,
)

ROLES = ("summary", "elaboration")
WEIGHTS = {"length_ratio": 1.0, "length_range": 0.5, "diversity": 0.5, "coherence": 1.0, "relevance": 0.5}


def shipped_prompts() -> list[dict]:
    """The built-in prompt set: short passages on everyday topics (``topic``, ``text``)."""
    source = resources.files("engine.tasks.data").joinpath("writing_prompts.jsonl")
    return [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]


def writing_items(params: WritingParams) -> list[dict]:
    """Items with ``prompt`` (the text) from the shipped set or the user's dataset."""
    if params.dataset is None:
        rows = shipped_prompts()
        column = "text"
    else:
        data = load_items(params.dataset)
        column = params.text_column
        if column not in data.column_names:
            raise TaskError(
                f"task 'writing': dataset {params.dataset!r} has no column {column!r} "
                f"(columns: {data.column_names}); set text_column"
            )
        rows = [dict(row) for row in data]
    items = []
    for row in rows:
        text = str(row.get(column) or "").strip()
        if text:
            items.append({"prompt": text, "topic": str(row.get("topic", ""))})
    if params.max_items is not None:
        items = items[: params.max_items]
    if not items:
        raise TaskError("task 'writing': the dataset has no non-empty texts")
    return items


def writing_reward(params: WritingParams, *, task: str = "writing") -> RewardTerms:
    """The five heuristic terms over (summary, elaboration) joint answers."""
    s_min, s_max = params.summary_words
    e_min, e_max = params.elaboration_words

    def pairs(agent_completions):
        return list(zip(agent_completions[0], agent_completions[1], strict=True))

    def length_ratio(c, items, prompts):
        return [length_ratio_score(s, e, low=params.ratio_low, high=params.ratio_high) for s, e in pairs(c)]

    def length_range(c, items, prompts):
        return [
            0.5 * word_range_score(s, s_min, s_max) + 0.5 * word_range_score(e, e_min, e_max) for s, e in pairs(c)
        ]

    def diversity(c, items, prompts):
        return [diversity_score(f"{s} {e}") for s, e in pairs(c)]

    def coherence(c, items, prompts):
        return [overlap_score(s, e) for s, e in pairs(c)]

    def relevance(c, items, prompts):
        return [relevance_score(s, item.get("prompt", "")) for (s, _), item in zip(pairs(c), items, strict=True)]

    funcs = {
        "length_ratio": length_ratio,
        "length_range": length_range,
        "diversity": diversity,
        "coherence": coherence,
        "relevance": relevance,
    }
    return RewardTerms(task=task, terms=[RewardTerm(name, funcs[name], WEIGHTS[name]) for name in funcs])


def summary_formatter(item: dict, external_prompts: str | None = None) -> str:
    if external_prompts is not None:
        return external_prompts
    return f"Summarise the text below in one or two short sentences.\n\nText: {item['prompt']}\n\nSummary:"


def elaboration_formatter(item: dict, external_prompts: str | None = None) -> str:
    if external_prompts is not None:
        return external_prompts
    return (
        "Elaborate on the text below: explain the background, add details and say why it matters.\n\n"
        f"Text: {item['prompt']}\n\nElaboration:"
    )


def build_writing(params: WritingParams, num_agents: int) -> Task:
    """Two agents: a concise summary and a complementary elaboration."""
    train, evals = split_items(writing_items(params), params.eval_items)
    return task_from_items(train, evals, name="writing", roles=list(ROLES), max_turns=1,
                           formatters=[summary_formatter, elaboration_formatter], reward_func=writing_reward(params),
                           description="A concise summary and a complementary elaboration, scored by transparent "
                           "heuristics.")
