"""Held-out metrics of several runs side by side (pure functions): each run's newest evaluation of
record on the held-out split (:meth:`db.evaluation_store.EvaluationStore.latest_evaluations`) as
``mean ± s.e.`` over its items, and for runs that differ only by seed (:mod:`app.seedgroups`) the
mean over the seeds with their spread: the smallest and largest seed's value (``minmax``) or one
standard error of the mean over seeds (``sem``), as the Compare page's bands.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from app.seedgroups import BANDS, SeedGroup
from db.evaluation_records import Evaluation

NO_EVALUATION = "no evaluation yet"


def held_out_keys(evaluations: Mapping[int, Evaluation]) -> list[str]:
    """Every metric key of the evaluations, team reward first, then sorted."""
    keys = sorted({k for e in evaluations.values() for k in e.metrics})
    return sorted(keys, key=lambda k: (k != "eval/reward_mean", k))


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
