"""CoMLRL's ``comlrl.utils.checkpoint`` for the public part: :func:`read_checkpoint_metadata`.

CoopLab's checkpoints are its own folders (``model_{u}.safetensors``, ``trainer_state.pt``,
``meta.json``; :mod:`engine.trainer.checkpoint`); CoMLRL's state-file format and its
``TrainingCheckpointMixin`` are internals not carried over (docs/comlrl.md). An ``engine.comlrl``
trainer adds CoMLRL's identity fields to each checkpoint's ``meta.json``
(:func:`record_checkpoint_identity`): the trainer class, the training run's id and the W&B run it
reports to, so a script can resume that W&B run as CoMLRL documents.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from engine.schema.comparator_checkpoint import META_FILE, STATE_FILE, read_checkpoint_meta

CHECKPOINT_VERSION = 1


def read_checkpoint_metadata(path: str | Path) -> dict[str, Any]:
    """The public fields of a checkpoint (its folder, or a file in it) without restoring anything:
    ``version``, ``trainer_class``, ``sequence`` (the epoch or iteration an ``engine.comlrl`` trainer
    wrote it at; else the step), ``run_id`` and ``wandb`` (the W&B run to resume, when the run reported
    to one; else None)."""
    target = Path(path).expanduser()
    folder = target.parent if target.is_file() and target.name in (META_FILE, STATE_FILE) else target
    meta = read_checkpoint_meta(folder)
    if not isinstance(meta.get("step"), int) or isinstance(meta.get("step"), bool) or meta["step"] < 0:
        raise ValueError(f"{folder}: its {META_FILE} has no valid step (sequence)")
    wandb = meta.get("wandb")
    if wandb is not None and (not isinstance(wandb, dict) or not wandb.get("id")):
        raise ValueError(f"{folder}: its {META_FILE} has an invalid W&B run identity {wandb!r}")
    sequence = meta.get("sequence")
    if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 0:
        sequence = meta["step"]
    return {"version": int(meta.get("version", CHECKPOINT_VERSION)), "trainer_class": meta.get("trainer_class"),
            "sequence": sequence, "run_id": meta.get("run_id"), "wandb": wandb}


def wandb_identity(run: Any) -> dict[str, str] | None:
    """CoMLRL's record of a W&B run: its ``id`` and, where set, ``project`` and ``entity``; None without
    a run (or one without an id)."""
    if run is None or not isinstance(getattr(run, "id", None), str) or not run.id:
        return None
    return {key: value for key in ("id", "project", "entity")
            if isinstance(value := getattr(run, key, None), str) and value}


def record_checkpoint_identity(folder: str | Path, *, trainer_class: str, run_id: str | None,
                               wandb: dict[str, str] | None, sequence: int | None = None) -> None:
    """Add ``trainer_class``, ``run_id``, ``wandb`` and, for a checkpoint at an epoch (iteration)
    boundary, CoMLRL's ``sequence`` to checkpoint ``folder``'s ``meta.json`` (replaced atomically),
    where :func:`read_checkpoint_metadata` reads them."""
    path = Path(folder) / META_FILE
    meta = json.loads(path.read_text(encoding="utf-8"))
    meta.update(trainer_class=trainer_class, run_id=run_id, wandb=wandb)
    if sequence is not None:
        meta["sequence"] = sequence
    tmp = path.with_name(f".{META_FILE}.tmp")
    tmp.write_text(json.dumps(meta, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, path)
