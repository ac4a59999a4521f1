"""``cooplab``: one entry point for training, workers, the dashboard, the database and benchmarks.

The commands are a typer app (:mod:`cooplab.typer_app`, also ``cooplab.cli.app``), built only when a
command needs it: a plain ``cooplab submit`` runs without the CLI framework
(:mod:`cooplab.submit_path`), since scripts call it in loops and its start-up is its cost.
"""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    from cooplab.submit_path import plain_submit, run_plain_submit

    args = plain_submit(sys.argv[1:])
    if args is not None:
        raise SystemExit(run_plain_submit(args))
    from cooplab.typer_app import app

    app()


def __getattr__(name: str) -> Any:
    if name == "app":  # the typer app, for tests and embedding (typer.testing.CliRunner)
        from cooplab.typer_app import app

        return app
    raise AttributeError(f"module 'cooplab.cli' has no attribute {name!r}")
