"""The typer app of the ``cooplab`` command line (:mod:`cooplab.cli` is the entry point).

Each command group lives in its own module with a ``register(app)`` function; heavy imports
(torch, celery, streamlit) happen inside the commands, so ``cooplab --help`` is instant.
"""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="cooplab",
    help="Train teams of LLM agents to cooperate, and run the experiments from a browser.",
    no_args_is_help=True,
    add_completion=False,
)

# modules that add commands to the app: (module, what it provides)
_COMMAND_MODULES = (
    "cooplab.cmd_train",  # train
    "cooplab.cmd_eval",  # eval
    "cooplab.cmd_bench",  # bench
    "cooplab.cmd_export",  # export-merged, export mlflow
    "cooplab.cmd_jobs",  # worker, up, ui, db, submit, stop, runs
    "cooplab.cmd_study",  # study
    "cooplab.cmd_access",  # hash-password
)


def _version_callback(value: bool) -> None:
    if value:
        from cooplab import __version__

        typer.echo(f"cooplab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Train teams of LLM agents to cooperate, and run the experiments from a browser."""


def _register_commands() -> None:
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(app)


_register_commands()
