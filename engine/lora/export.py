"""Merged weights from a run's checkpoint: every agent as a plain ``from_pretrained`` folder.

A LoRA run's checkpoints hold adapters only. :func:`export_merged` rebuilds the team of the run
config (the frozen bases from their model sources, the adapters as the config declares them), loads
the checkpoint's adapters and writes ``<out>/agent_{i}/`` per agent: merged weights + tokenizer, and
the adapter alone under ``adapter/``. Full fine-tuned agents in the same run are written as they are.
``cooplab export-merged CHECKPOINT --out DIR`` runs it; the config defaults to the run folder's
``config.yaml`` (two levels above ``checkpoints/checkpoint-N``).
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.lora.weights import load_weights_file, save_agent_export
from engine.schema.comparator_checkpoint import META_FILE
from engine.schema.folders import atomic_folder


def _config_path(checkpoint: Path, config: str | Path | None) -> Path:
    if config is not None:
        return Path(config)
    candidate = checkpoint.parent.parent / "config.yaml"
    if not candidate.is_file():
        raise FileNotFoundError(f"no run config next to {checkpoint} (looked for {candidate}); pass --config")
    return candidate


def export_merged(checkpoint: str | Path, out: str | Path, *, config: str | Path | None = None,
                  device: str = "cpu") -> list[Path]:
    """Write merged per-agent folders from ``checkpoint`` into ``out`` (see the module doc); returns them."""
    from engine.build.team import load_team
    from engine.schema.run_config import load_run_config
    from engine.trainer.checkpoint import model_groups

    folder = Path(checkpoint)
    if not (folder / META_FILE).is_file():
        raise FileNotFoundError(f"{folder} is not a checkpoint (no {META_FILE}); pass a checkpoint-N folder")
    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    run_config = load_run_config(_config_path(folder, config))
    if run_config.system is not None:
        raise ValueError("export_merged: a system of trainers keeps a checkpoint per trainer; export each one")
    dtype = None if run_config.trainer.torch_dtype == "auto" else run_config.trainer.torch_dtype
    team = load_team(run_config.agents, [device], dtype, seed=run_config.trainer.seed)
    distinct, which = model_groups(team.models)
    if which != meta["model_of_agent"]:
        raise ValueError(f"{folder} was written by another team (weight sharing {meta['model_of_agent']}, "
                         f"this config {which}); pass the run's own config with --config")
    for u, model in enumerate(distinct):
        load_weights_file(model, folder / f"model_{u}.safetensors")
    written = []
    with atomic_folder(Path(out), "merged export") as tmp:
        for i, (model, tokenizer) in enumerate(zip(team.models, team.tokenizers, strict=True)):
            save_agent_export(model, tokenizer, tmp / f"agent_{i}")
            written.append(Path(out) / f"agent_{i}")
    return written
