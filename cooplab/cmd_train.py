"""``cooplab train CONFIG.yaml``: run a training headless from a run config file.

Shows a progress bar, writes ``metrics.jsonl``/``transcripts.jsonl``, checkpoints and the final
models into the output folder. A config that does not validate or fails the pre-flight checks (a
task off the ``COOPLAB_TASK_MODULES`` allowlist, a missing model, ``max_new_tokens`` beyond the
model's context; :mod:`jobs.preflight`) prints one line per bad field and exits with status 2
before anything is loaded. Torch loads only when the command runs, after its OpenMP threads are set
to wait passively and the thread count is chosen (:mod:`jobs.cpu_threads`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import typer

EXIT_CONFIG_ERROR = 2


def register(app: typer.Typer) -> None:
    """Add the ``train`` command to the CLI."""

    @app.command("train")
    def train(
        config: Path = typer.Argument(..., help="Run config (YAML or JSON): agents, task, trainer."),
        output: Path | None = typer.Option(
            None, "--output", "-o", help="Output folder (default ./runs/<name>-<timestamp>)."
        ),
        resume: Path | None = typer.Option(None, "--resume", help="Checkpoint folder to continue from."),
        max_steps: int | None = typer.Option(None, "--max-steps", min=1, help="Stop after this many steps."),
    ) -> None:
        """Train a team of agents from a run config."""
        from engine.schema.run_config import ConfigError, load_run_config
        from jobs.preflight import check_run_config
        from jobs.settings import apply_host_memory_setting, get_settings, operator_permissions

        try:
            settings = get_settings()
        except ValueError as exc:  # a bad COOPLAB_* setting (e.g. COOPLAB_TASK_MODULES)
            typer.echo(f"invalid settings:\n{exc}", err=True)
            raise typer.Exit(EXIT_CONFIG_ERROR) from None
        from jobs.cpu_threads import configure_threads

        try:  # before torch loads: waiting OpenMP threads sleep; COOPLAB_JOB_THREADS / OMP_NUM_THREADS / all cores
            configure_threads(settings.job_threads)
        except ValueError as exc:  # an OMP_NUM_THREADS that is no thread count
            typer.echo(f"invalid settings:\n{exc}", err=True)
            raise typer.Exit(EXIT_CONFIG_ERROR) from None
        # the operator's permissions; this shell's COOPLAB_API_KEY_* variables are the keys a run config may name
        permissions = operator_permissions(settings, os.environ)
        try:  # parsed once, under the task module allowlist; typer keeps --max-steps within the schema's bound
            run_config = load_run_config(config, task_modules=permissions.task_modules)
            if max_steps is not None:
                run_config = run_config.model_copy(
                    update={"trainer": run_config.trainer.model_copy(update={"max_steps": max_steps})})
            run_config = check_run_config(run_config, settings=settings)  # pre-flight
        except ConfigError as exc:
            typer.echo(f"invalid run config {config}:\n{exc}", err=True)
            raise typer.Exit(EXIT_CONFIG_ERROR) from None
        out = output or Path("runs") / f"{run_config.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        out.mkdir(parents=True, exist_ok=True)
        if run_config.trainer.parallel_training == "fsdp":  # the ranks run under torchrun (cooplab.fsdp_launch)
            from cooplab.fsdp_launch import launch_run

            raise typer.Exit(launch_run(run_config, out, echo=typer.echo, resume=resume,
                                        err=lambda line: typer.echo(line, err=True)))

        from engine.build.run import run_training
        from engine.sinks import ConsoleSink, JsonlSink, MultiSink
        from engine.tasks import TaskError

        apply_host_memory_setting(settings)  # COOPLAB_KEEP_FREED_MEMORY, before a trainer is built
        sink = MultiSink(ConsoleSink(), JsonlSink(out))
        try:
            result = run_training(run_config, output_dir=out, sink=sink, resume_from=resume,
                                  write_roots=[settings.data_dir],  # besides the output folder
                                  read_roots=settings.read_roots,  # COOPLAB_DATA_ROOTS and the defaults
                                  permissions=permissions)
        except (ConfigError, TaskError) as exc:
            typer.echo(f"invalid run config {config}:\n{exc}", err=True)
            raise typer.Exit(EXIT_CONFIG_ERROR) from None
        typer.echo(
            f"{result.status}: step {result.step}, env_step {result.env_step}; "
            f"outputs in {out} (last checkpoint: {result.last_checkpoint})"
        )
