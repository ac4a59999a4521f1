"""ORM rows (and Core rows of :mod:`db.tables`) → frozen records (the only place that knows both)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from db.records import Checkpoint, EpisodeView, Experiment, Run, Worker
from db.states import QUEUED
from engine.transcripts import TurnRecord

if TYPE_CHECKING:
    from types import SimpleNamespace

    from sqlalchemy import Row

    from db.models import CheckpointRow, EpisodeRow, ExperimentRow, RunRow, TurnRow, WorkerRow


def check_experiment_name(name: str) -> str:
    """The name stripped; refuses an empty one and one over 200 characters (``ValueError``)."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError("an experiment needs a non-empty name")
    name = name.strip()
    if len(name) > 200:
        raise ValueError(f"experiment name is {len(name)} characters long; keep it within 200")
    return name


def clean_tags(tags: Iterable[str] | None) -> list[str]:
    """Tags stripped, without empties or duplicates, in first-seen order; a lone string is refused
    (it would otherwise become one tag per character)."""
    if tags is None:
        return []
    if isinstance(tags, str):
        raise TypeError(f"tags must be a list of strings, not the string {tags!r}; use [{tags!r}]")
    seen: dict[str, None] = {}
    for tag in tags:
        if not isinstance(tag, str):
            raise TypeError(f"tag {tag!r} is not a string")
        tag = tag.strip()
        if tag:
            seen.setdefault(tag, None)
    return list(seen)


def experiment(row: ExperimentRow | Row[Any] | SimpleNamespace) -> Experiment:
    return Experiment(id=row.id, name=row.name, description=row.description or "", tags=tuple(row.tags or ()),
                      config=copy.deepcopy(row.config or {}), created_at=row.created_at, updated_at=row.updated_at)


def run(row: RunRow | Row[Any] | SimpleNamespace) -> Run:
    return Run(
        id=row.id, experiment_id=row.experiment_id, attempt=row.attempt, status=row.status,
        config=copy.deepcopy(row.config or {}), queue=row.queue, device=row.device, celery_task_id=row.celery_task_id,
        worker=row.worker, created_at=row.created_at, started_at=row.started_at, finished_at=row.finished_at,
        heartbeat_at=row.heartbeat_at, step=row.step or 0, env_step=row.env_step or 0,
        total_steps=row.total_steps, error=row.error, resumed_from=row.resumed_from,
        stop_requested=bool(row.stop_requested),
        stop_requested_at=row.stop_requested_at, tags=tuple(row.tags or ()), notes=row.notes or "",
        log_path=row.log_path, output_dir=row.output_dir, storing_at=row.storing_at,
        retried_as=row.retried_as, name=row.name,
    )


def turn(row: TurnRow) -> TurnRecord:
    return TurnRecord(turn=row.turn, agent_index=row.agent_index, agent_name=row.agent_name, prompt=row.prompt,
                      completion=row.completion, reward=row.reward, ret=row.ret, advantage=row.advantage,
                      credit=row.credit)


def episode(row: EpisodeRow, turns: Sequence[TurnRow]) -> EpisodeView:
    return EpisodeView(id=row.id, run_id=row.run_id, step=row.step, split=row.split,
                       sample_index=row.sample_index, item_index=row.item_index, reward=row.reward,
                       ret=row.ret, turns=tuple(turn(t) for t in turns))


def checkpoint(row: CheckpointRow) -> Checkpoint:
    return Checkpoint(id=row.id, run_id=row.run_id, step=row.step, path=row.path, created_at=row.created_at,
                      artifact_url=row.artifact_url)


def worker(row: WorkerRow) -> Worker:
    return Worker(name=row.name, host=row.host, devices=tuple(row.devices or ()), queues=tuple(row.queues or ()),
                  pid=row.pid, online=bool(row.online), last_seen=row.last_seen,
                  current_run_id=row.current_run_id, clock_skew_s=row.clock_skew_s)


def json_config(config: Any) -> dict[str, Any]:
    """A deep, JSON-clean copy of a config mapping (later edits of the caller's dict do not leak into
    the stored snapshot); refuses non-mappings and values JSON cannot hold, naming them."""
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping (a dict from the run-config schema), not {type(config).__name__}")
    try:
        return json.loads(json.dumps(dict(config), allow_nan=False))
    except (TypeError, ValueError) as err:
        raise ValueError(f"config is not JSON-serialisable ({err}); dump it with engine.schema.run_config.dump_run_config "
                         f"or keep to dicts, lists, strings, finite numbers, booleans and None") from err


def new_run_values(experiment_id: int, config: Mapping[str, Any], queue: str, total_steps: int | None, *,
                   resumed: Any | None, device: str | None, tags: Iterable[str], notes: str,
                   created_at: Any) -> dict[str, Any]:
    """The row of a new ``queued`` run, checked: a queue name, ``total_steps`` >= 0, and ``resumed`` (the
    row of the run it resumes, or None) of the same experiment; its ``attempt`` is one more than that
    run's, else 1. Both run writers (:mod:`db.run_writes`, :mod:`db.sqlite_writes`) store this."""
    if not isinstance(queue, str) or not queue.strip():
        raise ValueError("a run needs a queue name (the device it runs on, e.g. 'cpu' or 'cuda:0')")
    if total_steps is not None and total_steps < 0:
        raise ValueError(f"total_steps must be >= 0, got {total_steps}")
    attempt = 1
    if resumed is not None:
        if resumed.experiment_id != experiment_id:
            raise ValueError(f"run {resumed.id} belongs to experiment {resumed.experiment_id}, not "
                             f"{experiment_id}; resume it within its own experiment")
        attempt = resumed.attempt + 1
    return {"experiment_id": experiment_id, "attempt": attempt, "status": QUEUED, "config": json_config(config),
            "queue": queue.strip(), "device": device, "total_steps": total_steps,
            "resumed_from": None if resumed is None else resumed.id, "stop_requested": False,
            "tags": clean_tags(tags), "notes": notes or "", "created_at": created_at, "step": 0, "env_step": 0}


def run_changes(row: Any, **given: Any) -> dict[str, Any]:
    """The execution details of ``given`` (``celery_task_id``, ``worker``, ``log_path``, ``output_dir``,
    ``total_steps``, ``device``) that are set and differ from ``row``'s: None leaves a field as it is, and an
    empty answer means no UPDATE, as the ORM's flush; refuses a negative ``total_steps``."""
    total_steps = given.get("total_steps")
    if total_steps is not None and total_steps < 0:
        raise ValueError(f"total_steps must be >= 0, got {total_steps}")
    return {name: value for name, value in given.items() if value is not None and value != getattr(row, name)}
