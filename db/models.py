"""SQLAlchemy 2 ORM models: the tables. They never leave ``db/`` (see :mod:`db.records`).

``experiments`` and ``runs`` are Core tables declared in :mod:`db.tables` (what a submit writes without
the ORM, :mod:`db.run_writes`); their classes here are mapped onto them (``__table__``), with the same
annotations. Every table is in :data:`db.tables.metadata`.

Times are stored as naive UTC (``UTCDateTime``) so SQLite and PostgreSQL compare them the same way;
they come back timezone-aware. Metric wall times are float epoch seconds so they can be an x-axis.
An integer column is declared by its annotation alone (``step: Mapped[int]``); float columns name
``Float``, the type the migrations created (the annotation alone would mean ``Double``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from db.tables import BigId, UTCDateTime, experiments, metadata, runs, utcnow


class Base(DeclarativeBase):
    """Declarative base of every CoopLab table, in :data:`db.tables.metadata`."""

    metadata = metadata


class ExperimentRow(Base):
    __table__ = experiments  # declared in db.tables (Core: what a submit writes without the ORM)

    id: Mapped[int]
    name: Mapped[str]
    description: Mapped[str]
    tags: Mapped[list[str]]
    config: Mapped[dict[str, Any]]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]

    runs: Mapped[list[RunRow]] = relationship(back_populates="experiment", cascade="all, delete-orphan",
                                              passive_deletes=True)


class RunRow(Base):
    __table__ = runs  # declared in db.tables

    id: Mapped[int]
    experiment_id: Mapped[int]
    attempt: Mapped[int]
    status: Mapped[str]
    config: Mapped[dict[str, Any]]
    queue: Mapped[str]
    device: Mapped[str | None]
    celery_task_id: Mapped[str | None]
    worker: Mapped[str | None]
    created_at: Mapped[datetime]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    heartbeat_at: Mapped[datetime | None]
    step: Mapped[int]
    env_step: Mapped[int]
    total_steps: Mapped[int | None]
    first_step: Mapped[int | None]
    first_step_at: Mapped[datetime | None]
    last_step_at: Mapped[datetime | None]
    error: Mapped[str | None]
    resumed_from: Mapped[int | None]
    stop_requested: Mapped[bool]
    stop_requested_at: Mapped[datetime | None]
    storing_at: Mapped[datetime | None]
    retried_as: Mapped[int | None]
    tags: Mapped[list[str]]
    notes: Mapped[str]
    name: Mapped[str | None]
    log_path: Mapped[str | None]
    output_dir: Mapped[str | None]

    experiment: Mapped[ExperimentRow] = relationship(back_populates="runs")


class MetricRow(Base):
    __tablename__ = "metrics"
    # value is in the indexes so range reads and per-bucket min/max never touch the table, along the
    # step axis and along the wall-time axis (step in the second for step ranges on that axis).
    __table_args__ = (Index("ix_metrics_run_key_step", "run_id", "key", "step", "value"),
                      Index("ix_metrics_run_key_wall", "run_id", "key", "wall_time", "value", "step"))

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(200))
    step: Mapped[int]
    env_step: Mapped[int | None] = mapped_column(BigInteger)
    value: Mapped[float | None] = mapped_column(Float)  # NULL stands for NaN
    wall_time: Mapped[float] = mapped_column(Float)


class MetricRollupRow(Base):
    """Per run, key and power-of-two block of steps (``bucket = step >> level``): how many non-NaN
    points it holds and its smallest and largest value with their steps (the earliest on ties).
    Kept up to date in the transaction that writes the points; wide series queries read it instead of
    every point (see :mod:`db.rollups`)."""

    __tablename__ = "metric_rollups"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    level: Mapped[int] = mapped_column(Integer, primary_key=True)
    bucket: Mapped[int] = mapped_column(Integer, primary_key=True)
    count: Mapped[int]
    min_value: Mapped[float] = mapped_column(Float)
    min_step: Mapped[int]
    max_value: Mapped[float] = mapped_column(Float)
    max_step: Mapped[int]


class EpisodeRow(Base):
    __tablename__ = "episodes"
    __table_args__ = (Index("ix_episodes_run_step", "run_id", "step"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    step: Mapped[int]
    split: Mapped[str] = mapped_column(String(20))
    sample_index: Mapped[int]
    item_index: Mapped[int | None]
    reward: Mapped[float] = mapped_column(Float)
    ret: Mapped[float] = mapped_column(Float)


class TurnRow(Base):
    __tablename__ = "turns"
    __table_args__ = (Index("ix_turns_episode", "episode_id"), Index("ix_turns_run_step", "run_id", "step"))

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    episode_id: Mapped[int] = mapped_column(ForeignKey("episodes.id", ondelete="CASCADE"))
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    step: Mapped[int]
    turn: Mapped[int]
    agent_index: Mapped[int]
    agent_name: Mapped[str] = mapped_column(String(200))
    prompt: Mapped[str] = mapped_column(Text)
    completion: Mapped[str] = mapped_column(Text)
    reward: Mapped[float] = mapped_column(Float)
    ret: Mapped[float] = mapped_column(Float)
    advantage: Mapped[float] = mapped_column(Float)
    credit: Mapped[float | None] = mapped_column(Float)


class CheckpointRow(Base):
    __tablename__ = "checkpoints"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    step: Mapped[int]
    path: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    artifact_url: Mapped[str | None] = mapped_column(Text)
    """The store URL of the checked upload of this checkpoint (None: only the local copy)."""


class WorkerRow(Base):
    __tablename__ = "workers"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    host: Mapped[str] = mapped_column(String(200))
    devices: Mapped[list[str]] = mapped_column(JSON, default=list)
    queues: Mapped[list[str]] = mapped_column(JSON, default=list)
    pid: Mapped[int | None]
    online: Mapped[bool] = mapped_column(Boolean, default=True)
    last_seen: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    current_run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"))
    clock_skew_s: Mapped[float | None] = mapped_column(Float)
    """Seconds the worker's clock was ahead of the database server's at its last registration."""


class MetaRow(Base):
    """Facts about the database itself, by key: ``database_id`` (a random id given when the schema is
    created; a data directory records the id of the database that owns it)."""

    __tablename__ = "cooplab_meta"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class StudyRow(Base):
    """A study: a base run config, a search space and seeds per point (``spec``, see
    :mod:`db.study_store`), whose children are runs of the experiment ``experiment_id``. ``status`` is
    ``active`` (its scheduler queues children up to ``max_concurrent``), ``stopped`` or ``finished``."""

    __tablename__ = "studies"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"), index=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(20), index=True)
    queue: Mapped[str] = mapped_column(String(100))
    max_concurrent: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class StudyTrialRow(Base):
    """One child of a study: a point of its search space (``params`` by dotted path) with one seed, the
    whole validated run ``config``, and the run executing it (None while it waits for a slot)."""

    __tablename__ = "study_trials"
    __table_args__ = (UniqueConstraint("study_id", "point", "seed_index", name="uq_study_trials_point_seed"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    point: Mapped[int] = mapped_column(Integer)
    seed_index: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(Integer)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"), index=True)
    previous_run_ids: Mapped[list[int]] = mapped_column(JSON, default=list)
    stop_reason: Mapped[str | None] = mapped_column(Text)


class EvaluationRow(Base):
    """One evaluation of a run's team (``cooplab eval``): at a checkpoint, on a split, with its settings,
    metrics, standard errors, per-item outcomes and the evaluated episodes. A team analysis stores one
    row per variant (``kind`` ``team_analysis``, ``label`` the variant), sharing ``analysis``."""

    __tablename__ = "evaluations"
    __table_args__ = (Index("ix_evaluations_run_step", "run_id", "checkpoint_step"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(20))
    label: Mapped[str] = mapped_column(String(200))
    analysis: Mapped[str | None] = mapped_column(String(36))
    checkpoint_step: Mapped[int | None]
    checkpoint_path: Mapped[str | None] = mapped_column(Text)
    split: Mapped[str] = mapped_column(String(20))
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    standard_errors: Mapped[dict[str, Any]] = mapped_column(JSON)
    per_item: Mapped[list[Any]] = mapped_column(JSON)
    episodes: Mapped[list[Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class EvalRequestRow(Base):
    """A request to evaluate a run on a worker (the dashboard's Evaluate, ``cooplab eval RUN --queue``):
    which checkpoint (``last``, ``best`` or a step) with which ``options``, and its state: ``queued``,
    ``running`` (a worker holds it and refreshes ``heartbeat_at``), ``done`` (``evaluation_ids`` are the
    records it stored) or ``failed`` (``error``: one line saying why)."""

    __tablename__ = "eval_requests"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(String(20), index=True)
    checkpoint: Mapped[str] = mapped_column(String(40))
    options: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    queue: Mapped[str] = mapped_column(String(100))
    celery_task_id: Mapped[str | None] = mapped_column(String(200))
    worker: Mapped[str | None] = mapped_column(String(200))
    error: Mapped[str | None] = mapped_column(Text)
    evaluation_ids: Mapped[list[int]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class RunEnvironmentRow(Base):
    """Where and with what a run's job trained (``jobs.run_environment``): the code's git commit, whether
    its tree was dirty and the diff (capped), Python and package versions, host, command line. One row
    per run, written when its job starts; read on the run page, in its downloads and by ``cooplab.api``
    (kept out of ``runs`` so listing runs never loads a diff)."""

    __tablename__ = "run_environments"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    captured_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class SavedViewRow(Base):
    """What a dashboard user chose to see, kept across sessions and browsers (``db.ops_saved_views``):
    per ``owner`` (who chose it), ``view`` (``runs_columns``, ...) and ``scope`` (which experiment's
    table, ``all``, ...), one JSON ``choice``."""

    __tablename__ = "saved_views"

    owner: Mapped[str] = mapped_column(String(100), primary_key=True)
    view: Mapped[str] = mapped_column(String(40), primary_key=True)
    scope: Mapped[str] = mapped_column(String(100), primary_key=True)
    choice: Mapped[dict[str, Any]] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
