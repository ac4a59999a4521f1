"""Held-out metrics of several runs side by side (pure functions): each run's newest evaluation of
record on the held-out split (:meth:`db.evaluation_store.EvaluationStore.latest_evaluations`) as
``mean ± s.e.`` over its items, and for runs that differ only by seed (:mod:`app.seedgroups`) the
mean over the seeds with their spread: the smallest and largest seed's value (``minmax``) or one
standard error of the mean over seeds (``sem``), as the Compare page's bands.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from app.seedgroups import BANDS, SeedGroup
from db.evaluation_records import Evaluation

NO_EVALUATION = "no evaluation yet"


def _metric_rank(key: str) -> tuple[int, int, str]:
    """Where a held-out metric goes in a table: the team reward, its reward terms, each turn's reward
    then expected return (by turn), pass@k and avg@k (by k), then the task's own metrics by name."""
    name = key.removeprefix("eval/")
    if name == "reward_mean":
        return (0, 0, name)
    if name.startswith("reward/"):
        return (1, 0, name)
    match = re.fullmatch(r"turn_(\d+)/(reward_mean|expected_return)", name)
    if match:
        return (2 if match.group(2) == "reward_mean" else 3, int(match.group(1)), name)
    match = re.fullmatch(r"(pass|avg)@(\d+)", name)
    if match:
        return (4 if match.group(1) == "pass" else 5, int(match.group(2)), name)
    return (6, 0, name)


def metric_order(keys: Iterable[str], *, tests: bool = True) -> list[str]:
    """Held-out metric keys in a reading order (see :func:`_metric_rank`): the team reward first, never
    alphabetical (which put it twelfth). A standard error stored as its own key (``..._se``) is left out
    (the cells show ``± s.e.``); without ``tests`` (a task whose items are not checked by tests) pass@k and
    avg@k are left out: they are code benchmarks' numbers."""
    unique = set(keys)
    kept = [k for k in unique if not (k.endswith("_se") and k.removesuffix("_se") in unique)]
    if not tests:
        kept = [k for k in kept if _metric_rank(k)[0] not in (4, 5)]
    return sorted(kept, key=_metric_rank)


def held_out_keys(evaluations: Mapping[int, Evaluation], *, tests: bool = True) -> list[str]:
    """Every metric key of the evaluations, in :func:`metric_order`."""
    return metric_order((k for e in evaluations.values() for k in e.metrics), tests=tests)


def run_cell(evaluation: Evaluation | None, key: str) -> str:
    """One run's value of ``key``: ``mean ± s.e.`` over items (empty when not measured)."""
    if evaluation is None or key not in evaluation.metrics:
        return ""
    value, se = evaluation.metrics[key], evaluation.standard_errors.get(key)
    return f"{value:.4f}" if se is None else f"{value:.4f} ± {se:.4f}"


def group_cell(values: Sequence[float], kind: str = "sem") -> str:
    """The seeds' values of one metric: their mean with the spread ``kind`` (see the module docstring)
    and how many seeds were evaluated; empty when none was."""
    if kind not in BANDS:
        raise ValueError(f"unknown spread {kind!r}; use one of {', '.join(BANDS)}")
    kept = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not kept:
        return ""
    mean = statistics.fmean(kept)
    if kind == "minmax":
        return f"{mean:.4f} [{min(kept):.4f}, {max(kept):.4f}] (n={len(kept)})"
    se = statistics.stdev(kept) / math.sqrt(len(kept)) if len(kept) > 1 else 0.0
    return f"{mean:.4f} ± {se:.4f} (n={len(kept)})"


def _describe(evaluation: Evaluation | None) -> dict[str, Any]:
    if evaluation is None:
        return {"checkpoint": NO_EVALUATION, "items × samples": ""}
    settings = evaluation.settings
    step = "" if evaluation.checkpoint_step is None else str(evaluation.checkpoint_step)
    return {"checkpoint": step, "items × samples": f"{settings.get('items', '?')} × {settings.get('samples', '?')}"
            + (" greedy" if settings.get("greedy") else "")}


def run_rows(run_ids: Sequence[int], evaluations: Mapping[int, Evaluation], labels: Mapping[int, str],
             keys: Sequence[str]) -> list[dict[str, Any]]:
    """One row per run, in the order given: its label, what its evaluation was, each key's value."""
    rows = []
    for run_id in run_ids:
        evaluation = evaluations.get(run_id)
        row = {"run": labels.get(run_id, f"#{run_id}"), **_describe(evaluation)}
        row.update({key: run_cell(evaluation, key) for key in keys})
        rows.append(row)
    return rows


def group_rows(groups: Sequence[SeedGroup], evaluations: Mapping[int, Evaluation], labels: Mapping[int, str],
               keys: Sequence[str], kind: str = "sem") -> list[dict[str, Any]]:
    """One row per seed group: its label, how many of its seeds have an evaluation, and per key the
    mean over those seeds with their spread (see :func:`group_cell`)."""
    rows = []
    for group in groups:
        evaluated = [evaluations[i] for i in group.run_ids if i in evaluations]
        row: dict[str, Any] = {"runs": labels.get(group.run_ids[0], f"#{group.run_ids[0]}"),
                               "seeds evaluated": f"{len(evaluated)} of {group.size}"}
        row.update({key: group_cell([e.metrics[key] for e in evaluated if key in e.metrics], kind) for key in keys})
        rows.append(row)
    return rows
