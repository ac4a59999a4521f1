"""``cooplab export-merged CHECKPOINT --out DIR``: plain ``from_pretrained`` folders from a LoRA run's checkpoint."""

from __future__ import annotations

from pathlib import Path

import typer

EXIT_BAD_INPUT = 2


def register(app: typer.Typer) -> None:
    """Add the ``export-merged`` command to the CLI."""

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
