"""The credit-assignment bench's own tasks, registered in this process only (never in the built-in table).

* ``credit_noisy_parts``: two agents, each with a part of the team reward that is its own and noisy::

      reward = 0.5 * (part_1 + noise_1) + 0.5 * (part_2 + noise_2),   noise_i ~ N(0, noise_std^2)

  ``parts="letters"``: part_1 is the share of agent 1's characters in a-m and part_2 of agent 2's in
  n-z (the quick start's halves, added instead of multiplied); ``parts="digits_capitals"``: agent 1's
  digit share and agent 2's capital-letter share (``bench.training.madpo_learning``'s reward). The
  reward is a sum, so an agent's own part is all it can change; with one team reward, the group
  baseline still hands each agent its partner's part and both noise draws. The noise has its own
  generator (``noise_seed``), drawn once per reward value; ``noise_std=0`` gives the noiseless
  reward the bench evaluates with. Training topics are the quick start's, held-out ones its held-out
  topics.
* ``credit_feedback``: the same reward (noiseless by default) over turns. After each turn an agent is
  shown its previous answer, its own part's score and its partner's (``Your part scored 0.12.
  Partner: 0.30.``) and writes again; every turn is scored.
"""

from __future__ import annotations

import random
from typing import Any, Literal

from pydantic import Field

from bench.training.madpo_learning import capital_share, digit_share
from engine.schema.task_params import QUICKSTART_HELD_OUT_TOPICS, QUICKSTART_TOPICS, TaskParams
from engine.tasks import RewardTerm, RewardTerms, Task
from engine.tasks.datasets import task_from_items
from engine.tasks.quickstart import letter_fraction
from engine.tasks.transitions import revise_with_feedback

NOISY_PARTS = "credit_noisy_parts"
FEEDBACK = "credit_feedback"
FIRST, SECOND = "abcdefghijklm", "nopqrstuvwxyz"
FEEDBACK_TEMPLATE = "{original}\nYour answer: {previous}\nFeedback: {feedback}\nWrite again:\n"


class NoisyPartsParams(TaskParams):
    parts: Literal["letters", "digits_capitals"] = Field("digits_capitals", description="What each agent's part "
                                                         "counts.")
    noise_std: float = Field(0.1, ge=0, description="Standard deviation of the Gaussian noise on each part.")
    noise_seed: int = Field(0, description="Seed of the noise generator.")
    num_items: int = Field(16, ge=1, le=len(QUICKSTART_TOPICS), description="Training prompts.")
    eval_items: int = Field(12, ge=0, le=len(QUICKSTART_HELD_OUT_TOPICS), description="Held-out prompts.")


class FeedbackParams(NoisyPartsParams):
    noise_std: float = Field(0.0, ge=0, description="Standard deviation of the Gaussian noise on each part.")


def part_scorers(parts: str) -> tuple[Any, Any]:
    """Agent 1's and agent 2's part of the reward, text -> [0, 1]."""
    if parts == "letters":
        return (lambda text: letter_fraction(text, FIRST)), (lambda text: letter_fraction(text, SECOND))
    return digit_share, capital_share


def noisy_parts_reward(parts: str, noise_std: float, noise_seed: int, *, task: str = NOISY_PARTS) -> RewardTerms:
    """Two terms of weight 0.5, each one agent's part plus its own Gaussian noise."""
    rng = random.Random(noise_seed)
    scorers = part_scorers(parts)

    def term(agent: int):
        def score(agent_completions, batch_items, prompts):
            return [scorers[agent](text) + (rng.gauss(0.0, noise_std) if noise_std else 0.0)
                    for text in agent_completions[agent]]
        return score

    return RewardTerms(task=task, terms=[RewardTerm("first_part", term(0), 0.5),
                                               RewardTerm("second_part", term(1), 0.5)])


def _items(topics: tuple[str, ...]) -> list[dict]:
    return [{"prompt": f"Topic: {topic}.", "topic": topic} for topic in topics]


def _instructions(parts: str) -> tuple[str, str]:
    if parts == "letters":
        return f"Write letters from {FIRST[0]} to {FIRST[-1]}:", f"Write letters from {SECOND[0]} to {SECOND[-1]}:"
    return "Write numbers:", "Write in capitals:"


def build_noisy_parts(params: NoisyPartsParams, num_agents: int) -> Task:
    """Two agents, a separate noisy part of the team reward each."""
    texts = _instructions(params.parts)
    formatters = [lambda item, text=text: f"{item['prompt']} {text}\n" for text in texts]
    return task_from_items(_items(QUICKSTART_TOPICS[: params.num_items]),
                           _items(QUICKSTART_HELD_OUT_TOPICS[: params.eval_items]), name=NOISY_PARTS,
                           roles=["first", "second"], formatters=formatters,
                           reward_func=noisy_parts_reward(params.parts, params.noise_std, params.noise_seed),
                           max_turns=1, description="Each agent owns a noisy half of an additive team reward.")


def score_feedback(own: float, partner: float) -> str:
    """The feedback text of one agent: its own part's score and its partner's."""
    return f"Your part scored {own:.2f}. Partner: {partner:.2f}."


def build_feedback(params: FeedbackParams, num_agents: int) -> Task:
    """:func:`build_noisy_parts`'s task over any number of turns, each agent shown both parts' scores
    (noiseless) and its previous answer between turns; every turn is scored."""
    texts = _instructions(params.parts)
    scorers = part_scorers(params.parts)

    def formatter(index: int):
        def fmt(item: dict, external_prompts: str | None = None) -> str:
            return external_prompts if external_prompts is not None else f"{item['prompt']} {texts[index]}\n"
        return fmt

    def feedback(*, prompt, completion, agent_index, turn, agent_completions) -> str:
        scores = [score(text) for score, text in zip(scorers, agent_completions, strict=True)]
        return score_feedback(scores[agent_index], scores[1 - agent_index])

    transition = revise_with_feedback(feedback, template=FEEDBACK_TEMPLATE,
                                      original=lambda prompt, agent: f"{prompt} {texts[agent]}")
    return task_from_items(_items(QUICKSTART_TOPICS[: params.num_items]),
                           _items(QUICKSTART_HELD_OUT_TOPICS[: params.eval_items]), name=FEEDBACK,
                           roles=["first", "second"], formatters=[formatter(0), formatter(1)],
                           reward_func=noisy_parts_reward(params.parts, params.noise_std, params.noise_seed,
                                                          task=FEEDBACK),
                           external_transition=transition, max_turns=None,
                           description="Two agents own a part of an additive reward each, over turns with "
                                       "both parts' scores fed back.")


def register_credit_tasks() -> None:
    """Register both tasks in this process (again is harmless)."""
    from engine.tasks import register_task

    register_task(NOISY_PARTS, build_noisy_parts, params_model=NoisyPartsParams, roles=("first", "second"),
                  description="Each agent owns a noisy half of an additive team reward.", replace=True)
    register_task(FEEDBACK, build_feedback, params_model=FeedbackParams, roles=("first", "second"),
                  max_turns=None, description="The quick start in turns, with each part's score fed back.",
                  replace=True)
