"""``cooplab study``: run a study from YAML and watch, stop, resume and export it.

    cooplab study STUDY.yaml [--wait]          validate every generated config, store the study, queue its first runs
    cooplab study status NAME [--csv FILE]     its children and its results per point (mean ± std over seeds)
    cooplab study stop NAME                    stop-all: cancel queued children, stop running ones
    cooplab study resume NAME                  resume-all: requeue children that stop-all ended
    cooplab study list                         every study with its state
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from cooplab.cmd_jobs import _fail, _look, one_line_errors

ACTIONS = ("status", "stop", "resume", "list")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _print_status(settings: Any, ref: str, csv_path: Path | None) -> None:
    from db.study_store import StudyStore
    from jobs.client import get_store
    from jobs.studies import find_study, schedule_study
    from jobs.study_results import point_results, results_csv

    store = get_store(settings)
    study = find_study(ref, settings=settings, store=store)
    schedule_study(study.id, settings=settings, store=store)  # tops up, so watching also drives it
    studies = StudyStore(store)
    study = studies.get_study(study.id)
    trials = studies.trials(study.id)
    objective = study.spec.get("objective") or "train/reward_mean"
    typer.echo(f"study {study.id} {study.name!r}: {study.status}, {len(trials)} children, at most "
               f"{study.max_concurrent} at once on {study.queue}")
    for t in trials:
        extra = f"  ({t.stop_reason})" if t.stop_reason else ""
        typer.echo(f"  point {t.point} seed {t.seed:<4} run {t.run_id or '-':<6} {t.status:<10} step {t.step}{extra}")
    results = point_results(studies, study.id)
    typer.echo(f"results ({objective}, succeeded children; mean ± std over seeds):")
    def rank(result: Any) -> tuple[bool, float]:  # largest mean final objective first, points without one last
        mean = result.final[objective].mean if objective in result.final else None
        return mean is None, -(mean or 0.0)

    for r in sorted(results, key=rank):
        final, best = r.final.get(objective), r.best.get(objective)
        values = ", ".join(f"{k}={v}" for k, v in r.params.items())
        typer.echo(f"  point {r.point} ({values}): final {_fmt(final and final.mean)} ± {_fmt(final and final.std)}, "
                   f"best {_fmt(best and best.mean)} ± {_fmt(best and best.std)}, n={final.n if final else 0}")
    if csv_path is not None:
        keys = sorted({k for r in results for k in r.final})
        csv_path.write_text(results_csv(results, keys), encoding="utf-8")
        typer.echo(f"results written to {csv_path}")


@one_line_errors
def study(
    target: str = typer.Argument(..., help="A study YAML file, or one of: status, stop, resume, list."),
    name: str = typer.Argument(None, help="The study's name or id (for status, stop, resume)."),
    wait: bool = typer.Option(False, "--wait", help="After creating or resuming: wait until every child ended."),
    csv: Path = typer.Option(None, "--csv", help="status: also write the results per point to this CSV file."),
) -> None:
    """Run a study (a base config, a search space and seeds per point) on the workers, or act on one."""
    from db.migrate import upgrade
    from jobs.settings import get_settings, operator_permissions

    settings = get_settings()
    settings.ensure_dirs()
    upgrade(settings.resolved_database_url)
    if target == "list":
        from db.study_store import StudyStore
        from jobs.client import get_store

        for s in StudyStore(get_store(settings)).list_studies():
            typer.echo(f"{s.id:>4}  {s.name:<30} {s.status:<9} {s.queue}")
        return
    if target in ACTIONS:
        if not name:
            _fail(f"`cooplab study {target}` needs the study's name or id")
        _act(settings, target, name, csv, wait)
        return
    if name:
        _fail(f"unexpected argument {name!r}: give a study YAML file, or status|stop|resume NAME")
    from jobs.studies import create_study
    from jobs.study_space import StudySpaceError
    from jobs.study_spec import load_study_file

    try:
        base_modules = operator_permissions(settings).task_modules  # the allowlist a base file is read under
        created = create_study(load_study_file(target, task_modules=base_modules), settings=settings)
    except StudySpaceError as exc:
        _fail(f"invalid study {target}:\n{exc}")
    typer.echo(f"study {created.id} {created.name!r} created (experiment {created.experiment_id})")
    if wait:
        _wait(settings, created.id)
    _print_status(settings, str(created.id), csv)


def _act(settings: Any, action: str, ref: str, csv: Path | None, wait: bool) -> None:
    from jobs.client import get_store
    from jobs.studies import find_study, resume_study, stop_study

    _look(settings)
    try:
        found = find_study(ref, settings=settings, store=get_store(settings))
    except LookupError as exc:
        _fail(str(exc))
    if action == "stop":
        typer.echo(f"study {found.name!r} stopped: {stop_study(found.id, settings=settings)} runs asked to stop")
    elif action == "resume":
        typer.echo(f"study {found.name!r} resumed: {resume_study(found.id, settings=settings)} children queued again")
        if wait:
            _wait(settings, found.id)
    _print_status(settings, str(found.id), csv)


def _wait(settings: Any, study_id: int) -> None:
    from db import states
    from db.study_store import StudyStore
    from jobs.client import get_store
    from jobs.maintenance import run_maintenance

    store = get_store(settings)
    studies = StudyStore(store)
    while any(t.status not in states.TERMINAL_STATUSES for t in studies.trials(study_id)):
        if studies.get_study(study_id).status != "active" and not any(
                t.status in states.ACTIVE_STATUSES for t in studies.trials(study_id)):
            break
        time.sleep(max(1.0, settings.maintenance_interval_s))
        run_maintenance(settings, store=store)


def register(app: typer.Typer) -> None:
    """Add ``cooplab study`` to the CLI."""
    app.command()(study)
