"""Which test-time baselines a team can be compared with (pure, torch-free).

CoMLRL's paper reports a trained team beside four test-time protocols of the same models, untrained:
``single`` (one agent alone, the task's one-agent form), ``parallel`` (naive concatenation),
``pipeline`` (a sequential pipeline) and ``discussion`` (one round of discussion). The protocols
themselves are :mod:`engine.evaluation.baselines`; this module says which of them a run config can
be evaluated under, and why not, so the dashboard's Evaluate form, the evaluation queue and
``cooplab eval --baseline`` refuse the same things with the same words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

BASELINES = ("single", "parallel", "pipeline", "discussion")
"""The protocols, in the order tables show them."""

BASELINE_TITLES = {"single": "one agent alone", "parallel": "naive concatenation",
                   "pipeline": "sequential pipeline", "discussion": "one round of discussion"}


def baseline_title(name: str) -> str:
    """``pipeline (sequential pipeline)``: a protocol's name with what it means."""
    return f"{name} ({BASELINE_TITLES[name]})" if name in BASELINE_TITLES else name


def unavailable_reason(name: str, *, agents: int, task: str, team_sizes: Sequence[int] | None,
                       system: bool = False) -> str | None:
    """Why a team of ``agents`` agents on ``task`` (whose team sizes are ``team_sizes``; None: not known
    here, left to the evaluation) cannot be evaluated under protocol ``name``; None when it can."""
    if name not in BASELINES:
        return f"unknown baseline {name!r}; choose from {', '.join(BASELINES)}"
    if system:
        return "the run trains a system of several trainers; evaluate each trainer's config on its own"
    if name == "single":
        if team_sizes is not None and 1 not in team_sizes:
            sizes = ", ".join(map(str, team_sizes))
            return f"task {task!r} has no one-agent form (its team sizes are {sizes})"
        return None
    if agents < 2:
        return f"a protocol between agents needs a team of two or more; this run has {agents} agent"
    return None


def config_unavailable(config: Mapping[str, Any], task_sizes: Mapping[str, Sequence[int]]) -> dict[str, str]:
    """Per protocol that a stored run config (its JSON dict) cannot be evaluated under, the reason (see
    :func:`unavailable_reason`); ``task_sizes``: the team sizes of the tasks known here, by name."""
    task = str((config.get("task") or {}).get("name") or "")
    agents = len(config.get("agents") or [])
    system = config.get("system") is not None
    reasons = {name: unavailable_reason(name, agents=agents, task=task, team_sizes=task_sizes.get(task),
                                        system=system) for name in BASELINES}
    return {name: reason for name, reason in reasons.items() if reason is not None}
