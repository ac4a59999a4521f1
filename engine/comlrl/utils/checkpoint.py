"""CoMLRL's ``comlrl.utils.checkpoint`` for the public part: :func:`read_checkpoint_metadata`.

CoopLab's checkpoints are its own folders (``model_{u}.safetensors``, ``trainer_state.pt``,
``meta.json``; :mod:`engine.trainer.checkpoint`); CoMLRL's state-file format and its
``TrainingCheckpointMixin`` are internals not carried over (docs/comlrl.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.schema.comparator_checkpoint import META_FILE, STATE_FILE, read_checkpoint_meta

CHECKPOINT_VERSION = 1


def read_checkpoint_metadata(path: str | Path) -> dict[str, Any]:
    """The public fields of a checkpoint (its folder, or a file in it) without restoring anything:
    ``version``, ``trainer_class``, ``sequence`` (the step it was written at), ``run_id`` and ``wandb``
    (the W&B run to resume, when the run reported to one; else None)."""
    target = Path(path).expanduser()
    folder = target.parent if target.is_file() and target.name in (META_FILE, STATE_FILE) else target
    meta = read_checkpoint_meta(folder)
    if not isinstance(meta.get("step"), int) or isinstance(meta.get("step"), bool) or meta["step"] < 0:
        raise ValueError(f"{folder}: its {META_FILE} has no valid step (sequence)")
    wandb = meta.get("wandb")
    if wandb is not None and (not isinstance(wandb, dict) or not wandb.get("id")):
        raise ValueError(f"{folder}: its {META_FILE} has an invalid W&B run identity {wandb!r}")
    return {"version": int(meta.get("version", CHECKPOINT_VERSION)), "trainer_class": meta.get("trainer_class"),
            "sequence": meta["step"], "run_id": meta.get("run_id"), "wandb": wandb}
