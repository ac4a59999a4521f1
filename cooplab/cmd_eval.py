"""``cooplab eval``: evaluate a run's team (a checkpoint) or model folders on a task's split.

    cooplab eval RUN [--checkpoint last|best|STEP]          # RUN: a run id (cooplab runs) or a run folder
    cooplab eval --run-config FILE [--models DIR[,DIR...]]
        [--split eval|train] [--items N] [--samples K] [--greedy] [--seed S] [--json] [--transcripts FILE]
    cooplab eval RUN --team-analysis [--metric eval/reward_mean] ...   # each agent's contribution
    cooplab eval (RUN | --run-config FILE) --baseline single,parallel,pipeline,discussion ...   # test-time baselines
    cooplab eval RUN --queue [--wait] [--baseline ...] ...   # on the run's workers (jobs.eval_queue); stored when done

``--baseline`` plays the base models (a run's config's models, untrained, never a checkpoint) under
CoMLRL's test-time protocols, every one on the same items with the same seed and samples, as the
dashboard's Evaluate form does; here it prints them, with ``--queue`` the workers evaluate the team at
the checkpoint and then the baselines, and store them all. Baseline names are checked with the
queue's own words (:func:`jobs.eval_queue.check_options`,
:func:`engine.schema.eval_baselines.unavailable_reason`).

``--run-config`` alone evaluates the config's own models (the step-0 baseline); ``--models`` gives
one model folder per agent (a run's ``model/agent_<i>``). ``--json`` prints one JSON line: metrics,
standard errors, per-item outcomes, checkpoint step, split, seed. A bad input prints one line that
names it and exits with status 2 (:class:`engine.evaluation.evaluate.EvalError`); nothing is written unless
``--transcripts`` is given, and that file only once the evaluation has finished. A run given by its
id in the database gets the evaluation stored as an evaluation record (each variant of a team
analysis as one, sharing an analysis id): :class:`db.evaluation_store.EvaluationStore`.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

EXIT_BAD_INPUT = 2


def _fail(message: str) -> None:
    typer.echo(f"cooplab eval: {message}", err=True)
    raise typer.Exit(EXIT_BAD_INPUT)


def _run_folder(run: str) -> tuple[Path, int | None]:
    """A run folder, or the output folder of the run with that id in the database (and the id)."""
    folder = Path(run)
    if folder.is_dir():
        return folder, None
    if not run.isdigit():
        _fail(f"{run!r} is neither a run folder nor a run id; give an id from `cooplab runs` or a folder")
    from db.errors import NotFoundError

    try:
        record = _store().get_run(int(run))
    except NotFoundError:
        _fail(f"no run {run} in the database; `cooplab runs` lists the runs")
    if not record.output_dir or not Path(record.output_dir).is_dir():
        _fail(f"run {run} has no output folder on this machine ({record.output_dir or 'none recorded'}); "
              "it has not started, or ran on another machine")
    return Path(record.output_dir), int(run)


def _store():
    from db.migrate import upgrade
    from jobs.client import get_store
    from jobs.settings import get_settings

    settings = get_settings()
    upgrade(settings.resolved_database_url)
    return get_store(settings)


def _save(run_id: int, report=None, analysis=None) -> list[int]:
    """Store the evaluation (or each variant of a team analysis) as evaluation records of ``run_id``,
    all in one transaction."""
    from db.evaluation_store import EvaluationStore
    from jobs.eval_inputs import analysis_inputs, report_inputs

    inputs = report_inputs(run_id, report) if report is not None else analysis_inputs(run_id, analysis)
    return [stored.id for stored in EvaluationStore(_store()).add_evaluations(inputs)]


def _queue(run: str, checkpoint: str, options, *, wait: bool, as_json: bool) -> None:
    """``--queue``: send the evaluation to the run's workers; with ``--wait`` follow it to its end."""
    import time

    from db.eval_request_store import EvalRequestStore
    from jobs.client import BrokerUnavailable
    from jobs.eval_queue import EvalRequestError, queue_evaluation

    if not run.isdigit():
        _fail(f"--queue needs a run id from the database (`cooplab runs`), not {run!r}")
    store = _store()
    try:
        request = queue_evaluation(int(run), checkpoint=checkpoint, options=options, store=store)
    except (EvalRequestError, BrokerUnavailable) as exc:
        _fail(" ".join(str(exc).split()))
    if wait:
        requests = EvalRequestStore(store)
        while not request.is_final:
            time.sleep(0.5)
            request = requests.get(request.id)
    if as_json:
        typer.echo(json.dumps({"request": request.id, "run": request.run_id, "status": request.status,
                               "checkpoint": request.checkpoint, "queue": request.queue,
                               "options": dict(request.options), "error": request.error,
                               "evaluation_ids": list(request.evaluation_ids)}, sort_keys=True))
        return
    if request.status == "queued":
        typer.echo(f"queued evaluation request {request.id} of run {request.run_id} (checkpoint {request.checkpoint}) "
                   f"on queue {request.queue}; the run page's Evaluations tab shows its state")
    elif request.status == "done":
        typer.echo(f"evaluation request {request.id} done: stored as evaluation(s) "
                   f"{', '.join(map(str, request.evaluation_ids))} of run {request.run_id}")
    else:
        typer.echo(f"evaluation request {request.id} failed: {request.error}", err=True)
        raise typer.Exit(1)


BASE_MODELS = "base models"
"""What a baseline plays when no model folders are given: the config's models, untrained (the
dashboard's held-out table labels its rows the same)."""


def _summary(report) -> str:
    if report.checkpoint is not None:
        where = f"checkpoint step {report.checkpoint_step}"
    elif report.models:
        where = "models " + ", ".join(report.models)
    else:
        where = BASE_MODELS if report.baseline is not None else "the run config's models"
    lines = [f"{report.config_name}: {where}, split {report.split}, {report.items} items x {report.samples} "
             f"sample(s){' (greedy)' if report.greedy else ''}, seed {report.seed}"]
    for key in sorted(report.metrics):
        se = report.standard_errors.get(key)
        lines.append(f"  {key:<40} {report.metrics[key]:.4f}" + (f" ± {se:.4f}" if se is not None else ""))
    return "\n".join(lines)


def _baseline_names(baseline: str) -> tuple[str, ...]:
    """``--baseline a,b`` as names, checked as the evaluation queue checks them (known, each once)."""
    from engine.schema.eval_baselines import BASELINES
    from jobs.eval_queue import EvalOptions, EvalRequestError, check_options

    names = tuple(part.strip() for part in baseline.split(",") if part.strip())
    if not names:
        _fail(f"--baseline {baseline!r}: name one or more of {', '.join(BASELINES)}, comma-separated")
    try:
        check_options(EvalOptions(baselines=names))
    except EvalRequestError as exc:
        _fail(" ".join(str(exc).split()))
    return names


def _check_playable(names: tuple[str, ...], config, run_id: int | None, permissions) -> None:
    """Refuse (the queue's words) a baseline the config's team and task cannot play."""
    from engine.schema.eval_baselines import unavailable_reason
    from engine.schema.task_registry import get_task_info

    sizes = get_task_info(config.task.name, permissions.task_modules).team_sizes
    which = f" for run {run_id}" if run_id is not None else ""
    for name in names:
        reason = unavailable_reason(name, agents=len(config.agents), task=config.task.name, team_sizes=sizes,
                                    system=config.system is not None)
        if reason is not None:
            _fail(f"--baseline {name}{which}: {reason}; leave {name} out of the baselines")


def _baselines_here(names: tuple[str, ...], config, folders, run_id: int | None, permissions, *, as_json: bool,
                    **size) -> None:
    """Evaluate and print each baseline with the base models (or ``folders``), the same items, seed and
    samples for every one."""
    from engine.evaluation.evaluate import evaluate_run
    from engine.schema.eval_baselines import baseline_title

    _check_playable(names, config, run_id, permissions)
    for name in names:
        report = evaluate_run(config, checkpoint=None, models=folders, permissions=permissions, baseline=name,
                              **size)
        record = {**report.to_json(), "weights": "model folders" if report.models else BASE_MODELS}
        typer.echo(json.dumps(record, sort_keys=True) if as_json
                   else f"baseline {baseline_title(name)}: " + _summary(report))


def register(app: typer.Typer) -> None:
    """Add the ``eval`` command to the CLI."""

    from cooplab.cmd_jobs import one_line_errors

    @app.command("eval")
    @one_line_errors
    def eval_(
        run: str | None = typer.Argument(None, help="A run id (see `cooplab runs`) or a run output folder."),
        run_config: Path | None = typer.Option(None, "--run-config", help="A run config file instead of a run."),
        models: str | None = typer.Option(None, "--models", help="Model folders, one per agent, comma-separated."),
        checkpoint: str | None = typer.Option(None, "--checkpoint", help="A run's checkpoint: last (the default), "
                                              "best or a step number."),
        split: str = typer.Option("eval", "--split", help="eval (held out) or train."),
        items: int | None = typer.Option(None, "--items", help="The first N items of the split (default all)."),
        samples: int | None = typer.Option(None, "--samples", help="Joint answers per item (pass@k up to it)."),
        greedy: bool = typer.Option(False, "--greedy", help="Greedy decoding (one answer per item)."),
        seed: int | None = typer.Option(None, "--seed", help="Sampling seed (default: the run config's)."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON line."),
        transcripts: Path | None = typer.Option(None, "--transcripts", help="Write the evaluated episodes "
                                                                            "here as JSON lines."),
        team_analysis: bool = typer.Option(False, "--team-analysis", help="Also evaluate the team with agents "
                                           "reset to their base models: each agent's contribution."),
        metric: str = typer.Option("eval/reward_mean", "--metric", help="The team analysis' metric."),
        queue: bool = typer.Option(False, "--queue", help="Queue the evaluation on the run's workers instead of "
                                   "evaluating here (a run id); the records are stored when it is done."),
        wait: bool = typer.Option(False, "--wait", help="With --queue: wait until the workers are done."),
        baseline: str | None = typer.Option(None, "--baseline", help="Test-time baselines of the base models "
                                            "(untrained), comma-separated: single (the first agent alone), parallel "
                                            "(naive concatenation), pipeline (sequential), discussion (one round). "
                                            "Here instead of the team's evaluation; with --queue beside it."),
    ) -> None:
        """Evaluate a team on a task's held-out split: team reward, task metrics, pass@k, standard errors."""
        from engine.evaluation.evaluate import EvalError, evaluate_run, find_checkpoint
        from engine.schema.run_config import ConfigError, load_run_config
        from engine.tasks import TaskError
        from jobs.preflight import check_run_config
        from jobs.settings import apply_host_memory_setting, get_settings, operator_permissions

        if (run is None) == (run_config is None):
            _fail("give a run (id or folder) or --run-config FILE, one of the two")
        if run is not None and models:
            _fail("--models goes with --run-config; a run is evaluated at one of its checkpoints")
        if wait and not queue:
            _fail("--wait goes with --queue")
        names = _baseline_names(baseline) if baseline is not None else ()
        if names and not queue:
            if team_analysis:
                _fail("--baseline with --team-analysis: the workers evaluate both; add --queue (with a run id), or "
                      "leave out --team-analysis")
            if transcripts is not None:
                _fail("--transcripts writes the team's episodes; a baseline prints its metrics only: leave out "
                      "--transcripts or --baseline")
            if checkpoint is not None:
                _fail(f"--checkpoint {checkpoint}: a baseline plays the run's base models, not a checkpoint; leave "
                      "out --checkpoint, or add --queue to evaluate the team at it beside the baselines")
        if queue:
            if run is None:
                _fail("--queue evaluates a run in the database on its workers; give a run id")
            if transcripts is not None:
                _fail("--transcripts goes with a local evaluation; a queued one stores its episodes in the database")
            from jobs.eval_queue import EvalOptions

            _queue(run, checkpoint or "last", EvalOptions(split=split, items=items, samples=samples, greedy=greedy,
                                                          seed=seed, team_analysis=team_analysis, metric=metric,
                                                          baselines=names),
                   wait=wait, as_json=as_json)
            return
        settings = get_settings()
        permissions = operator_permissions(settings)
        modules = permissions.task_modules
        apply_host_memory_setting(settings)  # COOPLAB_KEEP_FREED_MEMORY, before a trainer is built
        try:
            run_id = None
            if run is not None:
                folder, run_id = _run_folder(run)
                config = load_run_config(folder / "config.yaml", task_modules=modules)
                chosen = None if names else find_checkpoint(folder, checkpoint or "last")
            else:
                config = check_run_config(load_run_config(run_config, task_modules=modules),
                                          settings=settings)  # parsed once
                chosen = None
            folders = [part.strip() for part in models.split(",") if part.strip()] if models else None
            if team_analysis:
                if chosen is None:
                    _fail("--team-analysis compares a run's checkpoint with its base models; give a run")
                from engine.evaluation.team_analysis import analyze_team

                analysis = analyze_team(config, chosen, metric=metric, split=split, items=items, samples=samples,
                                        greedy=greedy, seed=seed, permissions=permissions)
                record = analysis.to_json()
                if run_id is not None:
                    record["evaluation_ids"] = _save(run_id, analysis=analysis)
                typer.echo(json.dumps(record, sort_keys=True) if as_json else analysis.table() + (
                    f"\nstored as evaluations {', '.join(map(str, record['evaluation_ids']))} of run {run_id}"
                    if run_id is not None else ""))
                return
            if names:
                _baselines_here(names, config, folders, run_id, permissions, as_json=as_json, split=split,
                                items=items, samples=samples, greedy=greedy, seed=seed)
                return
            report = evaluate_run(config, checkpoint=chosen, models=folders, split=split, items=items,
                                  samples=samples, greedy=greedy, seed=seed, permissions=permissions)
        except (EvalError, ConfigError, TaskError) as exc:
            _fail(" ".join(str(exc).split()))
        if transcripts is not None:
            from engine.schema.folders import atomic_text
            from jobs.eval_inputs import episode_dicts

            lines = [json.dumps(episode) for episode in episode_dicts(report.episodes, report.checkpoint_step)]
            atomic_text(transcripts, "\n".join(lines) + "\n", "evaluated episodes")
        record = report.to_json()
        if run_id is not None:
            record["evaluation_id"] = _save(run_id, report=report)[0]
        typer.echo(json.dumps(record, sort_keys=True) if as_json else _summary(report) + (
            f"\nstored as evaluation {record['evaluation_id']} of run {run_id}" if run_id is not None else ""))
