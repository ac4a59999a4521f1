"""Group a run's metric keys into charts (pure): which curves are drawn together, under which title.

Keys follow ``section/name`` (``train/reward_mean``, ``turn_2/expected_return``,
``agent/<name>/loss``, ``eval/pass@1``, ``perf/step_time_s``, ``reward/<term>``). Curves that
answer one question share a chart: the team reward of every turn together, one line per agent for
a per-agent metric, and each other key on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TURN = re.compile(r"^turn_(\d+)/(.+)$")
_AGENT = re.compile(r"^agent/(.+)/([^/]+)$")


@dataclass(frozen=True)
class Chart:
    """One chart: its title, its section (for grouping in the page) and its (label, key) curves."""

    title: str
    section: str
    curves: tuple[tuple[str, str], ...]


SECTION_ORDER = ("team", "agents", "eval", "reward", "perf")


def group_metrics(keys: list[str]) -> list[Chart]:
    """Charts for ``keys``: team charts first, then per-agent, eval, reward terms, perf, the rest.

    ``train/<m>`` joins the per-turn chart of the same metric ``m`` as the "all turns" line.
    """
    turn_metrics: dict[str, list[tuple[int, str]]] = {}
    agent_metrics: dict[str, list[tuple[str, str]]] = {}
    singles: list[str] = []
    for key in sorted(keys):
        if match := _TURN.match(key):
            turn_metrics.setdefault(match.group(2), []).append((int(match.group(1)), key))
        elif match := _AGENT.match(key):
            agent_metrics.setdefault(match.group(2), []).append((match.group(1), key))
        else:
            singles.append(key)

    charts: list[Chart] = []
    used: set[str] = set()
    for metric in sorted(turn_metrics):
        curves = [("all turns", f"train/{metric}")] if f"train/{metric}" in singles else []
        used.update(key for _, key in curves)
        curves += [(f"turn {turn}", key) for turn, key in sorted(turn_metrics[metric])]
        charts.append(Chart(f"{metric} per turn", "team", tuple(curves)))
    for metric in sorted(agent_metrics):
        curves = tuple(sorted(agent_metrics[metric]))
        charts.append(Chart(f"{metric} per agent", "agents", curves))
    for key in singles:
        if key in used:
            continue
        section = key.split("/", 1)[0] if "/" in key else "other"
        section = "team" if section == "train" else section
        charts.append(Chart(key, section, ((key.rsplit("/", 1)[-1], key),)))

    rank = {name: i for i, name in enumerate(SECTION_ORDER)}
    return sorted(charts, key=lambda c: rank.get(c.section, len(rank)))


PREFERRED = ("reward_mean", "expected_return", "loss")


def default_charts(charts: list[Chart], limit: int = 4) -> list[str]:
    """Titles drawn on first visit: team reward, expected return and loss first, then other team and
    per-agent charts (any chart when there are none of those)."""

    def rank(chart: Chart) -> tuple[int, int]:
        for index, word in enumerate(PREFERRED):
            if word in chart.title:
                return (0, index)
        return (1 if chart.section in ("team", "agents") else 2, 0)

    ordered = sorted(charts, key=rank)  # stable: keeps the section order within a rank
    return [c.title for c in ordered[:limit]]
