"""Group a run's metric keys into charts (pure): which curves are drawn together, under which title.

Keys follow ``section/name`` (``train/reward_mean``, ``turn_2/expected_return``,
``agent/<name>/loss``, ``critic/<name>/value_loss``, ``eval/pass@1``, ``perf/step_time_s``,
``reward/<term>``). Curves that answer one question share a chart: the team reward of every turn
together, one line per agent for a per-agent metric (and per critic for actor-critic runs), and each
other key on its own.

A system of trainers (``docs/systems.md``) adds ``trainer/<trainer>/agent/<agent>/<metric>`` (one
chart per trainer and metric, a line per agent of that trainer), ``trainer/<trainer>/<metric>``
(one chart per metric with a line per trainer, e.g. which trainer updated when) and ``system/...``
keys, which form a "system" section right after the team charts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TURN = re.compile(r"^turn_(\d+)/(.+)$")
_AGENT = re.compile(r"^agent/(.+)/([^/]+)$")
_CRITIC = re.compile(r"^critic/(.+)/([^/]+)$")
_TRAINER_AGENT = re.compile(r"^trainer/([^/]+)/agent/(.+)/([^/]+)$")
_TRAINER = re.compile(r"^trainer/([^/]+)/([^/]+)$")


@dataclass(frozen=True)
class Chart:
    """One chart: its title, its section (for grouping in the page) and its (label, key) curves."""

    title: str
    section: str
    curves: tuple[tuple[str, str], ...]


SECTION_ORDER = ("team", "system", "trainer", "agents", "eval", "reward", "perf")


def _section_rank(section: str) -> int:
    """Position of a section in the page; every ``trainer <name>`` section ranks as "trainer"."""
    base = "trainer" if section.startswith("trainer ") else section
    return SECTION_ORDER.index(base) if base in SECTION_ORDER else len(SECTION_ORDER)


def group_metrics(keys: list[str]) -> list[Chart]:
    """Charts for ``keys``: team charts first, then the system and its trainers, per-agent (and
    per-critic), eval, reward terms, perf, the rest.

    ``train/<m>`` joins the per-turn chart of the same metric ``m`` as the "all turns" line.
    """
    turn_metrics: dict[str, list[tuple[int, str]]] = {}
    agent_metrics: dict[str, list[tuple[str, str]]] = {}
    critic_metrics: dict[str, list[tuple[str, str]]] = {}
    trainer_agent_metrics: dict[tuple[str, str], list[tuple[str, str]]] = {}
    trainer_metrics: dict[str, list[tuple[str, str]]] = {}
    singles: list[str] = []
    for key in sorted(keys):
        if match := _TURN.match(key):
            turn_metrics.setdefault(match.group(2), []).append((int(match.group(1)), key))
        elif match := _AGENT.match(key):
            agent_metrics.setdefault(match.group(2), []).append((match.group(1), key))
        elif match := _CRITIC.match(key):
            critic_metrics.setdefault(match.group(2), []).append((match.group(1), key))
        elif match := _TRAINER_AGENT.match(key):
            group = (match.group(1), match.group(3))
            trainer_agent_metrics.setdefault(group, []).append((match.group(2), key))
        elif match := _TRAINER.match(key):
            trainer_metrics.setdefault(match.group(2), []).append((match.group(1), key))
        else:
            singles.append(key)

    charts: list[Chart] = []
    used: set[str] = set()
    for metric in sorted(turn_metrics):
        curves = [("all turns", f"train/{metric}")] if f"train/{metric}" in singles else []
        used.update(key for _, key in curves)
        turns = sorted(turn_metrics[metric])
        if not (curves and len(turns) == 1):  # one turn only: its curve is the "all turns" one, drawn once
            curves += [(f"turn {turn}", key) for turn, key in turns]
        charts.append(Chart(f"{metric} per turn", "team", tuple(curves)))
    for metric in sorted(agent_metrics):
        curves = tuple(sorted(agent_metrics[metric]))
        charts.append(Chart(f"{metric} per agent", "agents", curves))
    for metric in sorted(critic_metrics):
        charts.append(Chart(f"{metric} per critic", "agents", tuple(sorted(critic_metrics[metric]))))
    for metric in sorted(trainer_metrics):
        charts.append(Chart(f"{metric} per trainer", "system", tuple(sorted(trainer_metrics[metric]))))
    for trainer, metric in sorted(trainer_agent_metrics):
        curves = tuple(sorted(trainer_agent_metrics[(trainer, metric)]))
        charts.append(Chart(f"trainer {trainer}: {metric} per agent", f"trainer {trainer}", curves))
    for key in singles:
        if key in used:
            continue
        section = key.split("/", 1)[0] if "/" in key else "other"
        section = "team" if section == "train" else section
        charts.append(Chart(key, section, ((key.rsplit("/", 1)[-1], key),)))

    return sorted(charts, key=lambda c: _section_rank(c.section))


PREFERRED = ("reward_mean", "expected_return", "loss")
_TRAINING_SECTIONS = ("team", "system", "agents")
_PASS_AT = re.compile(r"^eval/pass@(\d+)$")


def is_team_reward(chart: Chart) -> bool:
    """The chart of the team reward (per turn, with all turns): the one every run page opens with."""
    return chart.section == "team" and "reward_mean" in chart.title


def default_charts(charts: list[Chart], limit: int = 4) -> list[str]:
    """Titles drawn until the user picks charts: the team reward (per turn) first, then expected
    return and loss, then the other team, system and per-agent charts, then evaluation rewards (so a
    run whose first metrics are evaluation ones shows them until training metrics arrive), then the
    rest."""

    def rank(chart: Chart) -> tuple[int, int]:
        training = chart.section in _TRAINING_SECTIONS or chart.section.startswith("trainer ")
        if is_team_reward(chart):
            return (0, 0)
        if training:
            for index, word in enumerate(PREFERRED):
                if word in chart.title:
                    return (1, index)
            return (2, 0)
        if chart.section == "eval" and "reward_mean" in chart.title:
            return (3, 0)
        return (4, 0)

    ordered = sorted(charts, key=rank)  # stable: keeps the section order within a rank
    return [c.title for c in ordered[:limit]]


def metric_applies(key: str, *, eval_samples_per_item: int = 1, code_task: bool = False) -> bool:
    """Whether a logged metric means something for the run, so it is worth charting.

    ``eval/pass@k`` applies to a code task (its check runs the tests: pass@1 is the solve rate) or
    when the run samples at least k > 1 completions per evaluation item (``eval_samples_per_item``,
    the setting that enables pass@k); otherwise the task's check is incidental and pass@k a flat line.
    """
    match = _PASS_AT.match(key)
    if match is None:
        return True
    k = int(match.group(1))
    return code_task or (eval_samples_per_item > 1 and k <= eval_samples_per_item)


def applicable_keys(keys: list[str], config: dict | None, task_tags: tuple[str, ...] = ()) -> list[str]:
    """``keys`` without the metrics that do not apply to a run of ``config`` (see :func:`metric_applies`)."""
    trainer = (config or {}).get("trainer") or {}
    try:
        samples = int(trainer.get("eval_samples_per_item") or 1)
    except (TypeError, ValueError):
        samples = 1
    code = "code" in task_tags
    return [k for k in keys if metric_applies(k, eval_samples_per_item=samples, code_task=code)]
