"""Exports: ``cooplab export-merged CHECKPOINT --out DIR`` writes plain ``from_pretrained`` folders from
a LoRA run's checkpoint; ``cooplab export mlflow RUN_ID... --tracking-uri URI [--experiment NAME]``
sends runs (params, metrics, tags, artifacts) to an MLflow tracking server (:mod:`jobs.mlflow_export`).
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

EXIT_BAD_INPUT = 2
EXIT_SERVER = 1
# The MLflow client's defaults wait minutes on a server that is down (7 retries, 120 s each) and send
# usage statistics to MLflow's developers; an export talks to the tracking server alone, and gives up sooner.
_MLFLOW_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                    "MLFLOW_HTTP_REQUEST_TIMEOUT": "60", "MLFLOW_DISABLE_TELEMETRY": "true"}
# Always: the client's own "View run at" line prints the tracking URI with its password; the command
# prints the run's link itself, masked.
_MLFLOW_FORCED = {"MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}

export_app = typer.Typer(help="Send runs to other tools: `cooplab export mlflow RUN_ID...`.",
                         no_args_is_help=True)


@export_app.command("mlflow")
def export_mlflow_command(
    run_ids: list[int] = typer.Argument(..., help="Run ids (`cooplab runs`)."),
    tracking_uri: str = typer.Option(
        ..., "--tracking-uri",
        help="The MLflow tracking server, http(s)://, e.g. http://mlflow:5000; artifacts go through its "
             "artifact API only."),
    experiment: str | None = typer.Option(
        None, "--experiment",
        help="MLflow experiment to log into (default: the run's CoopLab experiment name)."),
    again: bool = typer.Option(
        False, "--again", help="Export a run that was exported to this experiment before once more."),
) -> None:
    """Log each run to MLflow: params from its config, metrics with their steps, tags (lineage, seed,
    study point), and artifacts (config, metrics CSV, transcripts JSONL, evaluation records, final
    model folders when the run's folder is on this machine)."""
    from jobs.mlflow_export.artifacts import ArtifactLocationError, TrackingUriError, check_tracking_uri
    from jobs.mlflow_export.redact import redact_message

    try:
        check_tracking_uri(tracking_uri)
    except TrackingUriError as exc:
        typer.echo(f"cooplab export mlflow: {exc}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    for name, value in _MLFLOW_DEFAULTS.items():
        os.environ.setdefault(name, value)
    os.environ.update(_MLFLOW_FORCED)
    try:
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient
    except ImportError:
        typer.echo("cooplab export mlflow: the mlflow client is not installed: pip install 'cooplab[mlflow]'",
                   err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    from db.errors import NotFoundError
    from db.migrate import upgrade
    from db.urls import redact_url
    from jobs.client import get_store
    from jobs.mlflow_export import export_run
    from jobs.settings import get_settings

    settings = get_settings()
    upgrade(settings.resolved_database_url)
    store = get_store(settings)
    client = MlflowClient(tracking_uri=tracking_uri)
    shown_uri = redact_url(tracking_uri).rstrip("/")  # every line shows the URI masked, never its password
    for run_id in run_ids:
        try:
            done = export_run(store, run_id, client, experiment=experiment, again=again)
        except NotFoundError:
            typer.echo(f"cooplab export mlflow: no run {run_id} in the database; `cooplab runs` lists "
                       "the runs",
                       err=True)
            raise typer.Exit(EXIT_BAD_INPUT) from None
        except ArtifactLocationError as exc:
            typer.echo(f"cooplab export mlflow: run {run_id}: {redact_message(str(exc), tracking_uri)}",
                       err=True)
            raise typer.Exit(EXIT_SERVER) from None
        except Exception as exc:  # noqa: BLE001 - MLflow's and requests' errors embed the URL: shown masked
            what = (f"the tracking server {shown_uri} failed: " if isinstance(exc, MlflowException)
                    else f"the export to {shown_uri} failed: {type(exc).__name__}: ")
            detail = redact_message(str(exc), tracking_uri)[:400]
            typer.echo(f"cooplab export mlflow: run {run_id}: {what}{detail}", err=True)
            raise typer.Exit(EXIT_SERVER) from None
        if done.skipped:
            typer.echo(f"run {run_id}: already in MLflow experiment '{done.experiment}' as run "
                       f"{done.mlflow_run_id} "
                       "(--again exports it once more)")
            continue
        typer.echo(f"run {run_id} -> MLflow run {done.mlflow_run_id} in experiment '{done.experiment}': "
                   f"{done.params} params, {done.metric_points} metric points, artifacts "
                   f"{', '.join(done.artifacts) or 'none'}; {shown_uri}/#/experiments/"
                   f"{done.experiment_id}/runs/{done.mlflow_run_id}")


def register(app: typer.Typer) -> None:
    """Add the ``export-merged`` command and the ``export`` group to the CLI."""
    app.add_typer(export_app, name="export")

    @app.command("export-merged")
    def export_merged_command(
        checkpoint: Path = typer.Argument(..., help="A checkpoint folder (runs/NAME/checkpoints/checkpoint-N)."),
        out: Path = typer.Option(..., "--out", "-o", help="Folder to write agent_0/, agent_1/, ... into."),
        config: Path | None = typer.Option(
            None, "--config", help="The run config (default: config.yaml of the checkpoint's run folder)."
        ),
    ) -> None:
        """Fold each LoRA agent's adapter into its base and write every agent as a folder that
        AutoModelForCausalLM.from_pretrained loads (the adapter alone goes under adapter/)."""
        from engine.lora.adapters import PeftMissingError
        from engine.lora.export import export_merged
        from engine.schema.run_config import ConfigError

        try:
            written = export_merged(checkpoint, out, config=config)
        except (FileNotFoundError, ValueError, ConfigError, PeftMissingError) as exc:
            typer.echo(f"cannot export {checkpoint}: {exc}", err=True)
            raise typer.Exit(EXIT_BAD_INPUT) from None
        for folder in written:
            typer.echo(str(folder))
