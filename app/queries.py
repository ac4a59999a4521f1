"""Data access for the views: every read the pages make, as plain functions over a :class:`Store`.

Pages stay thin (layout only) and these functions are tested and benchmarked on their own. Each
function issues a bounded number of queries (a page of runs, the charts on screen), never a scan of
a whole run's history.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from app.run_table import Columns, Row, make_row, search
from app.runinfo import format_duration
from db.errors import NotFoundError
from db.records import EpisodeView, Experiment, Lineage, Run, Series
from db.store import Store

SPARK_KEY = "train/reward_mean"
SPARK_POINTS = 40


def experiment_names(store: Store) -> dict[int, str]:
    """Experiment id → name for labelling runs."""
    return {e.id: e.name for e in store.list_experiments(limit=10_000)}


def experiment_or_none(store: Store, experiment_id: int) -> Experiment | None:
    """The experiment, or None when it was deleted (for example from another browser tab)."""
    try:
        return store.get_experiment(experiment_id)
    except NotFoundError:
        return None


def experiments_table(experiments: list[Experiment]) -> list[dict[str, Any]]:
    """Rows of the experiments list."""
    return [
        {
            "id": e.id,
            "name": e.name,
            "description": e.description,
            "tags": ", ".join(e.tags),
            "agents": len(e.config.get("agents") or []),
            "task": (e.config.get("task") or {}).get("name", ""),
            "updated": e.updated_at.strftime("%Y-%m-%d %H:%M"),
        }
        for e in experiments
    ]


def study_experiment_ids(store: Store) -> set[int]:
    """The experiments that studies made to hold their runs (``study: <name>``)."""
    from db.study_store import StudyStore

    return {study.experiment_id for study in StudyStore(store).list_studies(limit=10_000)}


def run_label(run: Run, names: dict[int, str]) -> str:
    """``#12 quickstart (attempt 2) · 2026-11-30 14:05`` (``#12 lr 1e-3 (quickstart) · …`` for a run with
    a display name): how a run is named in pickers.

    The state is left out on purpose: pickers are not refreshed live, the status header is.
    """
    attempt = f" (attempt {run.attempt})" if run.attempt > 1 else ""
    named = f"{run.name} ({names.get(run.experiment_id, '?')})" if run.name else names.get(run.experiment_id, "?")
    return f"#{run.id} {named}{attempt} · {run.created_at:%Y-%m-%d %H:%M}"


def short_label(run: Run, names: dict[int, str]) -> str:
    """``quickstart #12`` (its display name instead of the experiment's when it has one): how a run is
    named in legends."""
    return f"{run.name or names.get(run.experiment_id, '?')} #{run.id}"


def runs_rows(store: Store, names: dict[int, str], columns: Columns, *, experiment: int | None = None,
              statuses: list[str] | None = None, tag: str | None = None, query: str = "",
              limit: int = 5000) -> list[Row]:
    """Every run (the newest ``limit``) that the filters and the search ``query`` match, as rows of the
    runs table with ``columns``: two queries, whatever the number of runs (:meth:`Store.table_runs`), and
    one more for the experiments' tags when there is a search."""
    keys = list(dict.fromkeys([SPARK_KEY, *columns.metrics]))
    runs = store.table_runs(experiment, statuses or None, tag=tag, metric_keys=keys, limit=limit)
    now = store.server_now()  # durations on the clock the runs' times were stamped with, not this machine's
    tags = {e.id: e.tags for e in store.list_experiments(limit=10_000) if e.tags} if query.strip() else {}
    return search([make_row(item, names, columns, now, tags) for item in runs], query)


def page_cells(store: Store, rows: list[Row]) -> list[dict[str, Any]]:
    """The cells of one page of rows with each run's team-reward trend: one small downsampled read
    per row shown, so callers pass one page."""
    cells = []
    for row in rows:
        trend = store.series(row.run_id, SPARK_KEY, max_points=SPARK_POINTS).ys if row.values["step"] else ()
        cells.append({**row.cells, "trend": list(trend)})
    return cells


@dataclass(frozen=True)
class ChartData:
    """The series of one chart, as fetched from the store (already downsampled)."""

    title: str
    series: tuple[tuple[str, Series], ...]
    boundaries: tuple[tuple[float, str], ...] = ()


def chart_data(
    store: Store,
    run_id: int,
    curves: tuple[tuple[str, str], ...],
    *,
    x: str = "step",
    max_points: int = 1000,
    x_range: tuple[float, float] | None = None,
    title: str = "",
    history: Lineage | None = None,
) -> ChartData:
    """One downsampled series per curve, all on the same x range (a shared grid). With ``history``
    (a resumed run's :class:`Lineage`), each curve joins the attempts (each step once, the later
    attempt winning) and ``boundaries`` says where each later attempt begins."""
    lo, hi = x_range if x_range else (None, None)
    if history is None or not history.joined:
        series = tuple(
            (label, store.series(run_id, key, x=x, max_points=max_points, x_min=lo, x_max=hi))
            for label, key in curves
        )
        return ChartData(title, series)
    joined = [(label, store.joined_series(history, key, x=x, max_points=max_points, x_min=lo, x_max=hi))
              for label, key in curves]
    marks: dict[float, str] = {}
    for _, part in joined:
        for at, attempt, attempt_run in part.boundaries:
            marks.setdefault(at, f"attempt {attempt} (#{attempt_run})")
    return ChartData(title, tuple((label, part.series) for label, part in joined),
                     boundaries=tuple(sorted(marks.items())))


def history_metric_keys(store: Store, history: Lineage) -> list[str]:
    """The metric keys logged by any attempt of a run's history, sorted."""
    keys: set[str] = set()
    for run_id in history.run_ids:
        keys.update(store.metric_keys(run_id))
    return sorted(keys)


def history_caption(history: Lineage) -> str:
    """``attempt 1 #3 (stopped, steps ≤ 16) → attempt 2 #5 (running, steps ≥ 17)``."""
    parts = []
    for a in history.attempts:
        if a.owns_nothing:
            span = "no steps of its own yet" if a.first_step is None else "superseded"
        elif a.owns_from is None and a.owns_to is None:
            span = "all steps"
        elif a.owns_from is None:
            span = f"steps ≤ {a.owns_to}"
        elif a.owns_to is None:
            span = f"steps ≥ {a.owns_from}"
        else:
            span = f"steps {a.owns_from}–{a.owns_to}"
        parts.append(f"attempt {a.attempt} #{a.run_id} ({a.status}, {span})")
    return " → ".join(parts)


LOG_LINES = 2000


@dataclass(frozen=True)
class LogTail:
    """The end of a log file: its last lines, and whether earlier lines were left out."""

    text: str
    shown: int
    truncated: bool
    size: int


def read_log(path: str | None, lines: int = LOG_LINES, max_bytes: int = 1_000_000) -> LogTail:
    """The last ``lines`` lines of a run's log file (reads at most ``max_bytes`` from its end)."""
    if not path or not Path(path).is_file():
        return LogTail("", 0, False, 0)
    file = Path(path)
    size = file.stat().st_size
    with file.open("rb") as handle:
        handle.seek(max(0, size - max_bytes))
        data = handle.read().decode("utf-8", errors="replace")
    all_lines = data.splitlines()
    if size > max_bytes and all_lines:
        all_lines = all_lines[1:]  # the first line read may be cut
    kept = list(deque(all_lines, maxlen=lines))
    return LogTail("\n".join(kept), len(kept), size > max_bytes or len(all_lines) > lines, size)


def heartbeat_age(when: datetime | None, now: datetime) -> str:
    """How long ago a heartbeat was, for display. ``now`` is the database server's time
    (:meth:`db.store.Store.server_now`): heartbeats and worker sightings are stamped with its clock
    (:mod:`db.clock`), so a dashboard whose own clock is off still shows their true age."""
    if when is None:
        return "never"
    return format_duration(max(0.0, (now - when).total_seconds())) + " ago"


def episodes_by_item(episodes: list[EpisodeView]) -> dict[int | None, EpisodeView]:
    """The first episode of each dataset item (to line up the same prompt at two steps)."""
    out: dict[int | None, EpisodeView] = {}
    for episode in episodes:
        out.setdefault(episode.item_index, episode)
    return out


def compare_series(
    store: Store, run_ids: list[int], key: str, *, x: str = "step", max_points: int = 1000,
    labels: dict[int, str] | None = None, histories: dict[int, Lineage] | None = None,
) -> tuple[tuple[str, Series], ...]:
    """The same metric of several runs (labelled by ``labels``, else ``#id``), for one overlaid chart.
    A run with a resumed history in ``histories`` is drawn along the whole history (its attempts joined)."""
    labels = labels or {}
    histories = histories or {}

    def series(run_id: int) -> Series:
        if run_id in histories and histories[run_id].joined:
            return store.joined_series(histories[run_id], key, x=x, max_points=max_points).series
        return store.series(run_id, key, x=x, max_points=max_points)

    return tuple((labels.get(run_id, f"#{run_id}"), series(run_id)) for run_id in run_ids)


def shared_metric_keys(store: Store, run_ids: list[int]) -> list[str]:
    """Metric keys logged by any of the runs, those logged by all first."""
    per_run = [set(store.metric_keys(run_id)) for run_id in run_ids]
    if not per_run:
        return []
    common = set.intersection(*per_run)
    union = set.union(*per_run)
    return sorted(common) + sorted(union - common)
