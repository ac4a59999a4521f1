"""Commands for running experiments as jobs: worker, up, ui, db upgrade, submit, stop, resume, runs,
requeue.

Heavy imports (celery, the store, streamlit) happen inside the commands so ``cooplab --help`` stays
instant. An operational failure (the broker or the database unreachable, a full disk, a data directory
of another database) prints one line naming what failed, not a traceback; ``COOPLAB_DEBUG=1`` shows
the traceback.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer

from cooplab.cmd_access import announce_signin

db_app = typer.Typer(help="The database schema.", no_args_is_help=True)

DEVICE_HELP = ("Device whose queue to use: cpu, cuda:N (e.g. cuda:0), or a set of GPUs one worker owns, "
               "cuda:N,M,... (e.g. cuda:0,1,2,3: an fsdp run there has up to one rank per GPU).")
HOST_HELP = ("Address the dashboard listens on: 127.0.0.1 (this machine only) or 0.0.0.0 (all interfaces; "
             "requires sign-in, see `cooplab hash-password`).")


def _check_host(host: str) -> str:
    """A listen address: an IP address or a host name, without scheme, port or spaces."""
    host = host.strip()
    bad_chars = any(c in host for c in " /") or (":" in host and not _is_ipv6(host))
    if not host or bad_chars:
        _fail(f"--host {host!r} is not an address; use an IP address or host name such as 127.0.0.1 or 0.0.0.0 "
              "(the port goes in --port)")
    return host


def _check_port(host: str, port: int) -> None:
    """Refuse a busy or invalid port before anything starts or is printed (see :mod:`cooplab.ports`)."""
    from cooplab.ports import port_problem

    if problem := port_problem(host, port):
        _fail(problem)


def _is_ipv6(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False


def _url_host(host: str) -> str:
    """The host as written in a URL (IPv6 addresses in brackets)."""
    return f"[{host}]" if _is_ipv6(host) else host


def _fail(message: str, code: int = 2) -> NoReturn:
    typer.secho(message, fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


F = TypeVar("F", bound=Callable[..., Any])


def one_line_errors(command: F) -> F:
    """Print an operational failure as one line (``error: ...``) and exit 1, instead of a traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            if os.environ.get("COOPLAB_DEBUG"):
                raise
            _fail(f"error: {_one_line(exc)}", code=1)

    return wrapper  # type: ignore[return-value]


def _one_line(exc: BaseException) -> str:
    from cooplab.submit_path import one_line

    return one_line(exc)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h"


def _check_device(device: str) -> str:
    from jobs.celery_app import validate_device

    try:
        return validate_device(device)
    except ValueError as exc:
        _fail(str(exc))
    return device


@one_line_errors
def worker(
    device: str = typer.Option("cpu", "--device", "-d", help=DEVICE_HELP),
    loglevel: str = typer.Option(None, "--loglevel", "-l", help="Log level (default COOPLAB_LOG_LEVEL)."),
    name: str = typer.Option(None, "--name", "-n",
                             help="The worker's name (NAME@host); default cooplab-<device>-<pid>@<host>, unique."),
    slots: int = typer.Option(1, "--slots", help="Jobs at once on the device (1-8): more than 1 packs small runs "
                                                 "onto one GPU; each job still gets a fresh process."),
) -> None:
    """Run a worker that trains the runs queued for one device (or a GPU set), one at a time (or --slots at once)."""
    from jobs.worker import check_slots, start_worker, worker_name

    device = _check_device(device)
    try:
        name = worker_name(device, name)
        check_slots(slots)
    except ValueError as exc:
        _fail(str(exc))
    start_worker(device, loglevel=loglevel, name=name, slots=slots)


@one_line_errors
def up(
    port: int = typer.Option(8501, help="Dashboard port."),
    host: str = typer.Option("127.0.0.1", "--host", help=HOST_HELP),
    device: str = typer.Option("cpu", "--device", "-d", help="Device of the embedded worker. " + DEVICE_HELP),
    no_worker: bool = typer.Option(False, "--no-worker", help="Start only the dashboard."),
) -> None:
    """Upgrade the database, then run the dashboard and one worker until Ctrl-C."""
    from jobs.supervisor import Supervisor

    host = _check_host(host)
    _check_port(host, port)
    announce_signin(host)
    supervisor = Supervisor(port=port, host=host, device=_check_device(device), with_worker=not no_worker)
    typer.echo(f"CoopLab dashboard: http://{_url_host(host)}:{port}  (Ctrl-C stops everything)")
    raise typer.Exit(supervisor.run())


@one_line_errors
def ui(
    port: int = typer.Option(8501, help="Dashboard port."),
    host: str = typer.Option("127.0.0.1", "--host", help=HOST_HELP),
) -> None:
    """Run only the dashboard (workers are started separately with `cooplab worker`)."""
    from jobs.supervisor import Supervisor

    host = _check_host(host)
    _check_port(host, port)
    announce_signin(host)
    typer.echo(f"CoopLab dashboard: http://{_url_host(host)}:{port}")
    raise typer.Exit(Supervisor(port=port, host=host, with_worker=False).run())


@db_app.command("upgrade")
@one_line_errors
def db_upgrade() -> None:
    """Create or migrate the database schema to the newest version."""
    from db.migrate import current_revision, revisions_between, upgrade
    from db.urls import redact_url
    from jobs.settings import get_settings

    settings = get_settings()
    settings.ensure_dirs()
    url = settings.resolved_database_url
    before = current_revision(url)
    upgrade(url)
    after = current_revision(url) or "?"
    ran = revisions_between(before, after) if before != after else []
    if ran:
        start = before or "an empty database"
        done = f"migrated from {start} to {after}: ran {', '.join(ran)}"
    else:
        done = f"at {after}; nothing to run"
    typer.echo(f"database up to date: {redact_url(url)} ({done})")  # never the password


@one_line_errors
def submit(
    config_paths: list[Path] = typer.Argument(..., metavar="CONFIG_PATH", help="Run configs (YAML or JSON): one run each."),
    device: str = typer.Option("cpu", "--device", "-d", help=DEVICE_HELP),
    experiment: str = typer.Option(None, "--experiment", "-e", help="Experiment name (default: each config's name)."),
) -> None:
    """Queue a run of each CONFIG_PATH for a worker; prints each run's id. Every config is checked
    before any run is stored. When the broker is down the runs are queued all the same and sent when it
    answers again (the line says so). Several configs in one call pay the start-up once."""
    # a plain `cooplab submit` does not come here: cooplab.cli runs it without typer (the same function)
    from cooplab.submit_path import SubmitArgs, submit_configs

    submit_configs(SubmitArgs(list(config_paths), device, experiment), echo=typer.echo, fail=_fail)


@one_line_errors
def stop(
    run_id: int = typer.Argument(..., help="Run id (see `cooplab runs`)."),
    wait: bool = typer.Option(False, "--wait", help="Wait until the run has stopped (enforcing the grace period)."),
) -> None:
    """Ask a run to stop (a queued run is cancelled)."""
    import time

    from db.errors import NotFoundError
    from jobs.client import get_store, stop_run
    from jobs.maintenance import StopEnforcer, run_maintenance
    from jobs.settings import get_settings

    settings = get_settings()
    _look(settings)  # a run whose worker died is settled first, even with no worker alive
    try:
        status = stop_run(run_id, settings=settings)
    except NotFoundError as exc:
        _fail(str(exc))
    typer.echo(f"run {run_id}: {status}")
    if not wait:
        return
    store, enforcer = get_store(settings), StopEnforcer()
    while store.get_run(run_id).is_active:
        time.sleep(settings.maintenance_interval_s)
        run_maintenance(settings, store=store, enforcer=enforcer)
    typer.echo(f"run {run_id}: {store.get_run(run_id).status}")


def _look(settings: Any) -> None:
    """Settle the runs whose job is gone (:func:`jobs.liveness.look`) before showing or changing runs."""
    from jobs.client import get_store
    from jobs.liveness import look_now

    store = get_store(settings)
    store.server_now()  # an unreachable database is the command's one error line, not also the look's warning
    look_now(store, settings, min_interval_s=0)


@one_line_errors
def resume(run_id: int = typer.Argument(..., help="A finished run with a checkpoint.")) -> None:
    """Queue a new attempt of a run that continues from its last checkpoint."""
    from db.errors import NotFoundError
    from jobs.client import ResumeError, resume_run

    try:
        new_id = resume_run(run_id)
    except (ResumeError, NotFoundError) as exc:
        _fail(str(exc))
    unsent = f"; {new_id.unsent}" if new_id.unsent else ""
    typer.echo(f"run {new_id} queued, resuming run {run_id}{unsent}")


@one_line_errors
def runs(
    experiment: str = typer.Option(None, "--experiment", "-e", help="Only this experiment's runs."),
    status: list[str] = typer.Option(None, "--status", "-s", help="Only runs in this state (repeatable)."),
    limit: int = typer.Option(30, help="At most this many runs, newest first."),
) -> None:
    """List runs with their state, progress and heartbeat age (runs whose job is gone are settled first)."""
    from jobs.client import get_store
    from jobs.liveness import heartbeat_age
    from jobs.settings import get_settings

    settings = get_settings()
    store = get_store(settings)
    _look(settings)
    experiment_id = None
    if experiment:
        found = store.find_experiment(experiment)
        if found is None:
            _fail(f"no experiment named {experiment!r}")
        experiment_id = found.id
    from db.states import check_status

    try:
        for name in status or ():
            check_status(name)
    except ValueError as exc:
        _fail(str(exc))
    rows = store.list_runs(experiment_id, statuses=status or None, limit=limit)
    now = store.server_now()  # heartbeats are stamped with the database server's clock
    typer.echo(f"{'id':>5}  {'exp':>4}  {'try':>3}  {'status':<10} {'queue':<7} {'progress':>11}  {'beat':>5}  worker")
    for r in rows:
        progress = f"{r.step}/{r.total_steps}" if r.total_steps else str(r.step)
        beat = _age(heartbeat_age(r, now)) if r.is_active and r.status != "queued" else "-"
        typer.echo(f"{r.id:>5}  {r.experiment_id:>4}  {r.attempt:>3}  {r.status:<10} {r.queue:<7} "
                   f"{progress:>11}  {beat:>5}  {r.worker or ''}")


@one_line_errors
def requeue(
    run_ids: list[int] = typer.Argument(None, help="Queued runs to send again (default: those the broker lost)."),
) -> None:
    """Send queued runs to the broker again: the given ones, or every queued run missing from the broker
    (e.g. after Redis restarted without persistence). Sending twice is harmless: a run is claimed once."""
    import time

    from jobs.celery_app import get_sender_app
    from jobs.client import get_store, resend_run
    from jobs.reconcile import Reconciler
    from jobs.settings import get_settings

    settings = get_settings()
    store = get_store(settings)
    if run_ids:
        for run_id in run_ids:
            status = store.get_run(run_id).status
            if status != "queued" or not resend_run(run_id, settings=settings):
                _fail(f"run {run_id} is {status}, not queued; only queued runs can be sent again "
                      "(resume a finished run to train it again)")
            typer.echo(f"run {run_id} sent again to queue {store.get_run(run_id).queue!r}")
        return
    reconciler = Reconciler()
    app = get_sender_app(settings)
    reconciler.missing(store, app, settings, min_age_s=0, confirm_s=0)  # first look
    time.sleep(1.0)  # a message is briefly in neither place while a worker takes it
    missing = reconciler.missing(store, app, settings, min_age_s=0, confirm_s=0.5)
    if not missing:
        typer.echo("every queued run is in the broker; nothing to send")
        return
    sent = reconciler.resend(store, settings, missing)
    for run_id in sent:
        typer.echo(f"run {run_id} was missing from the broker: sent again")
    if len(sent) < len(missing):
        _fail(f"could not send {len(missing) - len(sent)} of {len(missing)} missing runs; is the broker up?", code=1)


def register(app: typer.Typer) -> None:
    """Add the job commands to the ``cooplab`` CLI."""
    app.command()(worker)
    app.command()(up)
    app.command()(ui)
    app.command()(submit)
    app.command()(stop)
    app.command()(resume)
    app.command()(runs)
    app.command()(requeue)
    app.add_typer(db_app, name="db")
