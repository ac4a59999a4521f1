"""``cooplab submit`` without the CLI framework: what a submit imports, and the work it does.

A submit is the command scripts call in loops, so its start-up is its cost. :func:`plain_submit`
reads a plain ``submit`` command line (config paths, ``--device/-d``, ``--experiment/-e``) and
:func:`submit_configs` does the work, printing and failing exactly as the typer command does (that
command, :func:`cooplab.cmd_jobs.submit`, calls the same function). Anything else (``--help``, an
unknown or repeated option, a missing value, ``COOPLAB_DEBUG``) goes through typer, which then words
the answer. Nothing here imports typer, and a config that is refused is refused before the store, the
broker client or any other algorithm's config class is imported (``tests/jobs/test_jobs_submit_path.py``
guards the set).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

_OPTIONS = {"--device": "device", "-d": "device", "--experiment": "experiment", "-e": "experiment"}


@dataclass(frozen=True)
class SubmitArgs:
    """A plain ``cooplab submit`` command line, as typer would have read it."""

    config_paths: list[Path]
    device: str = "cpu"
    experiment: str | None = None


def plain_submit(argv: Sequence[str]) -> SubmitArgs | None:
    """The arguments of ``argv`` (without the program name) when it is a plain ``submit``, else None."""
    if not argv or argv[0] != "submit" or os.environ.get("COOPLAB_DEBUG"):
        return None
    paths: list[Path] = []
    given: dict[str, str] = {}
    rest = list(argv[1:])
    while rest:
        token = rest.pop(0)
        if not token.startswith("-"):
            paths.append(Path(token))
            continue
        name, eq, value = token.partition("=") if token.startswith("--") else (token[:2], "", token[2:])
        field = _OPTIONS.get(name)
        if field is None or field in given:
            return None  # --help, --, an unknown or repeated option: typer answers
        if not eq and not value:
            if not rest or rest[0].startswith("-"):
                return None
            value = rest.pop(0)
        given[field] = value
    if not paths:
        return None
    return SubmitArgs(paths, given.get("device", "cpu"), given.get("experiment"))


def echo(message: str, *, err: bool = False, red: bool = False) -> None:
    """Print a line as ``typer.secho`` does: red only on a terminal."""
    stream = sys.stderr if err else sys.stdout
    if red and stream.isatty():
        message = f"\x1b[31m{message}\x1b[0m"
    stream.write(message + "\n")
    stream.flush()


class Failed(Exception):
    """The command's one error line was printed; exit with ``code``."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def fail(message: str, code: int = 2) -> NoReturn:
    echo(message, err=True, red=True)
    raise Failed(code)


def submit_configs(args: SubmitArgs, *, echo: Callable[[str], None],
                   fail: Callable[[str], NoReturn]) -> None:
    """Check every config of ``args`` (validation and pre-flight for the device's queue), then store and
    send one run each, printing each run's line; ``fail`` is called with the message for a bad device
    or config, before anything is stored."""
    from jobs.devices import validate_device

    try:
        device = validate_device(args.device)
    except ValueError as exc:
        fail(str(exc))
    from engine.schema.run_config import ConfigError, load_run_config
    from jobs.preflight import check_run_config
    from jobs.settings import get_settings, operator_permissions

    settings = get_settings()
    modules = operator_permissions(settings).task_modules  # the task module allowlist the configs are read under
    configs = []
    for path in args.config_paths:  # validation and pre-flight (for this device's queue) before anything is stored
        try:
            configs.append(check_run_config(load_run_config(path, task_modules=modules), settings=settings,
                                            device=device))
        except ConfigError as exc:
            fail(f"invalid run config {path}:\n{exc}")
    from jobs.client import get_run_writes, submit_to_experiment

    settings.ensure_dirs()
    get_run_writes(settings).ensure_schema()
    for config in configs:
        run_id, name = submit_to_experiment(config, experiment=args.experiment, device=device, settings=settings,
                                            checked=True)
        unsent = f"; {run_id.unsent}" if run_id.unsent else ""
        echo(f"run {run_id} queued on {device} (experiment {name!r}){unsent}")


def one_line(exc: BaseException) -> str:
    """What an exception says in one line: the filesystem reason when that is the cause, the database
    named when it is unreachable, else its first line."""
    from jobs.faults import first_line, resource_reason
    from jobs.settings import get_settings

    try:
        database_url: str | None = get_settings().resolved_database_url
    except Exception:  # the settings themselves are what is wrong: the message says so below
        database_url = None
    reason = resource_reason(exc, database_url=database_url)
    if reason:
        return reason
    module = type(exc).__module__ or ""
    if module.startswith(("sqlalchemy", "sqlite3", "psycopg2")):  # a Store's / the submit's own writes
        from jobs.datadir import redact_url

        url = redact_url(get_settings().resolved_database_url)
        said = first_line(str(getattr(exc, 'orig', None) or exc))
        if "no such table" in said:
            return (f"the database {url} has no CoopLab tables ({said}): its file was deleted or replaced, or it "
                    "was never set up. Restore it from a backup, or run `cooplab db upgrade` to start an empty one")
        return f"the database {url} cannot be used: {said}"
    return first_line(str(exc)) or type(exc).__name__


def run_plain_submit(args: SubmitArgs) -> int:
    """Run a plain submit as the typer command would, returning its exit status: 2 for a refused device
    or config, 1 for an operational failure (one ``error: ...`` line) or Ctrl-C (``Aborted!``)."""
    try:
        submit_configs(args, echo=echo, fail=fail)
    except Failed as exc:
        return exc.code
    except KeyboardInterrupt:
        echo("", err=True)
        echo("Aborted!", err=True)
        return 1
    except Exception as exc:
        echo(f"error: {one_line(exc)}", err=True, red=True)
        return 1
    return 0


__all__ = ["SubmitArgs", "one_line", "plain_submit", "run_plain_submit", "submit_configs"]
