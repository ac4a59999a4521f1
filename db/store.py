"""The store: every read and write of CoopLab's database goes through :class:`Store`.

``Store(url)`` takes any SQLAlchemy URL (``sqlite:///path.db`` by default, ``postgresql://...`` for
many machines). Each method is one transaction and returns frozen dataclasses from
:mod:`db.records`, never ORM objects, so callers never see a session. Run states change only through
:meth:`Store.transition` (and :meth:`Store.request_stop` / :meth:`Store.reap_lost`), which update the
row with a compare-and-set ``UPDATE ... WHERE status IN (...)``: when two processes race to move the
same run, exactly one wins and the other gets :class:`InvalidTransition`.

The schema is created by alembic migrations: call :func:`db.migrate.upgrade` (or pass
``migrate=True``) once when a process starts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.engine import make_url

from db import ops_experiments, ops_lineage, ops_meta, ops_metrics, ops_runs, ops_transcripts, ops_workers
from db.clock import server_now
from db.engine import make_engine, read_session, write_session
from db.errors import DuplicateNameError, NotFoundError, RunActiveError
from db.records import (
    Checkpoint,
    EpisodeView,
    Experiment,
    JoinedSeries,
    Lineage,
    MetricPoint,
    Run,
    RunRate,
    Series,
    Worker,
)
from db.states import InvalidTransition
from transcripts import Episode

__all__ = ["Store", "InvalidTransition", "NotFoundError", "DuplicateNameError", "RunActiveError"]


class Store:
    """Experiments, runs, metrics, transcripts, checkpoints and workers in one database.

    Safe to share between threads of one process (each call takes its own connection from the pool);
    each process should create its own ``Store``.
    """

    def __init__(self, url: str, *, migrate: bool = False, echo: bool = False) -> None:
        """Connect to ``url``; with ``migrate=True`` also bring the schema up to date first."""
        self.url = url
        self.engine = make_engine(url, echo=echo)
        if migrate:
            from db.migrate import upgrade_engine

            upgrade_engine(self.engine)

    @property
    def dialect(self) -> str:
        """``"sqlite"``, ``"postgresql"``, ...: the database kind behind the URL."""
        return make_url(self.url).get_backend_name()

    def close(self) -> None:
        """Release pooled connections (the store cannot be used afterwards)."""
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------ experiments

    def create_experiment(self, name: str, *, description: str = "", tags: Iterable[str] = (),
                          config: Mapping[str, Any] | None = None) -> Experiment:
        """Create an experiment; ``name`` must be unique (else :class:`DuplicateNameError`)."""
        with write_session(self.engine) as s:
            return ops_experiments.create_experiment(s, name=name, description=description, tags=tags,
                                                     config=config)

    def get_or_create_experiment(self, name: str, *, description: str = "", tags: Iterable[str] = (),
                                 config: Mapping[str, Any] | None = None) -> Experiment:
        """The experiment named ``name``, created with the given fields when there is none yet (the
        fields of an existing one are left as they are). Parallel callers all get the same experiment,
        never :class:`DuplicateNameError`."""
        with write_session(self.engine) as s:
            return ops_experiments.get_or_create_experiment(s, name=name, description=description, tags=tags,
                                                            config=config)

    def get_experiment(self, experiment_id: int) -> Experiment:
        """The experiment with this id (else :class:`NotFoundError`)."""
        with read_session(self.engine) as s:
            return ops_experiments.get_experiment(s, experiment_id)

    def find_experiment(self, name: str) -> Experiment | None:
        """The experiment with exactly this name, or None."""
        with read_session(self.engine) as s:
            return ops_experiments.find_experiment(s, name)

    def list_experiments(self, *, search: str | None = None, tag: str | None = None, limit: int = 200,
                         offset: int = 0) -> list[Experiment]:
        """Experiments, newest first; ``search`` matches name or description (case-insensitive
        substring), ``tag`` keeps those carrying that exact tag."""
        with read_session(self.engine) as s:
            return ops_experiments.list_experiments(s, search=search, tag=tag, limit=limit, offset=offset)

    def update_experiment(self, experiment_id: int, *, name: str | None = None,
                          description: str | None = None, tags: Iterable[str] | None = None,
                          config: Mapping[str, Any] | None = None) -> Experiment:
        """Change the given fields (None leaves a field as it is) and bump ``updated_at``."""
        with write_session(self.engine) as s:
            return ops_experiments.update_experiment(s, experiment_id, name=name, description=description,
                                                     tags=tags, config=config)

    def delete_experiment(self, experiment_id: int, *, force: bool = False) -> None:
        """Delete an experiment with all its runs, metrics and transcripts. Refuses
        (:class:`RunActiveError`) while one of its runs is active, unless ``force``."""
        with write_session(self.engine) as s:
            ops_experiments.delete_experiment(s, experiment_id, force=force)

    def clone_experiment(self, experiment_id: int, name: str, *, description: str | None = None) -> Experiment:
        """A new experiment with the same config and tags (and description unless given), no runs."""
        with write_session(self.engine) as s:
            return ops_experiments.clone_experiment(s, experiment_id, name=name, description=description)

    def experiment_tags(self) -> list[str]:
        """Every tag used by some experiment, sorted."""
        with read_session(self.engine) as s:
            return ops_experiments.experiment_tags(s)

    # --------------------------------------------------------------------------------- runs

    def create_run(self, experiment_id: int, config: Mapping[str, Any], queue: str,
                   total_steps: int | None = None, resumed_from: int | None = None, *,
                   device: str | None = None, tags: Iterable[str] = (), notes: str = "") -> Run:
        """Store a new ``queued`` run with a snapshot of ``config``. ``attempt`` is 1, or one more than
        the run it resumes (``resumed_from``, which must belong to the same experiment)."""
        with write_session(self.engine) as s:
            return ops_runs.create_run(s, experiment_id=experiment_id, config=config, queue=queue,
                                       total_steps=total_steps, resumed_from=resumed_from, device=device,
                                       tags=tags, notes=notes)

    def get_run(self, run_id: int) -> Run:
        """The run with this id (else :class:`NotFoundError`)."""
        with read_session(self.engine) as s:
            return ops_runs.get_run(s, run_id)

    def list_runs(self, experiment_id: int | None = None, statuses: Iterable[str] | None = None,
                  limit: int = 100, *, offset: int = 0, tag: str | None = None) -> list[Run]:
        """Runs, newest first, optionally of one experiment, in some states, or carrying a tag."""
        with read_session(self.engine) as s:
            return ops_runs.list_runs(s, experiment_id=experiment_id, statuses=statuses, limit=limit,
                                      offset=offset, tag=tag)

    def transition(self, run_id: int, to: str, *, error: str | None = None,
                   expected_from: str | None = None, worker: str | None = None) -> Run:
        """Move a run to state ``to`` if the state machine allows it from where the run is (and, with
        ``expected_from``, only if the run is in exactly that state). Sets ``started_at`` on
        ``running``, ``finished_at`` on a final state, ``error`` and ``worker`` when given.
        Raises :class:`InvalidTransition` (with ``.current``) when refused."""
        with write_session(self.engine) as s:
            return ops_runs.transition(s, run_id, to, error=error, expected_from=expected_from, worker=worker)

    def request_stop(self, run_id: int) -> Run:
        """Ask a run to stop: sets the stop flag; a queued run becomes ``cancelled``, a starting or
        running one ``stopping``; a run already final or stopping is left as it is."""
        with write_session(self.engine) as s:
            return ops_runs.request_stop(s, run_id)

    def note_storing(self, run_id: int) -> bool:
        """Record (on the server's clock) that the run's job just stored a file of its artifacts: a
        ``stopping`` run's grace period counts from its stop request or this, whichever is later
        (:class:`jobs.maintenance.StopEnforcer`). False when the run is already settled."""
        with write_session(self.engine) as s:
            return ops_runs.note_storing(s, run_id)

    def stop_requested(self, run_id: int) -> bool:
        """True once someone asked this run to stop."""
        with read_session(self.engine) as s:
            return ops_runs.stop_requested(s, run_id)

    def heartbeat(self, run_id: int, worker: str | None = None, *, live_only: bool = False) -> bool:
        """Refresh the run's heartbeat (and the worker's ``last_seen`` when ``worker`` names a known
        worker); returns the stop flag so a sink needs one round trip. With ``live_only`` (a job's
        beat) a run that is not starting, running or stopping is left as it is and
        :class:`RunSettledError` raised."""
        with write_session(self.engine) as s:
            return ops_runs.heartbeat(s, run_id, worker=worker, live_only=live_only)

    def update_run(self, run_id: int, *, celery_task_id: str | None = None, worker: str | None = None,
                   log_path: str | None = None, output_dir: str | None = None,
                   total_steps: int | None = None, device: str | None = None) -> Run:
        """Record execution details (None leaves a field as it is)."""
        with write_session(self.engine) as s:
            return ops_runs.update_run(s, run_id, celery_task_id=celery_task_id, worker=worker,
                                       log_path=log_path, output_dir=output_dir, total_steps=total_steps,
                                       device=device)

    def set_run_notes(self, run_id: int, *, tags: Iterable[str] | None = None, notes: str | None = None) -> Run:
        """Replace the run's tags and/or notes (None leaves one as it is)."""
        with write_session(self.engine) as s:
            return ops_runs.set_run_notes(s, run_id, tags=tags, notes=notes)

    def delete_run(self, run_id: int, *, force: bool = False) -> None:
        """Delete a run with its metrics, episodes and checkpoint rows (files on disk stay). Refuses
        (:class:`RunActiveError`) while the run is active, unless ``force``."""
        with write_session(self.engine) as s:
            ops_runs.delete_run(s, run_id, force=force)

    def run_tags(self) -> list[str]:
        """Every tag used by some run, sorted."""
        with read_session(self.engine) as s:
            return ops_runs.run_tags(s)

    def run_counts_by_status(self, experiment_id: int | None = None) -> dict[str, int]:
        """How many runs are in each state (every state is a key, zero included)."""
        with read_session(self.engine) as s:
            return ops_runs.run_counts_by_status(s, experiment_id=experiment_id)

    def run_rate(self, run_id: int) -> RunRate:
        """Step rate and ETA inputs of a run, from its first and last logged steps."""
        with read_session(self.engine) as s:
            return ops_runs.run_rate(s, run_id)

    def server_now(self) -> datetime:
        """The database server's current time (timezone-aware UTC): the clock every liveness time is
        stamped with (:mod:`db.clock`), so compare them with this, never with this process's clock."""
        with read_session(self.engine) as s:
            return server_now(s)

    def reap_lost(self, timeout_s: float, now: datetime | None = None, *, lock_wait_s: float | None = None,
                  spare: Iterable[int] = ()) -> list[int]:
        """Settle runs whose worker stopped sending heartbeats for ``timeout_s`` seconds: a
        ``stopping`` run that was asked to stop becomes ``stopped``, any other starting/running/
        stopping run ``lost``. Returns the ids it changed. ``now`` defaults to the database server's time.
        ``lock_wait_s`` bounds the wait for the write lock (a reader's look must not hang behind a hung
        writer; it raises the database's "locked" error instead, and the next look tries again).
        Runs in ``spare`` are left alone (their job is known to be alive by other means)."""
        with write_session(self.engine, lock_wait_s=lock_wait_s) as s:
            return ops_runs.reap_lost(s, timeout_s=timeout_s, now=now, spare=spare)

    def lineage(self, run_id: int) -> Lineage:
        """The run's whole history, oldest attempt first: the runs it was resumed from, itself, and the
        newest resume of each attempt after it; with the steps each attempt owns in the joined view
        (an attempt owns its steps from its first logged step on: the later attempt wins)."""
        with read_session(self.engine) as s:
            return ops_lineage.lineage(s, run_id)

    def joined_series(self, history: Lineage, key: str, x: str = "step", max_points: int = 1000,
                      x_min: float | None = None, x_max: float | None = None) -> JoinedSeries:
        """A metric along a run's whole history (:meth:`lineage`): each attempt's own steps, joined
        into one series (each step once), with where each later attempt begins on the x axis. Each
        attempt is downsampled like :meth:`series`, sharing ``max_points`` by the steps it owns."""
        with read_session(self.engine) as s:
            return ops_lineage.joined_series(s, history, key, x=x, max_points=max_points, x_min=x_min,
                                             x_max=x_max)

    def lineage_episode_steps(self, history: Lineage, split: str | None = None) -> list[tuple[int, int]]:
        """``(step, run_id)`` of the steps with stored episodes along a run's history, ascending, each
        step from the attempt that owns it."""
        with read_session(self.engine) as s:
            return ops_lineage.episode_steps(s, history, split=split)

    # ------------------------------------------------------------------------------ metrics

    def log_step(self, run_id: int, step: int, env_step: int, metrics: Mapping[str, float],
                 episodes: Sequence[Episode] = (), wall_time: float | None = None, *, live_only: bool = False,
                 again: bool = False) -> bool:
        """Write one training step in ONE transaction: its metrics and episodes with their turns
        (batch inserts), the run's progress and its heartbeat. Returns the stop flag.
        ``episodes`` are :class:`transcripts.Episode` records (what the engine's sink reports).

        With ``live_only`` (what a job writes) only a starting, running or stopping run takes the step,
        checked in the same UPDATE: for any other the transaction writes nothing and
        :class:`RunSettledError` is raised. ``again`` marks a retry after an error: a step the run already holds (its commit went
        through but the answer was lost) is not written twice."""
        with write_session(self.engine) as s:
            return ops_metrics.log_step(s, run_id, step=step, env_step=env_step, metrics=metrics,
                                        episodes=episodes, wall_time=wall_time, live_only=live_only,
                                        again=again)

    def log_metrics(self, run_id: int, step: int, env_step: int | None, metrics: Mapping[str, float],
                    wall_time: float | None = None) -> None:
        """Write metric values outside a training step (evaluation); progress is left as it is."""
        with write_session(self.engine) as s:
            ops_metrics.log_metrics(s, run_id, step=step, env_step=env_step, metrics=metrics,
                                    wall_time=wall_time)

    def import_metrics(self, run_id: int, points: Iterable[MetricPoint]) -> int:
        """Bulk-insert ready-made points (e.g. from an exported file) in one transaction; progress is
        left as it is. Returns how many were written."""
        with write_session(self.engine) as s:
            return ops_metrics.import_metrics(s, run_id, points)

    def log_episodes(self, run_id: int, step: int, episodes: Sequence[Episode]) -> None:
        """Write episodes outside a training step (evaluation transcripts)."""
        with write_session(self.engine) as s:
            ops_transcripts.insert_episodes(s, run_id, step=step, episodes=episodes)

    def metric_keys(self, run_id: int) -> list[str]:
        """The metric keys a run has logged, sorted."""
        with read_session(self.engine) as s:
            return ops_metrics.metric_keys(s, run_id)

    def series(self, run_id: int, key: str, x: str = "step", max_points: int = 1000,
               x_min: float | None = None, x_max: float | None = None, *, step_min: int | None = None,
               step_max: int | None = None) -> Series:
        """A metric along ``x`` (``"step"``, ``"env_step"`` or ``"wall_time"``), at most ``max_points``
        points: when there are more, the x range is cut into buckets and each bucket's minimum and
        maximum are kept, plus the first and last point, so spikes survive. Computed in the database:
        wide step ranges from the rollup table (:mod:`db.rollups`), narrower ones from the points.
        ``step_min`` / ``step_max`` keep only those steps, whatever the x axis."""
        with read_session(self.engine) as s:
            return ops_metrics.series(s, run_id, key, x=x, max_points=max_points, x_min=x_min, x_max=x_max,
                                      step_min=step_min, step_max=step_max)

    def latest_metrics(self, run_id: int, keys: Iterable[str] | None = None) -> dict[str, MetricPoint]:
        """The last-logged point (highest step) of each key (all keys when ``keys`` is None)."""
        with read_session(self.engine) as s:
            return ops_metrics.latest_metrics(s, run_id, keys=keys)

    def iter_metrics(self, run_id: int, keys: Iterable[str] | None = None, *,
                     batch_size: int = 10_000) -> Iterator[MetricPoint]:
        """Every stored point of a run ordered by key and step, read in batches (for exports)."""
        yield from ops_metrics.iter_metrics(self.engine, run_id, keys=keys, batch_size=batch_size)

    def stream_metrics_csv(self, run_id: int, keys: Iterable[str] | None = None) -> Iterator[str]:
        """All points as CSV text (header ``key,step,env_step,value,wall_time``) in chunks, read in
        batches (for downloads of large runs)."""
        return ops_metrics.iter_csv(self.iter_metrics(run_id, keys))

    def stream_metrics_jsonl(self, run_id: int, keys: Iterable[str] | None = None) -> Iterator[str]:
        """All points as JSON lines (one object per point), read in batches."""
        return ops_metrics.iter_jsonl(self.iter_metrics(run_id, keys))

    # -------------------------------------------------------------------------- transcripts

    def episodes(self, run_id: int, step: int | None = None, split: str | None = None,
                 min_reward: float | None = None, max_reward: float | None = None,
                 text: str | None = None, limit: int = 50, *, offset: int = 0) -> list[EpisodeView]:
        """Stored episodes with their turns, newest step first then by sample index. ``text`` keeps
        episodes where some prompt or completion contains it (case-insensitive); rewards filter on
        the episode's total reward."""
        with read_session(self.engine) as s:
            return ops_transcripts.episodes(s, run_id, step=step, split=split, min_reward=min_reward,
                                            max_reward=max_reward, text=text, limit=limit, offset=offset)

    def episode_steps(self, run_id: int, split: str | None = None) -> list[int]:
        """The steps that have stored episodes, ascending."""
        with read_session(self.engine) as s:
            return ops_transcripts.episode_steps(s, run_id, split=split)

    def export_episodes_jsonl(self, run_id: int) -> str:
        """Every episode with its turns as JSON lines (one episode per line)."""
        with read_session(self.engine) as s:
            return ops_transcripts.export_jsonl(s, run_id)

    def stream_episodes_jsonl(self, run_id: int, *, batch_size: int = 200) -> Iterator[str]:
        """The same JSON lines in chunks of ``batch_size`` episodes, each read in its own short session
        (for downloads: the whole export is never in memory, no connection waits on a slow client)."""
        last_id = -1
        while True:
            with read_session(self.engine) as s:
                text, last_id = ops_transcripts.jsonl_batch(s, run_id, after_id=last_id, batch_size=batch_size)
            if not text:
                return
            yield text

    # -------------------------------------------------------------------------- checkpoints

    def add_checkpoint(self, run_id: int, step: int, path: str) -> Checkpoint:
        """Record a checkpoint written at ``step`` into folder/file ``path``."""
        with write_session(self.engine) as s:
            return ops_runs.add_checkpoint(s, run_id, step=step, path=path)

    def set_checkpoint_artifact(self, run_id: int, checkpoint_id: int, url: str) -> bool:
        """Record ``url``, the artifact store copy of checkpoint ``checkpoint_id`` of ``run_id``, once its
        upload completed and was checked; False when the row is gone (the checkpoint was pruned)."""
        with write_session(self.engine) as s:
            return ops_runs.set_checkpoint_artifact(s, run_id, checkpoint_id, url)

    def list_checkpoints(self, run_id: int) -> list[Checkpoint]:
        """A run's checkpoints by ascending step."""
        with read_session(self.engine) as s:
            return ops_runs.list_checkpoints(s, run_id)

    def latest_checkpoint(self, run_id: int) -> Checkpoint | None:
        """The checkpoint with the highest step (latest recorded on ties), or None."""
        with read_session(self.engine) as s:
            return ops_runs.latest_checkpoint(s, run_id)

    def delete_checkpoints(self, run_id: int, checkpoint_ids: Iterable[int]) -> int:
        """Forget checkpoint rows of ``run_id`` (e.g. folders pruned from disk); returns how many went."""
        with write_session(self.engine) as s:
            return ops_runs.delete_checkpoints(s, run_id, checkpoint_ids)

    # ------------------------------------------------------------------------------ workers

    def upsert_worker(self, name: str, *, host: str, devices: Iterable[str] = (), queues: Iterable[str] = (),
                      pid: int | None = None, current_run_id: int | None = None) -> Worker:
        """Create or refresh a worker row: marks it online and seen now."""
        with write_session(self.engine) as s:
            return ops_workers.upsert_worker(s, name=name, host=host, devices=devices, queues=queues, pid=pid,
                                             current_run_id=current_run_id)

    def set_worker_run(self, name: str, run_id: int | None) -> None:
        """Record which run the worker is executing (None when idle) and that it was seen now."""
        with write_session(self.engine) as s:
            ops_workers.set_worker_run(s, name, run_id)

    def list_workers(self, *, online_only: bool = False) -> list[Worker]:
        """Known workers by name."""
        with read_session(self.engine) as s:
            return ops_workers.list_workers(s, online_only=online_only)

    def mark_worker_offline(self, name: str) -> None:
        """Mark a worker offline (it shut down) and clear its current run."""
        with write_session(self.engine) as s:
            ops_workers.mark_worker_offline(s, name)

    def mark_stale_workers_offline(self, timeout_s: float, now: datetime | None = None, *,
                                   lock_wait_s: float | None = None) -> list[str]:
        """Mark online workers not seen for ``timeout_s`` seconds offline; returns their names.
        ``lock_wait_s`` bounds the wait for the write lock (see :meth:`reap_lost`)."""
        with write_session(self.engine, lock_wait_s=lock_wait_s) as s:
            return ops_workers.mark_stale_workers_offline(s, timeout_s=timeout_s, now=now)

    # ----------------------------------------------------------------------------- database

    def database_id(self) -> str:
        """This database's random id (given when its schema was created): what a data directory
        records to know which database owns it."""
        with read_session(self.engine) as s:
            found = ops_meta.read_database_id(s)
        if found:
            return found
        with write_session(self.engine) as s:
            return ops_meta.database_id(s)
