"""The built-in tasks as data: one :class:`TaskInfo` row per task (title, roles, team sizes, turns,
parameter model, what its evaluation reports), and the row type itself.

Torch-free, so the dashboard form, the config check and the pre-flight read a task's description
without building it. The rows carry no builder: :mod:`engine.tasks.builtin` maps each name to the
function that builds the task (datasets, formatters, reward), and a test keeps the two tables in step.
The catalog the configs name tasks from (these rows, registered tasks, plugins) is
:mod:`engine.schema.task_registry`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from engine.schema.task_params import (
    ArxivParams,
    CodeBenchParams,
    CoopHumanEvalParams,
    HumanEvalParams,
    MbppParams,
    QuickstartParams,
    RoleSwitchParams,
    SelfRefineParams,
    TldrParams,
    WritingParams,
)


class TaskError(ValueError):
    """A task that cannot be built or used; the message names the task and what to fix."""


@dataclass(frozen=True)
class EvalMetrics:
    """What a task's evaluation reports besides the team reward: whether it has a ``check`` (then
    ``eval/pass@k`` for every k up to the samples per item, and ``eval/avg@K``) and the names of its
    own per-item metrics, ``{t}`` standing for each turn (``turn_{t}/solved``)."""

    has_check: bool = False
    own: tuple[str, ...] = ()

    def names(self, num_turns: int, samples_per_item: int) -> set[str]:
        """Every ``eval/...`` key an evaluation reports (see :meth:`TaskInfo.eval_metric_names`)."""
        turns = range(1, num_turns + 1)
        names = {"eval/reward_mean", "eval/reward_mean_se"}
        names |= {f"eval/turn_{t}/{k}" for t in turns for k in ("reward_mean", "expected_return")}
        if self.has_check:
            names |= {f"eval/pass@{k}" for k in range(1, samples_per_item + 1)} | {f"eval/avg@{samples_per_item}"}
        for pattern in self.own:
            names |= {f"eval/{pattern.format(t=t)}" for t in turns} if "{t}" in pattern else {f"eval/{pattern}"}
        return names


@dataclass(frozen=True)
class TaskInfo:
    """Catalog entry of a task: what the dashboard shows and how to build it.

    ``factory(params, num_agents) -> Task`` receives a validated instance of ``params_model``; a
    built-in row has none (its builder is in :mod:`engine.tasks.builtin`). ``team_sizes`` lists the
    supported numbers of agents; ``max_turns`` is ``None`` when any number of turns works (the task
    has a transition) and ``1`` for single-turn tasks.
    """

    name: str
    title: str
    description: str
    roles: tuple[str, ...]
    default_num_agents: int
    team_sizes: tuple[int, ...]
    max_turns: int | None
    params_model: type[BaseModel]
    factory: Callable[[Any, int], Any] | None = None
    tags: tuple[str, ...] = ()
    eval_metrics: EvalMetrics | None = None

    def eval_metric_names(self, num_turns: int, samples_per_item: int) -> set[str] | None:
        """Every ``eval/...`` metric an evaluation of this task reports with ``num_turns`` turns and
        ``samples_per_item`` answers per item; None when the task did not declare its own metrics."""
        if self.eval_metrics is None:
            return None
        return self.eval_metrics.names(num_turns, samples_per_item)

    def default_params(self) -> dict[str, Any]:
        """Parameter defaults as plain JSON-able values (for forms and presets)."""
        return self.params_model().model_dump(mode="json")

    def check_team_size(self, num_agents: int) -> None:
        """Raise :class:`TaskError` when the task cannot be played by ``num_agents`` agents."""
        if num_agents not in self.team_sizes:
            sizes = ", ".join(str(n) for n in self.team_sizes)
            raise TaskError(
                f"task {self.name!r} supports teams of {sizes} agent(s), not {num_agents}; "
                f"change the number of agents or pick another task"
            )


def _self_play(name: str, title: str, description: str, roles: tuple[str, ...],
               params_model: type[BaseModel]) -> TaskInfo:
    """A one-agent task with a transition: any number of turns."""
    return TaskInfo(name=name, title=title, description=description, roles=roles, default_num_agents=1,
                    team_sizes=(1,), max_turns=None, params_model=params_model, tags=("self-play", "multi-turn"),
                    eval_metrics=EvalMetrics())


def _comlrl_code(name: str, title: str, description: str, params_model: type[CodeBenchParams]) -> TaskInfo:
    """A CoMLRL coding benchmark: helper + main (or one coder), any number of turns, pass@k."""
    return TaskInfo(name=name, title=title, description=description, roles=("helper", "main"), default_num_agents=2,
                    team_sizes=(1, 2), max_turns=None, params_model=params_model, tags=("code", "multi-turn", "comlrl"),
                    eval_metrics=EvalMetrics(has_check=True, own=("turn_{t}/tests_passed", "turn_{t}/solved")))


WRITING_LEVEL_METRICS = tuple(f"turn_{{t}}/{level}" for level in ("structure", "coordination", "vocabulary", "style",
                                                                  "level_total"))


def _comlrl_writing(name: str, title: str, description: str, roles: tuple[str, ...],
                    params_model: type[BaseModel]) -> TaskInfo:
    """A CoMLRL writing benchmark: two parts by two agents (or one agent), single turn."""
    return TaskInfo(name=name, title=title, description=description, roles=roles, default_num_agents=2,
                    team_sizes=(1, 2), max_turns=1, params_model=params_model, tags=("writing", "comlrl"),
                    eval_metrics=EvalMetrics(own=WRITING_LEVEL_METRICS))


BUILTIN_TASKS: tuple[TaskInfo, ...] = (
    TaskInfo(
        name="quickstart",
        title="Quick start: split the alphabet",
        description=(
            "Two agents each write one half of the alphabet (a-m and n-z); the team reward is the geometric "
            "mean of both parts' on-role letter fractions, so it is high only when both parts fit. Two tiny "
            "models learn it on a CPU in about a minute: the reward climbs from about 0.3 toward 1."
        ),
        roles=("first", "second"), default_num_agents=2, team_sizes=(2,), max_turns=1,
        params_model=QuickstartParams, tags=("demo", "cpu"), eval_metrics=EvalMetrics(has_check=True),
    ),
    TaskInfo(
        name="humaneval",
        title="Cooperative coding on HumanEval",
        description=(
            "A helper author writes aux(...), a main author writes the entry point and may call it. Tiered "
            "reward: structure, syntax, fraction of tests passed (sandboxed), cooperation bonus. Multi-turn "
            "feedback shows test results; num_agents=1 is the single-agent baseline; pass@k in evaluation."
        ),
        roles=("helper", "main"), default_num_agents=2, team_sizes=(1, 2), max_turns=None,
        params_model=HumanEvalParams, tags=("code", "multi-turn"),
        eval_metrics=EvalMetrics(has_check=True, own=("turn_{t}/tests_passed", "turn_{t}/solved")),
    ),
    TaskInfo(
        name="writing",
        title="Cooperative writing: summary + elaboration",
        description=(
            "One agent writes a concise summary, the other a complementary elaboration, scored by transparent "
            "heuristics (length ratio, word ranges, vocabulary diversity, shared vocabulary, relevance). Uses "
            "the shipped passages or your dataset's text column."
        ),
        roles=("summary", "elaboration"), default_num_agents=2, team_sizes=(2,), max_turns=1,
        params_model=WritingParams, tags=("writing",), eval_metrics=EvalMetrics(),
    ),
    _comlrl_code(
        "coop_humaneval", "CoMLRL: CoopHumanEval (helper + main)",
        "CoMLRL's 82 HumanEval variants that need cooperation (OpenMLRL/CoopHumanEval, or your file), with its level "
        "reward (max 4.0) and feedback modes; tests run in the sandbox. Held out: the first 16 problems.",
        CoopHumanEvalParams,
    ),
    _comlrl_code(
        "mbpp", "CoMLRL: MBPP (helper + main)",
        "CoMLRL's MBPP problems in HumanEval form (OpenMLRL/MBPP, or your file), with its level reward (max 4.0) "
        "and feedback modes; tests run in the sandbox. Held out: the first 15 problems.",
        MbppParams,
    ),
    _comlrl_writing(
        "tldr", "CoMLRL: TLDR summary + expansion",
        "CoMLRL's TLDR benchmark: one agent writes a concise summary of a post, the other a detailed expansion; "
        "CoMLRL's level reward (word range, length ratio, vocabulary, style; max 3.0). trl-lib/tldr when cached, "
        "or your file. One agent alone writes both parts around [PARAGRAPH_SPLIT].",
        ("summary", "expansion"), TldrParams,
    ),
    _comlrl_writing(
        "arxiv", "CoMLRL: arXiv abstract to introduction",
        "CoMLRL's arXiv benchmark: from an abstract, one agent writes the introduction's background and "
        "motivation, the other its method and implications; CoMLRL's level reward (max 3.0). "
        "OpenMLRL/arXiv_abstract when cached, or your file.",
        ("background", "method"), ArxivParams,
    ),
    _self_play(
        "self_refine", "Self-refinement (one agent)",
        "One agent summarises a text, then revises its answer each turn given feedback from the reward's "
        "heuristics. Use num_turns >= 2.",
        ("writer",), SelfRefineParams,
    ),
    _self_play(
        "role_switch", "Role-switching self-play (one agent)",
        "One agent alternates between summarizer and elaborator, each turn building on its previous "
        "message; every reply is scored for the role it played. Use num_turns >= 2.",
        ("player",), RoleSwitchParams,
    ),
)
