"""A study's results as distributions: per point, the mean and spread over its seeds of each metric's
final and best value, computed from the stored metrics, and of each held-out metric (the newest
evaluation of record of each child on the held-out split); a flat table and its CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from db import states
from db.csv_cells import FORMULA_STARTS, spreadsheet_cell  # noqa: F401 (part of this module's API)
from db.evaluation_store import EvaluationStore
from db.study_records import StudyTrial
from db.study_store import StudyStore
from jobs.study_rules import Spread, spread


@dataclass(frozen=True)
class PointResult:
    """One point of a study: its values, its children's states, and per metric key the spread over
    seeds of the final and the best value (of the children in ``counted`` states)."""

    point: int
    params: dict[str, Any]
    statuses: dict[str, int]
    run_ids: tuple[int, ...]
    counted_run_ids: tuple[int, ...] = ()  # the runs the spreads are computed from
    final: dict[str, Spread] = field(default_factory=dict)
    best: dict[str, Spread] = field(default_factory=dict)
    held_out: dict[str, Spread] = field(default_factory=dict)  # from each counted child's newest evaluation


def point_results(studies: StudyStore, study_id: int, *, keys: Iterable[str] | None = None,
                  counted: Sequence[str] = (states.SUCCEEDED,)) -> list[PointResult]:
    """Per point of the study (in point order), from the stored metrics and the newest held-out
    evaluations of its children whose runs are in one of the ``counted`` states (succeeded by default:
    a stopped or failed run's last value is not a final result)."""
    trials = studies.trials(study_id)
    by_point: dict[int, list[StudyTrial]] = {}
    for trial in trials:
        by_point.setdefault(trial.point, []).append(trial)
    counted_runs = [t.run_id for t in trials if t.run_id is not None and t.status in counted]
    evaluations = EvaluationStore(studies.store).latest_evaluations(counted_runs)
    summaries: dict[int, dict[str, Any]] = {}
    for summary in studies.metric_summaries(counted_runs, keys):
        summaries.setdefault(summary.run_id, {})[summary.key] = summary
    results = []
    for point, children in sorted(by_point.items()):
        runs = [t.run_id for t in children if t.run_id is not None and t.status in counted]
        metric_keys = sorted({k for r in runs for k in summaries.get(r, {})})
        statuses: dict[str, int] = {}
        for child in children:
            statuses[child.status] = statuses.get(child.status, 0) + 1
        final = {k: spread([summaries[r][k].final for r in runs if k in summaries.get(r, {})]) for k in metric_keys}
        best = {k: spread([summaries[r][k].best for r in runs if k in summaries.get(r, {})]) for k in metric_keys}
        evaluated = [evaluations[r] for r in runs if r in evaluations]
        held_out = {k: spread([e.metrics.get(k) for e in evaluated])
                    for k in sorted({k for e in evaluated for k in e.metrics})}
        results.append(PointResult(point=point, params=dict(children[0].params), statuses=statuses,
                                   run_ids=tuple(t.run_id for t in children if t.run_id is not None),
                                   counted_run_ids=tuple(runs), final=final, best=best, held_out=held_out))
    return results


def results_rows(results: Sequence[PointResult], keys: Sequence[str],
                 held_out_keys: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One flat row per point: ``point``, each searched path, ``children`` (states), for each key
    ``<key> final mean``, ``final std``, ``best mean``, ``best std``, ``n``, and for each held-out key
    ``<key> held-out mean``, ``held-out std``, ``held-out n`` (the children evaluated)."""
    rows = []
    for result in results:
        row: dict[str, Any] = {"point": result.point, **result.params,
                               "children": ", ".join(f"{n} {s}" for s, n in sorted(result.statuses.items()))}
        for key in keys:
            final = result.final.get(key, Spread(None, None, 0))
            best = result.best.get(key, Spread(None, None, 0))
            row.update({f"{key} final mean": final.mean, f"{key} final std": final.std,
                        f"{key} best mean": best.mean, f"{key} best std": best.std, f"{key} n": final.n})
        for key in held_out_keys:
            held = result.held_out.get(key, Spread(None, None, 0))
            row.update({f"{key} held-out mean": held.mean, f"{key} held-out std": held.std,
                        f"{key} held-out n": held.n})
        rows.append(row)
    return rows


def best_point(results: Sequence[PointResult], key: str, *, use: str = "final") -> PointResult | None:
    """The point with the largest mean ``use`` (``final``, ``best`` or ``held_out``) value of ``key``;
    None when no point has one yet."""
    scored = [(getattr(r, use).get(key), r) for r in results]
    scored = [(s.mean, r) for s, r in scored if s is not None and s.mean is not None]
    return max(scored, key=lambda item: item[0])[1] if scored else None


def results_csv(results: Sequence[PointResult], keys: Sequence[str], held_out_keys: Sequence[str] = ()) -> str:
    """The :func:`results_rows` table as CSV text (empty cells where there is no value). Searched paths,
    their values and metric keys are user text: each header and cell goes through
    :func:`spreadsheet_cell`; lines end in CRLF (RFC 4180), so a cell holding a lone CR is quoted."""
    rows = results_rows(results, keys, held_out_keys)
    if not rows:
        return ""
    columns = list(dict.fromkeys(c for row in rows for c in row))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([spreadsheet_cell(c) for c in columns])
    for row in rows:
        writer.writerow(["" if row.get(c) is None else spreadsheet_cell(row.get(c)) for c in columns])
    return out.getvalue()
