"""Live views that cost almost nothing: a run's metric points held in the browser session and extended
on each poll by only what is new, and the polling itself switched off once a run has ended.

:class:`LiveMetrics` keeps the points of the keys on screen (at most :data:`CACHE_POINTS` per run) and
asks the store only for rows past the last one seen (:meth:`db.ops_metrics.MetricOps.points_since`):
one indexed query per poll whatever the run's length. Curves are downsampled here as the store would
(each bucket's minimum and maximum, the first and the last point), so a chart is rebuilt from memory
plus the new rows. A run longer than the cache goes back to the store's downsampled series.

:class:`LogFollow` does the same for a run's log: it keeps the last lines shown and reads only the
bytes written since the last poll.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.queries import LOG_LINES, LogTail
from db.downsample import bucket_count
from db.records import Series
from db.states import ACTIVE_STATUSES, TERMINAL_STATUSES
from db.store import Store

CACHE_POINTS = 50_000
"""Points of one run a session holds; a run with more is charted from the store's downsampled series."""


def poll_every(every: float | None, status: str) -> float | None:
    """How often a live region of a run's page reruns: never once the run has ended (nothing can
    change but by a user's action, which reruns the page anyway), else ``every`` (None: live refresh off)."""
    return None if status in TERMINAL_STATUSES else every


IDLE_EVERY_S = 30.0
"""How often a list of runs is re-read while none of them is active (one may be launched elsewhere)."""


def list_every(every: float | None, active: bool) -> float | None:
    """How often a list of runs reruns: ``every`` while a run is active, else every :data:`IDLE_EVERY_S`
    seconds (None: live refresh off)."""
    if every is None:
        return None
    return every if active else max(every, IDLE_EVERY_S)


@dataclass
class _Points:
    steps: list[int] = field(default_factory=list)
    env_steps: list[float | None] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)


@dataclass
class LiveMetrics:
    """The points of a run's charted keys, extended by what is new on each :meth:`refresh`.

    ``queries`` and ``rows`` count the reads and the rows they brought (what a test checks: a poll
    brings only new rows); ``version`` changes exactly when new points arrived."""

    run_id: int
    points: dict[str, _Points] = field(default_factory=dict)
    last_step: int = 0
    last_id: int = 0
    held: int = 0
    too_many: bool = False
    queries: int = 0
    rows: int = 0

    @property
    def version(self) -> int:
        return self.last_id

    def refresh(self, store: Store, keys: Iterable[str]) -> bool:
        """Bring the points of ``keys`` up to date; True when there were new ones. A key not held yet
        (a chart picked now) refetches them all from the start: every key stays cut at the same row."""
        wanted = set(keys)
        if self.too_many or not wanted:
            return False
        if not wanted <= set(self.points):
            self.points = {key: _Points() for key in wanted | set(self.points)}
            self.last_step = self.last_id = self.held = 0
        room = CACHE_POINTS - self.held
        new, top = store.points_since(self.run_id, list(self.points), step_from=self.last_step,
                                      after_id=self.last_id, limit=room + 1)
        self.queries += 1
        self.rows += len(new)
        if len(new) > room:
            self.too_many, self.points = True, {}
            return True
        for point in new:
            held = self.points[point.key]
            held.steps.append(point.step)
            held.env_steps.append(point.env_step)
            held.walls.append(point.wall_time)
            held.values.append(point.value)
            self.last_step = max(self.last_step, point.step)
        self.held += len(new)
        self.last_id = top
        return bool(new)

    def series(self, key: str, *, x: str = "step", max_points: int = 1000) -> Series:
        """``key`` along ``x`` from the held points, downsampled like :meth:`db.ops_metrics.MetricOps.series`."""
        held = self.points.get(key, _Points())
        if x == "step":
            xs: list[float] = [float(s) for s in held.steps]
            ys = list(held.values)
        elif x == "wall_time":
            xs, ys = list(held.walls), list(held.values)
        elif x == "env_step":
            pairs = [(float(e), v) for e, v in zip(held.env_steps, held.values, strict=True) if e is not None]
            xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
        else:
            raise ValueError(f"unknown x axis {x!r}; use 'step', 'env_step' or 'wall_time'")
        if any(b < a for a, b in zip(xs, xs[1:], strict=False)):
            order = sorted(range(len(xs)), key=xs.__getitem__)
            xs, ys = [xs[i] for i in order], [ys[i] for i in order]
        total = len(xs)
        if total <= max_points:
            return Series(run_id=self.run_id, key=key, x=x, xs=tuple(xs), ys=tuple(ys), total_points=total,
                          downsampled=False)
        kept = downsample(xs, ys, bucket_count(max_points))
        return Series(run_id=self.run_id, key=key, x=x, xs=tuple(xs[i] for i in kept),
                      ys=tuple(ys[i] for i in kept), total_points=total, downsampled=True)


def downsample(xs: list[float], ys: list[float], n: int) -> list[int]:
    """Indices kept of points sorted by x: the first and the last, and each of ``n`` equal x buckets'
    smallest and largest value (NaN values are never a bucket's extreme)."""
    lo, hi = xs[0], xs[-1]
    width = (hi - lo) or 1.0
    lows: dict[int, int] = {}
    highs: dict[int, int] = {}
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if math.isnan(y):
            continue
        b = min(n - 1, int((x - lo) * n / width))
        if b not in lows or y < ys[lows[b]]:
            lows[b] = i
        if b not in highs or y > ys[highs[b]]:
            highs[b] = i
    return sorted({0, len(xs) - 1, *lows.values(), *highs.values()})


def any_active(counts: dict[str, int]) -> bool:
    """Whether run counts by state (:meth:`db.ops_runs.RunOps.run_counts_by_status`) hold an active run."""
    return any(counts.get(status) for status in ACTIVE_STATUSES)


def live_metrics(state: dict, run_id: int) -> LiveMetrics:
    """The session's held points of ``run_id`` (made on first use), kept in ``state`` (``st.session_state``)."""
    key = f"live_metrics.{run_id}"
    found = state.get(key)
    if not isinstance(found, LiveMetrics):
        found = state[key] = LiveMetrics(run_id)
    return found


@dataclass
class LogFollow:
    """The end of a growing log file, followed by reading only what was appended since the last
    :meth:`refresh` (the first reads at most ``max_bytes`` from its end, like :func:`app.queries.read_log`).
    A file that shrank or was replaced is read again from its end. ``bytes_read`` counts what the reads
    brought (what a test checks: a poll reads only the new lines)."""

    lines: int = LOG_LINES
    max_bytes: int = 1_000_000
    path: str | None = None
    offset: int = 0
    kept: deque = field(default_factory=deque)
    partial: bytes = b""
    seen: int = 0
    cut: bool = False
    bytes_read: int = 0

    def _restart(self, path: str) -> None:
        self.path, self.offset, self.kept, self.partial = path, 0, deque(maxlen=self.lines), b""
        self.seen, self.cut = 0, False

    def refresh(self, path: str | None) -> LogTail:
        """The last :attr:`lines` lines of ``path`` now (an empty tail when there is no such file)."""
        if not path:
            return LogTail("", 0, False, 0)
        try:
            with open(path, "rb") as handle:
                size = handle.seek(0, 2)
                if path != self.path or size < self.offset or size - self.offset > self.max_bytes:
                    self._restart(path)
                    self.offset = max(0, size - self.max_bytes)
                    self.cut = self.offset > 0
                if size > self.offset:
                    handle.seek(self.offset)
                    data = handle.read(size - self.offset)
                    self.bytes_read += len(data)
                    self._take(data, first_cut=self.offset > 0 and not self.seen and not self.partial)
                    self.offset += len(data)
        except (FileNotFoundError, IsADirectoryError):
            self.path = None
            return LogTail("", 0, False, 0)
        shown = list(self.kept)
        if self.partial:
            shown.append(self.partial.decode("utf-8", errors="replace"))
        text = "\n".join(shown[-self.lines:])
        count = min(len(shown), self.lines)
        return LogTail(text, count, self.cut or self.seen + bool(self.partial) > self.lines, size)

    def _take(self, data: bytes, *, first_cut: bool) -> None:
        data = self.partial + data
        *complete, self.partial = data.split(b"\n")
        if first_cut and complete:
            complete = complete[1:]  # the first line read from the middle of the file may be cut
        for raw in complete:
            self.kept.append(raw.rstrip(b"\r").decode("utf-8", errors="replace"))
        self.seen += len(complete)


def log_follow(state: dict, run_id: int) -> LogFollow:
    """The session's follower of ``run_id``'s log (made on first use), kept in ``state``."""
    key = f"live_log.{run_id}"
    found = state.get(key)
    if not isinstance(found, LogFollow):
        found = state[key] = LogFollow()
    return found
