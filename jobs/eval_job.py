"""The evaluation job: a worker evaluates a run at a checkpoint and stores the evaluation records.

The Celery task ``jobs.run_evaluation`` (sent by :func:`jobs.eval_queue.queue_evaluation` to the run's
queue, registered in the workers through :mod:`jobs.tasks`) hands the request id to
:func:`execute_evaluation`, which:

1. claims the request with a compare-and-set ``queued → running`` (a redelivered message, or a
   request settled meanwhile, is left alone);
2. refreshes the request's heartbeat from a thread while it works, so a reader can tell a job that
   died (:meth:`db.eval_request_store.EvalRequestStore.reap_stale`); the heartbeat is stamped with the
   database server's clock, not this worker's (:mod:`db.clock`);
3. checks the request's options and size against this worker's resource budget (``COOPLAB_MAX_*``,
   :func:`jobs.eval_queue.check_budget`, as the queue did), then evaluates with the engine's own
   code, the same as ``cooplab eval``: the run folder's ``config.yaml`` on this worker's device,
   the chosen checkpoint, :func:`engine.evaluation.evaluate.evaluate_run`
   or, for a team analysis, :func:`engine.evaluation.team_analysis.analyze_team`; then each test-time
   baseline the request names (``evaluate_run(..., baseline=name)``: the run's base models under that
   protocol, on the same items with the same seed). A run trained on
   another machine is evaluated from the shared artifact store: its stored config snapshot and the
   checkpoint downloaded into this machine's cache (:mod:`jobs.artifacts.eval_source`);
4. stores every record in one transaction (:meth:`db.evaluation_store.EvaluationStore.add_evaluations`)
   and ends the request ``done`` with their ids; anything that goes wrong ends it ``failed`` with one
   line that names the problem, and nothing half-written.

When the job process dies under the task (killed, out of memory), the worker parent sees Celery's
``WorkerLostError`` and fails the request at once (:func:`_eval_process_lost`). torch and the engine
are imported inside the job only.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from celery import shared_task
from celery.exceptions import WorkerLostError
from celery.signals import task_failure

from db.errors import NotFoundError
from db.eval_request_store import EvalRequestStore
from db.evaluation_records import REQUEST_DONE, REQUEST_FAILED, REQUEST_QUEUED, REQUEST_RUNNING
from db.store import Store
from jobs.devices import job_device
from jobs.eval_queue import (
    EVAL_TASK_NAME,
    EvalOptions,
    EvalRequestError,
    baseline_problems,
    check_budget,
    check_options,
)
from jobs.settings import Settings, apply_host_memory_setting, get_settings, operator_permissions

log = logging.getLogger(__name__)


class _Heartbeat:
    """Refresh a running request's heartbeat every ``interval_s`` seconds from a daemon thread."""

    def __init__(self, requests: EvalRequestStore, request_id: int, interval_s: float) -> None:
        self.requests, self.request_id, self.interval_s = requests, request_id, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"eval-request-{request_id}-heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                if not self.requests.heartbeat(self.request_id):
                    return  # settled elsewhere
            except Exception:  # a busy database: try again at the next beat
                log.warning("evaluation request %s: heartbeat failed", self.request_id, exc_info=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _device(queue: str) -> str:
    """The torch device of a job on ``queue`` (a ``cuda:N`` worker sees its GPU as ``cuda:0``)."""
    return job_device(queue)


def _config_and_checkpoint(store: Store, run: Any, which: str, settings: Settings) -> tuple[Any, Path]:
    """The run's config and the folder of checkpoint ``which``: from the run's folder on this machine,
    else from the shared artifact store (:mod:`jobs.artifacts.eval_source`)."""
    from engine.evaluation.evaluate import find_checkpoint
    from engine.schema.run_config import load_run_config, parse_run_config

    modules = operator_permissions(settings).task_modules
    folder = Path(run.output_dir) if run.output_dir else None
    if folder is not None and (folder / "config.yaml").is_file():
        return load_run_config(folder / "config.yaml", task_modules=modules), find_checkpoint(folder, which)
    from jobs.artifacts import open_store
    from jobs.artifacts.eval_source import stored_checkpoint

    artifacts = open_store(settings)
    chosen = stored_checkpoint(store, run, which, None if artifacts.in_data_dir else artifacts,
                               settings.artifacts_cache_dir)
    log.info("run %s's folder is not on this machine: evaluating checkpoint %s from %s", run.id, which, chosen)
    return parse_run_config(dict(run.config), task_modules=modules), chosen


def evaluate_request(store: Store, request: Any, settings: Settings | None = None) -> list[int]:
    """Evaluate what ``request`` asks for and store the records (one transaction); their ids. Raises
    with a message naming the problem when it cannot."""
    from db.evaluation_store import EvaluationStore
    from engine.evaluation.evaluate import evaluate_run
    from engine.permissions.read_paths import ReadArea, reading_within
    from jobs.eval_inputs import analysis_inputs, baseline_inputs, report_inputs

    settings = settings or get_settings()
    run = store.get_run(request.run_id)
    options = check_options(EvalOptions.from_json(dict(request.options)))
    check_budget(run.id, dict(run.config), options, settings)  # this worker's COOPLAB_MAX_*, before loading
    problems = baseline_problems(run.id, dict(run.config), options.baselines, settings)
    if problems:
        raise EvalRequestError("\n".join(problems))
    stored, chosen = _config_and_checkpoint(store, run, request.checkpoint, settings)
    # parsed once; only the device is this worker's
    config = stored.model_copy(update={"trainer": stored.trainer.model_copy(update={"device": _device(run.queue)})})
    common = {"split": options.split, "items": options.items, "samples": options.samples,
              "greedy": options.greedy, "seed": options.seed, "permissions": operator_permissions(settings)}
    with reading_within(ReadArea.of(settings.read_roots)):  # the config's models and dataset: COOPLAB_DATA_ROOTS
        if options.team_analysis:
            from engine.evaluation.team_analysis import analyze_team

            analysis = analyze_team(config, chosen, metric=options.metric, **common)
            inputs = analysis_inputs(run.id, analysis, checkpoint_path=str(chosen))
        else:
            inputs = report_inputs(run.id, evaluate_run(config, checkpoint=chosen, **common))
        for name in options.baselines:  # the base models (no checkpoint) on the same items, with the same seed
            inputs += baseline_inputs(run.id, evaluate_run(config, baseline=name, **common))
    return [e.id for e in EvaluationStore(store).add_evaluations(inputs)]


def _claim_through_outage(requests: EvalRequestStore, request_id: int, worker: str | None, outage_s: float,
                          sleep: Any = time.sleep) -> Any:
    """``requests.claim``, tried again through a database that is briefly unavailable or locked (up to
    ``outage_s`` seconds, the pauses of :func:`jobs.db_sink.retry_delays`): a lock held by another
    writer must not leave the request queued for ever with no one working on it."""
    from jobs.db_sink import retry_delays
    from jobs.faults import transient_database_error

    delays = retry_delays(outage_s)
    for attempt in range(len(delays) + 1):
        try:
            return requests.claim(request_id, worker=worker)
        except Exception as exc:
            if attempt == len(delays) or not transient_database_error(exc):
                raise
            log.warning("evaluation request %s: the database is busy (%s); trying again in %.1f s", request_id,
                        str(exc).splitlines()[0], delays[attempt])
            sleep(delays[attempt])
    raise AssertionError("unreachable")  # pragma: no cover


def execute_evaluation(request_id: int, *, settings: Settings | None = None, store: Store | None = None,
                       worker: str | None = None) -> str:
    """Run evaluation request ``request_id`` to ``done`` or ``failed`` (see the module docstring);
    returns the state it ended in (a request that was not queued: its state, untouched)."""
    settings = settings or get_settings()
    own_store = store is None
    store = store or Store(settings.resolved_database_url)
    requests = EvalRequestStore(store)
    try:
        try:
            request = _claim_through_outage(requests, request_id, worker, settings.db_outage_s)
        except NotFoundError:
            return "missing"
        if request is None:
            try:
                current = requests.get(request_id)
            except NotFoundError:  # the run (and its requests) was deleted before the job began
                log.warning("evaluation request %s does not exist; nothing to do", request_id)
                return "missing"
            log.warning("evaluation request %s is %s, not queued: not evaluating it again", request_id,
                        current.status)
            return current.status
        log.info("evaluation request %s: run %s at checkpoint %s, %s", request_id, request.run_id,
                 request.checkpoint, dict(request.options))
        try:
            with _Heartbeat(requests, request_id, settings.heartbeat_interval_s):
                apply_host_memory_setting(settings)  # the evaluation builds a trainer
                ids = evaluate_request(store, request, settings)
        except Exception as exc:
            log.exception("evaluation request %s failed", request_id)
            reason = str(exc).strip() or type(exc).__name__
            if not _named(exc):
                reason = f"{type(exc).__name__}: {reason}"
            return requests.finish(request_id, REQUEST_FAILED, error=reason).status
        log.info("evaluation request %s done: evaluations %s", request_id, ids)
        return requests.finish(request_id, REQUEST_DONE, evaluation_ids=ids).status
    finally:
        if own_store:
            store.close()


def _named(exc: BaseException) -> bool:
    """Errors whose message already names the problem and the fix (no type name needed)."""
    from engine.evaluation.evaluate import EvalError
    from engine.schema.run_config import ConfigError
    from engine.tasks import TaskError

    return isinstance(exc, (EvalError, ConfigError, TaskError, FileNotFoundError, NotFoundError, EvalRequestError))


@shared_task(name=EVAL_TASK_NAME, bind=True, acks_late=True, ignore_result=True,
             Request="jobs.warm_shutdown:LeavingRequest")
def run_evaluation(self, request_id: int) -> str:  # type: ignore[no-untyped-def]
    """Execute evaluation request ``request_id``; returns the state it ended in. A worker in warm
    shutdown gives the message back unstarted (:mod:`jobs.warm_shutdown`)."""
    from jobs import warm_shutdown

    warm_shutdown.leave_if_requested(f"evaluation request {request_id}")
    return execute_evaluation(int(request_id), worker=self.request.hostname)


@task_failure.connect(weak=False)
def _eval_process_lost(sender: Any = None, exception: BaseException | None = None, args: Any = None,
                       **kwargs: Any) -> None:
    """In the worker parent: the job process died under an evaluation (Celery's ``WorkerLostError``)."""
    if getattr(sender, "name", None) != EVAL_TASK_NAME or not isinstance(exception, WorkerLostError) or not args:
        return
    from jobs.maintenance import job_death_cause

    with Store(get_settings().resolved_database_url) as store:
        EvalRequestStore(store).finish(int(args[0]), REQUEST_FAILED, error=job_death_cause(exception),
                                       expected_from=(REQUEST_QUEUED, REQUEST_RUNNING))
