"""Data access for the views: every read the pages make, as plain functions over a :class:`Store`.

Pages stay thin (layout only) and these functions are tested and benchmarked on their own. Each
function issues a bounded number of queries (a page of runs, the charts on screen), never a scan of
a whole run's history.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.runinfo import badge, format_duration
from db.errors import NotFoundError
from db.records import EpisodeView, Experiment, Run, Series
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


def run_label(run: Run, names: dict[int, str]) -> str:
    """``#12 quickstart (attempt 2) · 2026-11-30 14:05``: how a run is named in pickers.

    The state is left out on purpose: pickers are not refreshed live, the status header is.
    """
    attempt = f" (attempt {run.attempt})" if run.attempt > 1 else ""
    return f"#{run.id} {names.get(run.experiment_id, '?')}{attempt} · {run.created_at:%Y-%m-%d %H:%M}"


def runs_table(store: Store, runs: list[Run], names: dict[int, str]) -> list[dict[str, Any]]:
    """Rows of the runs table: status, progress, step rate, ETA, where it runs, reward sparkline.

    Two small queries per run (rate, sparkline), so callers pass one page of runs.
    """
    rows = []
    for run in runs:
        rate = store.run_rate(run.id)
        spark = store.series(run.id, SPARK_KEY, max_points=SPARK_POINTS).ys if run.step else ()
        rows.append(
            {
                "id": run.id,
                "experiment": names.get(run.experiment_id, str(run.experiment_id)),
                "attempt": run.attempt,
                "status": badge(run.status),
                "progress": run.progress or 0.0,
                "step": f"{run.step}/{run.total_steps}" if run.total_steps else str(run.step),
                "steps/s": round(rate.steps_per_s, 3) if rate.steps_per_s else None,
                "ETA": format_duration(rate.eta_s) if run.status in ("running", "starting") else "",
                "device": run.device or run.queue,
                "worker": run.worker or "",
                "reward": list(spark),
                "tags": ", ".join(run.tags),
                "notes": run.notes,
                "created": run.created_at.strftime("%Y-%m-%d %H:%M"),
            }
        )
    return rows


@dataclass(frozen=True)
class ChartData:
    """The series of one chart, as fetched from the store (already downsampled)."""

    title: str
    series: tuple[tuple[str, Series], ...]


def chart_data(
    store: Store,
    run_id: int,
    curves: tuple[tuple[str, str], ...],
    *,
    x: str = "step",
    max_points: int = 1000,
    x_range: tuple[float, float] | None = None,
    title: str = "",
) -> ChartData:
    """One downsampled series per curve, all on the same x range (a shared grid)."""
    lo, hi = x_range if x_range else (None, None)
    series = tuple(
        (label, store.series(run_id, key, x=x, max_points=max_points, x_min=lo, x_max=hi))
        for label, key in curves
    )
    return ChartData(title, series)


def log_tail(path: str | None, lines: int = 200, max_bytes: int = 256_000) -> str:
    """The last ``lines`` lines of a run's log file (reads at most ``max_bytes`` from the end)."""
    if not path:
        return ""
    file = Path(path)
    if not file.is_file():
        return ""
    size = file.stat().st_size
    with file.open("rb") as handle:
        handle.seek(max(0, size - max_bytes))
        data = handle.read().decode("utf-8", errors="replace")
    return "\n".join(deque(data.splitlines(), maxlen=lines))


def heartbeat_age(when: datetime | None, now: datetime | None = None) -> str:
    """How long ago a heartbeat was, for display."""
    if when is None:
        return "never"
    now = now or datetime.now(UTC)
    return format_duration((now - when).total_seconds()) + " ago"


def episodes_by_item(episodes: list[EpisodeView]) -> dict[int | None, EpisodeView]:
    """The first episode of each dataset item (to line up the same prompt at two steps)."""
    out: dict[int | None, EpisodeView] = {}
    for episode in episodes:
        out.setdefault(episode.item_index, episode)
    return out


def compare_series(
    store: Store, run_ids: list[int], key: str, *, x: str = "step", max_points: int = 1000
) -> tuple[tuple[str, Series], ...]:
    """The same metric of several runs (labelled ``#id``), for one overlaid chart."""
    return tuple((f"#{run_id}", store.series(run_id, key, x=x, max_points=max_points)) for run_id in run_ids)


def shared_metric_keys(store: Store, run_ids: list[int]) -> list[str]:
    """Metric keys logged by any of the runs, those logged by all first."""
    per_run = [set(store.metric_keys(run_id)) for run_id in run_ids]
    if not per_run:
        return []
    common = set.intersection(*per_run)
    union = set.union(*per_run)
    return sorted(common) + sorted(union - common)
