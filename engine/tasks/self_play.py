"""One-agent multi-turn tasks: self-refinement with feedback and role-switching self-play.

* ``self_refine``: the agent summarises a text; after each turn the transition
  (:func:`engine.tasks.transitions.revise_with_feedback`) shows it concrete feedback from the
  reward's own heuristics and asks for a revision. Every turn is scored, so the return rewards
  answers that get better.
* ``role_switch``: the agent alternates between a ``summarizer`` and an ``elaborator``
  (:func:`engine.tasks.transitions.alternate_roles`), each turn building on its previous message;
  the reward reads the role from the prompt and scores the reply for that role.
"""

from __future__ import annotations

from typing import Any

from engine.rewards.reward_terms import RewardTerm, RewardTerms
from engine.schema.task_params import RoleSwitchParams, SelfRefineParams, WritingParams
from engine.tasks.base import Task
from engine.tasks.datasets import split_items, task_from_items
from engine.tasks.text_metrics import content_words, overlap_score, relevance_score, word_range_score, words
from engine.tasks.transitions import alternate_roles, revise_with_feedback, role_for_turn
from engine.tasks.writing import writing_items


def _items(params) -> list[dict]:
    return writing_items(
        WritingParams(dataset=params.dataset, text_column=params.text_column, max_items=params.max_items)
    )


def summary_feedback(summary: str, source: str, word_range: tuple[int, int]) -> str:
    """Concrete, checkable advice from the same heuristics the reward uses."""
    low, high = word_range
    notes = []
    count = len(words(summary))
    if count < low:
        notes.append(f"It has {count} words; write at least {low}.")
    elif count > high:
        notes.append(f"It has {count} words; cut it to at most {high}.")
    missing = sorted(content_words(source) - content_words(summary), key=len, reverse=True)[:3]
    if relevance_score(summary, source) < 0.8 or missing:
        if missing:
            notes.append(f"Use the text's key words, for example: {', '.join(missing)}.")
        else:
            notes.append("Stick to what the text says.")
    return " ".join(notes) or "Good; make it a little clearer."


def _self_play_task(name: str, role: str, train: list[dict], evals: list[dict], *, formatter: Any,
                    terms: dict[str, Any], transition: Any, description: str) -> Task:
    """A task for one agent over any number of turns, its reward the equally weighted ``terms``."""
    reward = RewardTerms(task=name, terms=[RewardTerm(term, fn, 1.0) for term, fn in terms.items()])
    return task_from_items(train, evals, name=name, roles=[role], formatters=[formatter], reward_func=reward,
                           external_transition=transition, max_turns=None, description=description)


def build_self_refine(params: SelfRefineParams, num_agents: int) -> Task:
    """Summarise, then revise with feedback (one agent, any number of turns)."""
    train, evals = split_items(_items(params), params.eval_items)
    low, high = params.summary_words

    def length(c, items, prompts):
        return [word_range_score(text, low, high) for text in c[0]]

    def relevance(c, items, prompts):
        return [relevance_score(text, item["prompt"]) for text, item in zip(c[0], items, strict=True)]

    def formatter(item: dict, external_prompts: str | None = None) -> str:
        if external_prompts is not None:
            return external_prompts
        return f"Summarise the text below in one or two sentences.\n\nText: {item['prompt']}\n\nSummary:"

    def feedback(*, prompt, completion, agent_index, turn, agent_completions) -> str:
        return summary_feedback(completion, prompt, params.summary_words)

    revise = revise_with_feedback(
        feedback, original=lambda prompt, agent: f"Summarise the text below in one or two sentences.\n\nText: {prompt}"
    )
    return _self_play_task("self_refine", "writer", train, evals, formatter=formatter,
                           terms={"length": length, "relevance": relevance}, transition=revise,
                           description="One agent summarises, then revises its answer with feedback each turn.")


ROLE_NAMES = ("summarizer", "elaborator")
ROLE_TEMPLATES = (
    "You are the summarizer.\nText: {original}\n\nThe elaborator wrote:\n{previous}\n\n"
    "Summarise it in one or two sentences.",
    "You are the elaborator.\nText: {original}\n\nThe summarizer wrote:\n{previous}\n\n"
    "Elaborate: add background and details.",
)


def role_of_prompt(prompt: str | None) -> str:
    """The role named in a prompt (``You are the elaborator``); the summarizer when none is named."""
    if prompt and f"You are the {ROLE_NAMES[1]}" in prompt:
        return ROLE_NAMES[1]
    return ROLE_NAMES[0]


def build_role_switch(params: RoleSwitchParams, num_agents: int) -> Task:
    """One agent plays summarizer and elaborator in turn; each reply is scored for its role."""
    train, evals = split_items(_items(params), params.eval_items)

    def roles_of(prompts, n):
        agent_prompts = prompts[0] if prompts else [None] * n
        return [role_of_prompt(p) for p in agent_prompts]

    def length(c, items, prompts):
        out = []
        for text, role in zip(c[0], roles_of(prompts, len(c[0])), strict=True):
            low, high = params.summary_words if role == ROLE_NAMES[0] else params.elaboration_words
            out.append(word_range_score(text, low, high))
        return out

    def content(c, items, prompts):
        out = []
        for text, role, item in zip(c[0], roles_of(prompts, len(c[0])), items, strict=True):
            source = item["prompt"]
            out.append(relevance_score(text, source) if role == ROLE_NAMES[0] else overlap_score(text, source))
        return out

    def formatter(item: dict, external_prompts: str | None = None) -> str:
        if external_prompts is not None:
            return external_prompts
        role = ROLE_NAMES[role_for_turn(0, 1, len(ROLE_NAMES))]
        return f"You are the {role}.\nText: {item['prompt']}\n\nSummarise it in one or two sentences."

    return _self_play_task("role_switch", "player", train, evals, formatter=formatter,
                           terms={"length": length, "content": content},
                           transition=alternate_roles(ROLE_NAMES, role_templates=ROLE_TEMPLATES),
                           description="Self-play: one agent alternates between summarizer and elaborator.")
