"""The runs table as rows of values (pure functions): run, config and metric columns, search, sort over
every run, and group-by with aggregates.

A row keeps two views of each column: ``values`` for sorting and aggregating (numbers as numbers, None
when missing) and ``cells`` for display (``"4/8"``, ``"3m 05s"``). Config columns are a run's config
flattened to dotted paths (``trainer.learning_rate``, ``agents.0.model``); metric columns are one
summary of a metric (``reward/mean (last)``: its last, smallest or largest logged value).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.runinfo import badge, format_duration
from app.seedgroups import seed_of
from db.ops_run_table import MetricSummary, TableRun

TEAM_REWARD = "train/reward_mean"
AGGREGATES = ("last", "min", "max")
"""Summaries of a metric a column can show: its last logged value, its smallest, its largest."""

RUN_COLUMNS = ("name", "status", "step", "team reward", "trend", "duration", "tags", "notes", "experiment",
               "attempt", "steps/s", "seed", "device", "created")
"""Columns of the run itself, in display order (``run``, its id, always comes first)."""
DEFAULT_RUN_COLUMNS = ("name", "status", "step", "team reward", "trend", "duration", "tags", "notes")
NUMERIC_SUMMARIES = ("team reward", "step", "duration", "steps/s")
"""Run columns that are numbers a group's aggregates summarise (with every metric column)."""


def flatten_config(config: Any, prefix: str = "") -> dict[str, Any]:
    """A nested config as ``{dotted path: value}``: mappings by key, lists by index
    (``{"agents": [{"model": "m"}]}`` → ``{"agents.0.model": "m"}``); an empty mapping or list is kept
    as its JSON text (``"{}"``, ``"[]"``)."""
    if isinstance(config, Mapping) and config:
        out: dict[str, Any] = {}
        for key, value in config.items():
            out.update(flatten_config(value, f"{prefix}{key}."))
        return out
    if isinstance(config, list | tuple) and config:
        out = {}
        for index, value in enumerate(config):
            out.update(flatten_config(value, f"{prefix}{index}."))
        return out
    if isinstance(config, Mapping | list | tuple):
        return {prefix[:-1]: json.dumps(config)} if prefix else {}
    return {prefix[:-1]: config} if prefix else {}


def config_paths(configs: Iterable[Mapping[str, Any]]) -> tuple[list[str], set[str]]:
    """Every flattened config path of ``configs``, sorted, and those whose value differs between them
    (a path some config lacks counts as differing)."""
    seen: dict[str, set[str]] = {}
    held: dict[str, int] = {}
    total = 0
    for config in configs:
        total += 1
        for path, value in flatten_config(config).items():
            seen.setdefault(path, set()).add(json.dumps(value, sort_keys=True, default=str))
            held[path] = held.get(path, 0) + 1
    varying = {path for path, values in seen.items() if len(values) > 1 or held[path] < total}
    return sorted(seen), varying


def metric_column(key: str, aggregate: str) -> str:
    """The column name of a metric summary: ``reward/mean (last)``."""
    return f"{key} ({aggregate})"


@dataclass(frozen=True)
class Columns:
    """What the table shows besides ``run``: run columns, config paths, metric keys and which summaries
    of each metric."""

    run: tuple[str, ...] = DEFAULT_RUN_COLUMNS
    config: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    aggregates: tuple[str, ...] = ("last",)

    @property
    def metric_columns(self) -> list[str]:
        return [metric_column(k, a) for k in self.metrics for a in self.aggregates]

    @property
    def names(self) -> list[str]:
        """Every column shown, in order."""
        return ["run", *[c for c in RUN_COLUMNS if c in self.run], *self.config, *self.metric_columns]

    @property
    def numeric(self) -> list[str]:
        """The columns shown whose values a group's aggregates summarise."""
        return [c for c in NUMERIC_SUMMARIES if c in self.run] + self.metric_columns


@dataclass(frozen=True)
class Row:
    """One run of the table: its id, sortable values and display cells by column, and its search text."""

    run_id: int
    values: dict[str, Any]
    cells: dict[str, Any]
    text: str = field(repr=False)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    return float(value)


def _summary(summary: MetricSummary | None, aggregate: str) -> float | None:
    if summary is None:
        return None
    return {"last": summary.last, "min": summary.lowest, "max": summary.highest}[aggregate]


def duration_s(started: datetime | None, finished: datetime | None, now: datetime) -> float | None:
    """Seconds trained: from the start to the end (to ``now`` while the run is active); None before it starts."""
    if started is None:
        return None
    return max(0.0, ((finished or now) - started).total_seconds())


def make_row(item: TableRun, names: Mapping[int, str], columns: Columns, now: datetime,
             experiment_tags: Mapping[int, Sequence[str]] | None = None) -> Row:
    """The table row of one run (``now``: the database server's time, for an active run's duration).
    Its search text holds its experiment's tags (``experiment_tags``) beside its own, as the tag filter
    counts them."""
    run = item.run
    experiment = names.get(run.experiment_id, str(run.experiment_id))
    attempt = f" (attempt {run.attempt})" if run.attempt > 1 else ""
    seconds = duration_s(run.started_at, run.finished_at, now)
    reward = _summary(item.metrics.get(TEAM_REWARD), "last")
    seed = seed_of(run.config)
    values: dict[str, Any] = {
        "run": run.id, "name": run.name or experiment + attempt, "status": run.status, "step": run.step,
        "team reward": reward, "duration": seconds, "tags": ", ".join(run.tags),
        "notes": first_line(run.notes), "experiment": experiment, "attempt": run.attempt,
        "steps/s": item.steps_per_s, "seed": seed, "device": run.device or run.queue,
        "created": run.created_at.strftime("%Y-%m-%d %H:%M"), "trend": None,
    }
    cells = dict(values)
    cells.update({
        "status": badge(run.status),
        "step": f"{run.step}/{run.total_steps}" if run.total_steps else str(run.step),
        "team reward": "" if reward is None else f"{reward:.3f}",
        "duration": format_duration(seconds) if seconds is not None else "",
        "steps/s": f"{item.steps_per_s:.2f}" if item.steps_per_s else "—",
        "seed": "" if seed is None else str(seed), "trend": [],
    })
    flat = flatten_config(run.config)
    for path in columns.config:
        value = flat.get(path)
        values[path] = value
        cells[path] = "" if value is None else value if isinstance(value, str) else json.dumps(value)
    for key in columns.metrics:
        for aggregate in columns.aggregates:
            number = _summary(item.metrics.get(key), aggregate)
            values[metric_column(key, aggregate)] = number
            cells[metric_column(key, aggregate)] = math.nan if number is None else number
    inherited = (experiment_tags or {}).get(run.experiment_id, ())
    words = [f"#{run.id}", run.name or "", experiment, *run.tags, *inherited, run.status,
             *(f"{path}={json.dumps(value) if not isinstance(value, str) else value}" for path, value in flat.items())]
    return Row(run.id, values, cells, "\n".join(words).casefold())


def first_line(text: str, limit: int = 80) -> str:
    """The first line of ``text``, cut to ``limit`` characters (for a table cell)."""
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def search(rows: Sequence[Row], query: str) -> list[Row]:
    """The rows holding every word of ``query`` (case-insensitive) in their id (``#12``), name,
    experiment, tags (their experiment's included), state or a config entry (``trainer.learning_rate=0.001``)."""
    words = query.casefold().split()
    return [r for r in rows if all(w in r.text for w in words)]


def sort_key(value: Any) -> tuple[int, float, str]:
    """Numbers in numeric order, then text in alphabetical order; missing values (None, NaN) compare
    equal and are placed by :func:`sort_rows` after every present one."""
    number = _number(value)
    if number is not None:
        return (0, number, "")
    return (1, 0.0, str(value).casefold())


def missing(value: Any) -> bool:
    """A cell with nothing to sort by: None, NaN or empty text."""
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


def sort_rows(rows: Sequence[Row], column: str, descending: bool) -> list[Row]:
    """Every row ordered by ``column`` (ties keep the newest run first); missing values last either way."""
    newest = sorted(rows, key=lambda r: -r.run_id)
    present = [r for r in newest if not missing(r.values.get(column))]
    absent = [r for r in newest if missing(r.values.get(column))]
    # sorted() stays stable with reverse=True: ties keep the newest-first order
    return sorted(present, key=lambda r: sort_key(r.values.get(column)), reverse=descending) + absent


def group_label(value: Any) -> str:
    """How a group's value reads in the groups table (``(none)`` for a missing one)."""
    if value is None or value == "":
        return "(none)"
    return value if isinstance(value, str) else json.dumps(value)


def mean_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    """The mean and the sample standard deviation (n − 1 in the denominator) of ``values``; the
    standard deviation is None for fewer than two values, both are None for none."""
    n = len(values)
    if n == 0:
        return None, None
    mean = sum(values) / n
    if n < 2:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


def group_aggregates(rows: Sequence[Mapping[str, Any]], by: str, numeric: Sequence[str]) -> list[dict[str, Any]]:
    """One row per value of column ``by`` (ordered by that value): how many runs hold it (``runs``), and
    per column of ``numeric`` the mean and the sample standard deviation over the runs that have a
    value (``<column> mean``, ``<column> std``) and how many do (``<column> n``)."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    order: dict[str, Any] = {}
    for row in rows:
        label = group_label(row.get(by))
        groups.setdefault(label, []).append(row)
        order.setdefault(label, row.get(by))
    out = []
    for label in sorted(groups, key=lambda g: (order[g] is None or order[g] == "", sort_key(order[g]))):
        members = groups[label]
        summary: dict[str, Any] = {by: label, "runs": len(members)}
        for column in numeric:
            present = [n for m in members if (n := _number(m.get(column))) is not None]
            mean, std = mean_std(present)
            summary.update({f"{column} mean": mean, f"{column} std": std, f"{column} n": len(present)})
        out.append(summary)
    return out
