"""Plain frozen dataclasses: what leaves the store (never ORM objects).

Transcripts go in and come out as :mod:`transcripts` records: ``log_step`` takes the engine's
:class:`~transcripts.Episode` as it is, and a stored episode's turns are :class:`~transcripts.TurnRecord`.

Times are timezone-aware UTC ``datetime`` objects; ``wall_time`` of metric points is seconds since
the Unix epoch (what ``time.time()`` returns), so it can be an x-axis.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from db.states import ACTIVE_STATUSES
from engine.transcripts import TurnRecord


@dataclass(frozen=True)
class Experiment:
    """A named family of runs sharing a run config (the one the form edits)."""

    id: int
    name: str
    description: str
    tags: tuple[str, ...]
    config: Mapping[str, Any]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Run:
    """One attempt at training one config. ``step`` / ``env_step`` is the progress last logged;
    ``stop_requested_at`` is when a stop was first asked for (None while nobody asked); ``storing_at`` is
    when its job last finished storing a file of its artifacts in the artifact store (None before that);
    ``retried_as`` is the attempt the retry policy queued after this run was lost (:mod:`jobs.retries`)."""

    id: int
    experiment_id: int
    attempt: int
    status: str
    config: Mapping[str, Any]
    queue: str
    device: str | None
    celery_task_id: str | None
    worker: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None
    step: int
    env_step: int
    total_steps: int | None
    error: str | None
    resumed_from: int | None
    stop_requested: bool
    stop_requested_at: datetime | None
    tags: tuple[str, ...]
    notes: str
    log_path: str | None
    output_dir: str | None
    storing_at: datetime | None = None
    retried_as: int | None = None
    name: str | None = None
    """The display name a researcher gave the run (:meth:`db.store.Store.rename_run`); None: none."""

    @property
    def is_active(self) -> bool:
        """True while the run may still change state (queued, starting, running, stopping)."""
        return self.status in ACTIVE_STATUSES

    @property
    def progress(self) -> float | None:
        """Fraction of steps done (0..1), or None when the total is unknown."""
        if not self.total_steps:
            return None
        return min(1.0, max(0.0, self.step / self.total_steps))


@dataclass(frozen=True)
class MetricPoint:
    """One logged value of one metric key."""

    key: str
    step: int
    env_step: int | None
    value: float
    wall_time: float


@dataclass(frozen=True)
class Series:
    """A metric's points along one x-axis, possibly downsampled for plotting.

    ``total_points`` counts the stored points in the requested x range; ``downsampled`` is True when
    fewer came back (first and last kept, and each bucket's minimum and maximum).
    """

    run_id: int
    key: str
    x: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    total_points: int
    downsampled: bool

    def __len__(self) -> int:
        return len(self.xs)


@dataclass(frozen=True)
class EpisodeView:
    """A stored episode (one branch of a rollout tree) with its turns in (turn, agent) order.

    ``reward`` is the sum over turns of the team reward; ``ret`` the return from the first turn.
    """

    id: int
    run_id: int
    step: int
    split: str
    sample_index: int
    item_index: int | None
    reward: float
    ret: float
    turns: tuple[TurnRecord, ...]


@dataclass(frozen=True)
class EpisodesSince:
    """What :meth:`db.ops_transcripts.TranscriptOps.episodes_since` found past a live view's cursor:
    the matching episodes of the newest step among the new ones (``step``; None when none matches),
    how many new episodes match in all (``count``), and the cursor of the next read (``top_id``, the
    highest episode id, and ``top_step``, the newest step of any new episode)."""

    episodes: tuple[EpisodeView, ...]
    count: int
    step: int | None
    top_id: int
    top_step: int


@dataclass(frozen=True)
class Checkpoint:
    """A saved training state on disk; ``artifact_url`` is the artifact store URL of its checked copy
    (None while only the local folder exists, and always with the embedded local store)."""

    id: int
    run_id: int
    step: int
    path: str
    created_at: datetime
    artifact_url: str | None = None


@dataclass(frozen=True)
class Worker:
    """A worker process as it last reported itself."""

    name: str
    host: str
    devices: tuple[str, ...]
    queues: tuple[str, ...]
    pid: int | None
    online: bool
    last_seen: datetime
    current_run_id: int | None
    clock_skew_s: float | None = None
    """Seconds the worker's clock is ahead of the database server's (negative: behind); None if unknown."""


@dataclass(frozen=True)
class RunRate:
    """Inputs for a progress bar: step rate over the logged steps and the estimated time left.

    ``steps_per_s`` and ``eta_s`` are None until two different steps have been logged (and ``eta_s``
    also when the total is unknown).
    """

    run_id: int
    step: int
    total_steps: int | None
    first_step: int | None
    first_step_at: datetime | None
    last_step_at: datetime | None
    steps_per_s: float | None
    eta_s: float | None


# ------------------------------------------------------------------------------ run lineage


@dataclass(frozen=True)
class Attempt:
    """One attempt of a run's history and the steps it owns in the joined view.

    A resumed attempt owns its steps from its first logged step on; the attempt before it keeps the
    steps before that, so each step appears once and the later attempt wins where they overlap.
    ``owns_from`` / ``owns_to`` are inclusive; None means unbounded on that side. ``owns_nothing``
    is True for an attempt that has not logged a step yet (while a later one has, or before it starts).
    """

    run_id: int
    attempt: int
    status: str
    step: int
    first_step: int | None
    owns_from: int | None
    owns_to: int | None
    owns_nothing: bool = False

    def owns(self, step: int) -> bool:
        """True when ``step`` of this attempt is the one the joined history shows."""
        if self.owns_nothing:
            return False
        return (self.owns_from is None or step >= self.owns_from) and (self.owns_to is None or step <= self.owns_to)


@dataclass(frozen=True)
class Lineage:
    """A run's whole history: the attempts it was resumed from, itself, and the attempts that resume
    it (the newest resume at each point), oldest first."""

    run_id: int
    attempts: tuple[Attempt, ...]

    @property
    def run_ids(self) -> tuple[int, ...]:
        return tuple(a.run_id for a in self.attempts)

    @property
    def root(self) -> int:
        return self.attempts[0].run_id

    @property
    def latest(self) -> int:
        return self.attempts[-1].run_id

    @property
    def joined(self) -> bool:
        """True when the history has more than one attempt."""
        return len(self.attempts) > 1

    def owner(self, step: int) -> int | None:
        """The attempt (run id) whose value of ``step`` the joined history shows."""
        for attempt in reversed(self.attempts):
            if attempt.owns(step):
                return attempt.run_id
        return None


@dataclass(frozen=True)
class JoinedSeries:
    """One metric along a lineage: the points of each attempt's own steps, in order, as one series,
    and where each attempt after the first begins on the x axis (``(x, attempt, run_id)``)."""

    series: Series
    boundaries: tuple[tuple[float, int, int], ...]
