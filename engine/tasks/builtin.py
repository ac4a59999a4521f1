"""Registration of the built-in tasks (imported once by the registry, on first use)."""

from __future__ import annotations

from engine.tasks.base import EvalMetrics
from engine.tasks.humaneval.task import HumanEvalParams, build_humaneval
from engine.tasks.quickstart import QuickstartParams, build_quickstart
from engine.tasks.registry import register_task
from engine.tasks.self_play import RoleSwitchParams, SelfRefineParams, build_role_switch, build_self_refine
from engine.tasks.writing import WritingParams, build_writing

# What the registry assumes unless told: teams of two, one turn. The self-play tasks differ alike.
SELF_PLAY = {"default_num_agents": 1, "max_turns": None, "tags": ("self-play", "multi-turn"),
             "eval_metrics": EvalMetrics()}

register_task(
    "quickstart",
    build_quickstart,
    params_model=QuickstartParams,
    title="Quick start: split the alphabet",
    description=(
        "Two agents each write one half of the alphabet (a-m and n-z); the team reward is the geometric "
        "mean of both parts' on-role letter fractions, so it is high only when both parts fit. Two tiny "
        "models learn it on a CPU in about a minute: the reward climbs from about 0.3 toward 1."
    ),
    roles=("first", "second"),
    tags=("demo", "cpu"),
    eval_metrics=EvalMetrics(has_check=True),
)
register_task(
    "humaneval",
    build_humaneval,
    params_model=HumanEvalParams,
    title="Cooperative coding on HumanEval",
    description=(
        "A helper author writes aux(...), a main author writes the entry point and may call it. Tiered "
        "reward: structure, syntax, fraction of tests passed (sandboxed), cooperation bonus. Multi-turn "
        "feedback shows test results; num_agents=1 is the single-agent baseline; pass@k in evaluation."
    ),
    roles=("helper", "main"),
    team_sizes=(1, 2),
    max_turns=None,
    tags=("code", "multi-turn"),
    eval_metrics=EvalMetrics(has_check=True, own=("turn_{t}/tests_passed", "turn_{t}/solved")),
)
register_task(
    "writing",
    build_writing,
    params_model=WritingParams,
    title="Cooperative writing: summary + elaboration",
    description=(
        "One agent writes a concise summary, the other a complementary elaboration, scored by transparent "
        "heuristics (length ratio, word ranges, vocabulary diversity, shared vocabulary, relevance). Uses "
        "the shipped passages or your dataset's text column."
    ),
    roles=("summary", "elaboration"),
    tags=("writing",),
    eval_metrics=EvalMetrics(),
)
register_task(
    "self_refine",
    build_self_refine,
    params_model=SelfRefineParams,
    title="Self-refinement (one agent)",
    description=(
        "One agent summarises a text, then revises its answer each turn given feedback from the reward's "
        "heuristics. Use num_turns >= 2."
    ),
    roles=("writer",),
    **SELF_PLAY,
)
register_task(
    "role_switch",
    build_role_switch,
    params_model=RoleSwitchParams,
    title="Role-switching self-play (one agent)",
    description=(
        "One agent alternates between summarizer and elaborator, each turn building on its previous "
        "message; every reply is scored for the role it played. Use num_turns >= 2."
    ),
    roles=("player",),
    **SELF_PLAY,
)
