"""Cooperative coding on HumanEval: a helper author and a main-function author (or one coder).

Two agents: ``helper`` writes ``aux(...)``, ``main`` writes the problem's entry point and may call
``aux``. The tiered reward (see :mod:`engine.tasks.humaneval.reward`) runs the problem's tests in
the sandbox. With more than one turn, the transition tells each agent its team's test results and
asks for a revision. ``num_agents=1`` is the single-agent baseline (one model writes everything).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from engine.rewards.reward_terms import RewardGroup, RewardTerms
from engine.sandbox import SandboxPool, SandboxUnavailable, default_workers, require_isolation
from engine.schema.task_params import SLICE, HumanEvalParams
from engine.tasks.base import Task, TaskError
from engine.tasks.datasets import items_to_dataset
from engine.tasks.humaneval.execution import default_limits
from engine.tasks.humaneval.problems import load_problems
from engine.tasks.humaneval.scoring import CodeScorer
from engine.tasks.transitions import revise_with_feedback

REVISE_TEMPLATE = (
    "{original}\n\nYour previous code:\n{previous}\n\nTest feedback:\n{feedback}\n\n"
    "Fix the problems and write the code again."
)


def parse_slice(text: str, size: int) -> slice:
    """``"a:b"`` as a slice over ``size`` problems, checked to be non-empty."""
    match = SLICE.match(text)
    if match is None:
        raise TaskError(f"{text!r} is not a slice; write start:end, e.g. 0:133")
    start = int(match.group(1)) if match.group(1) else 0
    end = int(match.group(2)) if match.group(2) else size
    if not 0 <= start < end <= size:
        raise TaskError(f"slice {text!r} must satisfy 0 <= start < end <= {size}")
    return slice(start, end)


def problem_items(selection: str) -> list[dict]:
    """Dataset items (prompt, task_id, entry_point, test) for a slice of the problems."""
    problems = load_problems()
    chosen = problems[parse_slice(selection, len(problems))]
    return [
        {"prompt": p["prompt"], "task_id": p["task_id"], "entry_point": p["entry_point"], "test": p["test"]}
        for p in chosen
    ]


def role_prompts(helper_name: str, team: bool):
    """First-turn prompt builders per role; later turns pass the transition's prompt through."""

    def helper_text(item: dict) -> str:
        return (
            f"Write one Python helper function named `{helper_name}` that would help implement the "
            f"function `{item['entry_point']}` below. Write only the helper, no tests.\n\n{item['prompt']}"
        )

    def main_text(item: dict) -> str:
        return (
            f"Implement the function `{item['entry_point']}` below. Your partner writes a helper function "
            f"`{helper_name}(...)` that you may call. Write the complete function.\n\n{item['prompt']}"
        )

    def single_text(item: dict) -> str:
        return f"Implement the function `{item['entry_point']}` below. Write the complete function.\n\n{item['prompt']}"

    builders = [helper_text, main_text] if team else [single_text]

    def make(builder):
        def formatter(item: dict, external_prompts: str | None = None) -> str:
            return external_prompts if external_prompts is not None else builder(item)

        formatter.__name__ = builder.__name__
        return formatter

    return builders, [make(b) for b in builders]


def build_humaneval(params: HumanEvalParams, num_agents: int, *, unisolated_sandbox: bool = False) -> Task:
    """Build the coding task for one or two agents; ``unisolated_sandbox`` is the operator's UNSAFE permission
    to run the candidates without OS isolation where bubblewrap cannot be used."""
    require_sandbox("humaneval", unisolated_sandbox)  # refuse before any training starts, not at the first reward
    return build_code_task("humaneval", params, num_agents, problem_items(params.train_slice),
                           problem_items(params.eval_slice), unisolated_sandbox=unisolated_sandbox)


def require_sandbox(name: str, unisolated_sandbox: bool) -> None:
    """Refuse a coding task where its programs cannot run isolated (and the operator allowed no exception)."""
    try:
        require_isolation(unisolated_sandbox)
    except SandboxUnavailable as exc:
        raise TaskError(f"{name}: {exc}") from None


FEEDBACK_MODES = ("level_feedback", "level_passed", "passed", "plain")


def build_code_task(name: str, params: HumanEvalParams, num_agents: int, train_items: list[dict],
                    eval_items: list[dict], *, unisolated_sandbox: bool = False) -> Task:
    """The helper + main coding task over these problems (HumanEval's form: prompt, entry_point, test)."""
    team = num_agents == 2
    by_prompt = {item["prompt"]: item for item in [*train_items, *eval_items]}
    limits = dataclasses.replace(default_limits(params.sandbox_timeout_s), unisolated_allowed=unisolated_sandbox)
    pool = SandboxPool(params.workers or default_workers(), limits=limits)
    scorer = CodeScorer(pool, team=team, helper_name=params.helper_name, step_timeout_s=params.step_timeout_s,
                        reward=params.reward)
    builders, formatters = role_prompts(params.helper_name, team)

    def resolve(prompt: str) -> dict:
        item = by_prompt.get(prompt)
        if item is None:
            raise TaskError(f"{name} transition: the prompt does not belong to a known problem")
        return item

    mode = params.resolved_feedback_mode()
    feedback_of = {"level_feedback": scorer.feedback, "level_passed": scorer.level_passed_feedback,
                   "passed": scorer.passed_feedback}.get(mode)

    def feedback(*, prompt, completion, agent_index, turn, agent_completions) -> str:
        assert feedback_of is not None
        return feedback_of(resolve(prompt), agent_completions, agent_index)

    transition = revise_with_feedback(
        feedback if feedback_of is not None else None,
        template=REVISE_TEMPLATE,
        original=lambda prompt, agent: builders[agent](resolve(prompt)),
    )

    def check(item: dict, agent_completions: Sequence[str]) -> bool:
        return scorer.evaluate(item, list(agent_completions)).solved

    label = "level_code_reward" if params.reward == "level" else "tiered_code_reward"
    reward = RewardTerms(
        task=name,
        terms=[RewardGroup(scorer.terms, {term: 1.0 for term in scorer.term_names}, label=label)],
    )
    kind = "CoMLRL's level reward" if params.reward == "level" else "a tiered reward"
    return Task(
        name=name,
        roles=["helper", "main"] if team else ["coder"],
        train_dataset=items_to_dataset(train_items),
        eval_dataset=items_to_dataset(eval_items),
        formatters=formatters,
        reward_func=reward,
        external_transition=transition,
        eval_logger=make_eval_logger(scorer),
        eval_aggregator=mean_aggregator,
        check=check,
        max_turns=None,
        description=f"Cooperative coding ({name}) with {kind} and sandboxed tests.",
        extras={"scorer": scorer, "pool": pool, "feedback_mode": mode},
    )


def make_eval_logger(scorer: CodeScorer):
    """CoMLRL-style eval logger: per item, each turn's test fraction and whether it was solved.

    ``agent_completions_turns[agent][item][turn]`` holds the completions of the evaluated path.
    """

    def eval_logger(*, agent_completions_turns, batch_items, prompts=None, **_) -> list[dict[str, float]]:
        rows = []
        for index, item in enumerate(batch_items):
            per_agent = [agent[index] for agent in agent_completions_turns]
            row: dict[str, float] = {}
            for turn in range(min(len(turns) for turns in per_agent)):
                evaluation = scorer.evaluate(item, [turns[turn] for turns in per_agent])
                row[f"turn_{turn + 1}/tests_passed"] = evaluation.test_fraction
                row[f"turn_{turn + 1}/solved"] = float(evaluation.solved)
            rows.append(row)
        return rows

    return eval_logger


def mean_aggregator(metrics: Sequence[dict[str, float]], num_turns: int | None = None, **_) -> dict[str, float]:
    """Average every key over the evaluated items."""
    totals: dict[str, list[float]] = {}
    for row in metrics:
        for key, value in row.items():
            totals.setdefault(key, []).append(float(value))
    return {key: sum(values) / len(values) for key, values in totals.items()}
