"""Queue an evaluation of a run on the workers: what the dashboard's Evaluate and ``cooplab eval RUN
--queue`` call.

:func:`queue_evaluation` checks the request (a known run that has checkpoints, a checkpoint it has,
sane options, a size within the operator's resource budget ``COOPLAB_MAX_*`` as a run's is, and room
under ``COOPLAB_MAX_QUEUED_EVALUATIONS_PER_RUN`` and ``COOPLAB_MAX_QUEUED_EVALUATIONS``: the requests
of the run, and of all runs, queued or running), stores it as a ``queued`` evaluation request
(:mod:`db.eval_request_store`) and sends
the evaluation task (``jobs.run_evaluation``, by name) to the run's own queue, so the run's device
evaluates it after whatever it is running. A worker then runs :func:`jobs.eval_job.execute_evaluation`:
the request becomes ``running``, then ``done`` with the evaluation records it stored, or ``failed``
with one line saying why. A broker that does not take the message fails the request at once (and
raises :class:`jobs.client.BrokerUnavailable`).

Importing this module never imports torch or the task module.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from db.errors import NotFoundError
from db.eval_request_store import EvalRequestLimitError, EvalRequestStore
from db.evaluation_records import REQUEST_FAILED, REQUEST_QUEUED, EvalRequest
from db.store import Store
from jobs.celery_app import device_queue, get_sender_app
from jobs.datadir import redact_url
from jobs.faults import first_line
from jobs.settings import Settings, get_settings

log = logging.getLogger(__name__)

EVAL_TASK_NAME = "jobs.run_evaluation"
SPLITS = ("eval", "train")
MAX_SAMPLES = 1024
"""The most joint answers per item one queued evaluation may ask for."""


class EvalRequestError(ValueError):
    """An evaluation that cannot be queued as asked; the message names the input and the fix."""


@dataclass(frozen=True)
class EvalOptions:
    """What to evaluate besides the checkpoint (``cooplab eval``'s options): ``items`` None for the
    whole split, ``samples`` None for the run config's ``eval_samples_per_item``, ``seed`` None for the
    run config's seed; ``team_analysis`` also evaluates the team with agents reset to their base
    models, for ``metric``; ``baselines`` also evaluates the run's base models under those test-time
    protocols (:mod:`engine.schema.eval_baselines`) on the same items with the same seed."""

    split: str = "eval"
    items: int | None = None
    samples: int | None = None
    greedy: bool = False
    seed: int | None = None
    team_analysis: bool = False
    metric: str = "eval/reward_mean"
    baselines: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"split": self.split, "items": self.items, "samples": self.samples, "greedy": self.greedy,
                "seed": self.seed, "team_analysis": self.team_analysis, "metric": self.metric,
                "baselines": list(self.baselines)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EvalOptions:
        values = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        if isinstance(values.get("baselines"), list):  # stored as a JSON list (a request before them has none)
            values["baselines"] = tuple(values["baselines"])
        return cls(**values)


def _whole(value: Any, name: str, lowest: int, highest: int | None = None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise EvalRequestError(f"{name} must be a whole number, got {value!r}")
    if value < lowest or (highest is not None and value > highest):
        bound = f"from {lowest} to {highest}" if highest is not None else f"at least {lowest}"
        raise EvalRequestError(f"{name} {value}: give {bound}" + (" joint answer(s) per item" if name == "--samples"
                                                                   else ""))
    return value


def check_options(options: EvalOptions) -> EvalOptions:
    """``options`` if every value is usable, else :class:`EvalRequestError` naming the first bad one."""
    if options.split not in SPLITS:
        raise EvalRequestError(f"--split {options.split!r}: choose one of {', '.join(SPLITS)}")
    _whole(options.samples, "--samples", 1, MAX_SAMPLES)
    _whole(options.items, "--items", 1)
    _whole(options.seed, "--seed", 0)
    if not isinstance(options.metric, str) or not options.metric.startswith("eval/"):
        raise EvalRequestError(f"--metric {options.metric!r}: the team analysis' metric is an eval/ metric "
                               "(e.g. eval/reward_mean)")
    _check_baseline_names(options.baselines)
    return options


def _check_baseline_names(baselines: Any) -> None:
    from engine.schema.eval_baselines import BASELINES

    if not isinstance(baselines, tuple) or not all(isinstance(name, str) for name in baselines):
        raise EvalRequestError(f"--baseline {baselines!r}: give the baselines as a list of names from "
                               f"{', '.join(BASELINES)}")
    for name in baselines:
        if name not in BASELINES:
            raise EvalRequestError(f"--baseline {name!r}: choose from {', '.join(BASELINES)}")
        if baselines.count(name) > 1:
            raise EvalRequestError(f"--baseline {name} is given {baselines.count(name)} times; name each baseline once")


def baseline_problems(run_id: int, run_config: dict[str, Any], baselines: tuple[str, ...],
                      settings: Settings) -> list[str]:
    """Why run ``run_id`` (stored config ``run_config``) cannot be evaluated under each of ``baselines``
    (:func:`engine.schema.eval_baselines.unavailable_reason`): one line per baseline, naming the fix."""
    if not baselines:
        return []
    from engine.schema.eval_baselines import unavailable_reason
    from engine.schema.task_registry import get_task_info
    from engine.schema.task_table import TaskError
    from jobs.settings import operator_permissions

    task = str((run_config.get("task") or {}).get("name") or "")
    try:
        sizes: tuple[int, ...] | None = get_task_info(task, operator_permissions(settings).task_modules).team_sizes
    except TaskError as exc:
        return [f"run {run_id}'s task does not load here: {first_line(str(exc))}"]
    problems = []
    for name in baselines:
        reason = unavailable_reason(name, agents=len(run_config.get("agents") or []), task=task, team_sizes=sizes,
                                    system=run_config.get("system") is not None)
        if reason is not None:
            problems.append(f"--baseline {name} for run {run_id}: {reason}; leave {name} out of the baselines")
    return problems


def budget_problems(run_id: int, run_config: dict[str, Any], options: EvalOptions, settings: Settings) -> list[str]:
    """The resource budget (``COOPLAB_MAX_*``, :func:`engine.schema.budget.evaluation_problems`) of
    evaluating run ``run_id``, whose stored config is ``run_config``, as ``options`` ask: one
    ``field: message`` line per limit exceeded."""
    from engine.schema.budget import evaluation_problems
    from engine.schema.run_config import ConfigError, parse_run_config
    from jobs.preflight import run_budget
    from jobs.settings import operator_permissions

    modules = operator_permissions(settings).task_modules  # the allowlist the stored config is read under
    try:
        config = parse_run_config(dict(run_config), task_modules=modules)
    except ConfigError as exc:
        return [f"run {run_id}'s config does not validate here: {first_line(str(exc))}"]
    size = {"items": options.items, "samples": options.samples, "greedy": options.greedy}
    problems = [f"{where}: {message}" for where, message in evaluation_problems(config, run_budget(settings), **size)]
    if not problems and "discussion" in options.baselines and config.trainer.num_turns < 2:
        # one round of discussion samples every agent twice: sized as a two-turn evaluation
        two = config.model_copy(update={"trainer": config.trainer.model_copy(update={"num_turns": 2})})
        problems = [f"{where}: {message} (--baseline discussion samples two rounds; or leave it out)"
                    for where, message in evaluation_problems(two, run_budget(settings), **size)]
    return problems


def check_budget(run_id: int, run_config: dict[str, Any], options: EvalOptions, settings: Settings) -> None:
    """:class:`EvalRequestError` naming each limit of :func:`budget_problems` the evaluation exceeds."""
    problems = budget_problems(run_id, run_config, options, settings)
    if problems:
        raise EvalRequestError("\n".join(problems))


def _limit_message(exc: EvalRequestLimitError) -> str:
    if exc.run_id is not None:
        return (f"run {exc.run_id} already has {exc.active} evaluations queued or running, the limit of {exc.limit} "
                "per run; wait until one ends, or have the operator raise COOPLAB_MAX_QUEUED_EVALUATIONS_PER_RUN")
    return (f"{exc.active} evaluations of all runs are queued or running, the limit of {exc.limit}; wait until one "
            "ends, or have the operator raise COOPLAB_MAX_QUEUED_EVALUATIONS")


def check_checkpoint(store: Store, run_id: int, checkpoint: str | int) -> str:
    """The checkpoint choice as stored (``last``, ``best`` or a step) when run ``run_id`` can be
    evaluated at it, else :class:`EvalRequestError` naming the run or the checkpoint."""
    try:
        run = store.get_run(run_id)
    except NotFoundError:
        raise EvalRequestError(f"no run {run_id} in the database; `cooplab runs` lists the runs") from None
    which = str(checkpoint).strip()
    if which not in ("last", "best") and not which.isdigit():
        raise EvalRequestError(f"--checkpoint {which!r}: give 'last', 'best' or a step number")
    if run.config.get("system") is not None:
        raise EvalRequestError(f"run {run_id} trains a system of several trainers; evaluate each trainer's "
                               "config with `cooplab eval --run-config`")
    steps = sorted({c.step for c in store.list_checkpoints(run_id)})
    if which == "best":
        trainer = run.config.get("trainer") or {}
        if not trainer.get("best_checkpoint_metric"):
            raise EvalRequestError(f"run {run_id} keeps no best checkpoint (its config has no "
                                   "best_checkpoint_metric); choose last or a step")
        return which
    if not steps:
        raise EvalRequestError(f"run {run_id} has no checkpoints yet (it is {run.status}); evaluate it once it "
                               "has saved one (trainer.checkpoint_interval)")
    if which.isdigit() and int(which) not in steps:
        raise EvalRequestError(f"--checkpoint {which}: run {run_id} has no checkpoint at that step; it has steps "
                               f"{', '.join(map(str, steps))}")
    return which


def queue_evaluation(run_id: int, *, checkpoint: str | int = "last", options: EvalOptions | None = None,
                     settings: Settings | None = None, store: Store | None = None) -> EvalRequest:
    """Check, store and send an evaluation of run ``run_id`` at ``checkpoint`` (see the module
    docstring); returns the ``queued`` request. Raises :class:`EvalRequestError` for a bad request, one
    over the budget or over the count of requests queued or running (nothing stored), and :class:`jobs.client.BrokerUnavailable` when the message cannot be sent (the
    request is then ``failed`` with that reason)."""
    from jobs.client import SEND_RETRY_POLICY, BrokerUnavailable, get_store

    settings = settings or get_settings()
    store = store or get_store(settings)
    options = check_options(options or EvalOptions())
    which = check_checkpoint(store, run_id, checkpoint)
    run = store.get_run(run_id)
    check_budget(run_id, dict(run.config), options, settings)
    problems = baseline_problems(run_id, dict(run.config), options.baselines, settings)
    if problems:
        raise EvalRequestError("\n".join(problems))
    requests = EvalRequestStore(store)
    try:
        request = requests.create(run_id, checkpoint=which, options=options.to_json(), queue=run.queue,
                                  max_active_for_run=settings.max_queued_evaluations_per_run,
                                  max_active=settings.max_queued_evaluations)
    except EvalRequestLimitError as exc:
        raise EvalRequestError(_limit_message(exc)) from None
    task_id = str(uuid.uuid4())
    requests.set_task_id(request.id, task_id)
    try:
        get_sender_app(settings).send_task(EVAL_TASK_NAME, args=[request.id], task_id=task_id,
                                           queue=device_queue(run.queue), ignore_result=True, retry=True,
                                           retry_policy=SEND_RETRY_POLICY)
    except Exception as exc:
        error = (f"could not send evaluation request {request.id} to the broker "
                 f"{redact_url(settings.resolved_broker_url)} (queue {run.queue!r}): "
                 f"{first_line(str(exc)).rstrip('.') or type(exc).__name__}. Is the broker running?")
        requests.finish(request.id, REQUEST_FAILED, error=error, expected_from=(REQUEST_QUEUED,))
        raise BrokerUnavailable(error) from exc
    log.info("evaluation request %s of run %s queued on %s", request.id, run_id, run.queue)
    return requests.get(request.id)
