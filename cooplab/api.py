"""A Python API for scripted sweeps: queue runs from configs, wait for them, list them.

    from cooplab import api

    ids = api.submit("configs/run.yaml", experiment="sweep-3")             # a YAML/JSON file
    ids += api.submit([config_a, config_b], experiment="sweep-3", device="cuda:0")  # dicts or RunConfigs
    done = api.wait(ids, timeout=3600)                                     # {run id: Run}, all final
    for run in api.runs(experiment="sweep-3"):
        print(run.id, run.status, run.step)
    api.environment(ids[0])["git"]["commit"]                               # what the run trained with

It talks to the database and the broker of the environment's settings (``COOPLAB_HOME``,
``COOPLAB_DATABASE_URL``, ``COOPLAB_BROKER_URL``; or pass ``settings=``), like ``cooplab submit``: the
workers that train the runs are started separately (``cooplab worker`` or ``cooplab up``). One process
submitting many runs pays the imports once (about 0.1 s per run after that). Importing this module
imports no torch, Celery or alembic; a submit on a SQLite file and the filesystem broker (the defaults),
or on PostgreSQL and Redis, imports no SQLAlchemy, Celery or kombu either.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from db.records import Run
    from engine.schema.run_config import RunConfig
    from jobs.client import QueuedRun
    from jobs.settings import Settings

    ConfigLike = str | Path | Mapping[str, Any] | RunConfig


def _settings(settings: Settings | None) -> Settings:
    from jobs.settings import get_settings

    return settings or get_settings()


def _checked(config: ConfigLike, device: str, settings: Settings) -> RunConfig:
    from engine.schema.run_config import ConfigError, load_run_config
    from jobs.preflight import check_run_config
    from jobs.settings import operator_permissions

    if isinstance(config, (str, Path)):
        try:
            config = load_run_config(config, task_modules=operator_permissions(settings).task_modules)
        except ConfigError as exc:
            raise ConfigError(f"{config}: {exc}") from None
    return check_run_config(config, settings=settings, device=device)


def submit(configs: ConfigLike | Iterable[ConfigLike], *, experiment: str | None = None, device: str = "cpu",
           settings: Settings | None = None) -> list[QueuedRun]:
    """Queue one run per config on ``device``'s queue, in the experiment named ``experiment`` (default:
    each config's name; created when new). A config is a YAML/JSON file's path, a dict or a
    :class:`engine.schema.run_config.RunConfig`.

    Every config is validated and pre-flight checked first: one that is refused raises
    :class:`engine.schema.run_config.ConfigError` (one ``field: message`` line per problem) and nothing is
    stored; an unknown device raises ``ValueError``. The database is migrated first when its schema is
    behind. Returns the new runs' ids, in order (:class:`jobs.client.QueuedRun`, plain ``int``s whose
    ``unsent`` says why the broker has not got a run yet when it is down: the run stays queued and is
    sent when the broker answers)."""
    from jobs.devices import validate_device

    settings = _settings(settings)
    validate_device(device)
    single = isinstance(configs, (str, Path, Mapping)) or not isinstance(configs, Iterable)
    many: list[ConfigLike] = [configs] if single else list(configs)  # type: ignore[list-item,arg-type]
    parsed = [_checked(config, device, settings) for config in many]  # nothing stored unless all pass

    from jobs.client import get_run_writes, submit_to_experiment

    settings.ensure_dirs()
    get_run_writes(settings).ensure_schema()
    return [submit_to_experiment(config, experiment=experiment, device=device, settings=settings, checked=True)[0]
            for config in parsed]


def runs(*, experiment: str | None = None, status: str | Iterable[str] | None = None, ids: Iterable[int] | None = None,
         limit: int = 100, settings: Settings | None = None) -> list[Run]:
    """Runs, newest first (frozen :class:`db.records.Run` rows: ``id``, ``status``, ``step``,
    ``total_steps``, ``error``, ``config``...): of the experiment named ``experiment``, in ``status``
    (one or several states), or exactly the runs ``ids``. Runs whose job is gone (a dead worker) are
    settled first, as ``cooplab runs`` does. Raises ``LookupError`` for an unknown experiment."""
    from jobs.client import get_store
    from jobs.liveness import look_now

    settings = _settings(settings)
    store = get_store(settings)
    look_now(store, settings, min_interval_s=0)
    if ids is not None:
        return sorted((store.get_run(run_id) for run_id in ids), key=lambda run: -run.id)
    experiment_id = None
    if experiment is not None:
        found = store.find_experiment(experiment)
        if found is None:
            raise LookupError(f"no experiment named {experiment!r}")
        experiment_id = found.id
    statuses = [status] if isinstance(status, str) else (list(status) if status is not None else None)
    return store.list_runs(experiment_id, statuses=statuses, limit=limit)


def environment(run_id: int, *, settings: Settings | None = None) -> dict[str, Any] | None:
    """What run ``run_id``'s job recorded when it started (:mod:`jobs.run_environment`): ``git``
    (``commit``, ``branch``, ``dirty``, ``diff`` capped, ``untracked``), ``python``, ``packages``
    (name: version), ``host``, ``platform``, ``command``, ``worker``, ``device``; None before its job
    started. Its resource use over time is in its metrics (``resources/...``)."""
    from jobs.client import get_store

    return get_store(_settings(settings)).run_environment(run_id)


def wait(run_ids: Iterable[int], *, timeout: float | None = None, poll_s: float = 2.0,
         settings: Settings | None = None) -> dict[int, Run]:
    """Wait until every run of ``run_ids`` is final (``succeeded``, ``failed``, ``stopped``, ``lost`` or
    ``cancelled``) and return them by id. Raises ``TimeoutError`` naming the runs still active after
    ``timeout`` seconds (None: no limit); the runs go on."""
    wanted = list(dict.fromkeys(run_ids))
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        found = {run.id: run for run in runs(ids=wanted, settings=settings)}
        active = [run_id for run_id in wanted if found[run_id].is_active]
        if not active:
            return {run_id: found[run_id] for run_id in wanted}
        if deadline is not None and time.monotonic() >= deadline:
            states = ", ".join(f"{run_id} {found[run_id].status}" for run_id in active)
            raise TimeoutError(f"runs still active after {timeout} s: {states}")
        time.sleep(poll_s if deadline is None else max(0.0, min(poll_s, deadline - time.monotonic())))


__all__ = ["environment", "runs", "submit", "wait"]
