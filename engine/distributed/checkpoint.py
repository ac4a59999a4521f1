"""Sharded checkpoints of an FSDP team with ``torch.distributed.checkpoint`` (DCP).

Every rank writes its own shards of each agent's weights and AdamW moments into one folder
(``<checkpoint>/dcp/``: ``__<rank>_0.distcp`` per rank, ``.metadata`` by rank 0), and nothing is gathered
whole; loading reads them into whatever sharding the loading team has, so a checkpoint saved on 2 ranks
resumes on 1, 2 or 3 (DCP reshards by the tensors' global offsets). Without a process group (one
process) the same calls save and load unsharded. The keys are ``agent_<i>.model`` (the model's state
dict, :func:`torch.distributed.checkpoint.state_dict.get_model_state_dict`) and ``agent_<i>.optim``.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

DCP_DIR = "dcp"


def _team_state(agents: Sequence[Any]) -> dict[str, Any]:
    """``{agent_<i>: {model, optim}}``: each agent's (sharded) weights and optimizer state, as DCP takes them."""
    return {f"agent_{a.index}": {"model": get_model_state_dict(a.model),
                                 "optim": get_optimizer_state_dict(a.model, a.optimizer)} for a in agents}


def save_sharded(folder: Path, agents: Sequence[Any], *, distributed: bool) -> None:
    """Every rank's shards of ``agents`` into ``folder`` (a collective with ``distributed``)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
        dcp.save(_team_state(agents), checkpoint_id=str(folder), no_dist=not distributed)


def load_sharded(folder: Path, agents: Sequence[Any], *, distributed: bool) -> None:
    """Load ``folder`` into ``agents`` as they are sharded now (a collective with ``distributed``)."""
    if not (folder / ".metadata").is_file():
        raise FileNotFoundError(f"{folder}: no sharded checkpoint there (no .metadata); a parallel_training: fsdp "
                                "checkpoint written before sharded checkpoints cannot be resumed: start the run again")
    state = _team_state(agents)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
        dcp.load(state, checkpoint_id=str(folder), no_dist=not distributed)
    for agent in agents:
        part = state[f"agent_{agent.index}"]
        set_model_state_dict(agent.model, part["model"])
        set_optimizer_state_dict(agent.model, agent.optimizer, part["optim"])


def whole_weights(folder: Path) -> list[dict[str, torch.Tensor]]:
    """Each agent's whole weights from a sharded checkpoint folder, read in this process (no ranks)."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    with tempfile.TemporaryDirectory() as tmp:
        dcp_to_torch_save(str(folder), str(Path(tmp) / "whole.pt"))
        state = torch.load(Path(tmp) / "whole.pt", weights_only=False)
    names = sorted((k for k in state if k.startswith("agent_")), key=lambda k: int(k.removeprefix("agent_")))
    return [state[name]["model"] for name in names]
