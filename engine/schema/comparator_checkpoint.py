"""A checkpoint folder as the comparator of the iterative preference trainers (torch-free).

``comparator_checkpoint`` names a ``checkpoint-N`` folder an earlier run wrote
(:func:`engine.trainer.checkpoint.write_checkpoint`: ``model_{u}.safetensors`` per
distinct model, ``trainer_state.pt``, ``meta.json``). The comparator samples with its weights. The
pre-flight checks (dashboard, ``cooplab train``/``submit``) and the trainer read the folder through
:func:`comparator_checkpoint_problem`, so a missing or foreign folder is refused before a run starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

STATE_FILE = "trainer_state.pt"  # the files engine.trainer.checkpoint writes (it imports these names)
META_FILE = "meta.json"
FIX = "choose a checkpoint of an earlier run of this experiment (a checkpoint-N folder) or leave it empty"


def read_checkpoint_meta(path: str | Path) -> dict[str, Any]:
    """The ``meta.json`` of checkpoint folder ``path``; ``FileNotFoundError``/``ValueError`` naming the
    folder and the fix when it is missing or not a complete checkpoint."""
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"the checkpoint folder {folder} does not exist (deleted, or written on another "
                                f"machine); {FIX}")
    missing = [name for name in (STATE_FILE, META_FILE) if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder} is not a checkpoint folder (no {', '.join(missing)}); {FIX}")
    try:
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{folder / META_FILE} cannot be read ({exc}); {FIX}") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("model_of_agent"), list):
        raise ValueError(f"{folder / META_FILE} has no model_of_agent list; {FIX}")
    return meta


def comparator_checkpoint_problem(path: str | Path, num_agents: int,
                                  model_of_agent: list[int] | None = None) -> str | None:
    """What is wrong with ``path`` as the comparator of a team of ``num_agents`` (None: nothing); with
    ``model_of_agent`` (the trainer's weight sharing) the checkpoint's must be the same."""
    try:
        meta = read_checkpoint_meta(path)
    except (FileNotFoundError, ValueError) as exc:
        return str(exc)
    theirs = meta["model_of_agent"]
    if len(theirs) != num_agents:
        return f"the checkpoint {path} holds a team of {len(theirs)} agent(s), this run has {num_agents}; {FIX}"
    if model_of_agent is not None and list(theirs) != list(model_of_agent):
        return (f"the checkpoint {path} shares weights between agents as {theirs}, this run as {model_of_agent}; "
                f"{FIX}")
    return None
