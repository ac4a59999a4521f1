"""CoMLRL's ``comlrl.utils.distributed``: the single-process context its trainers run in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class DistributedContext:
    is_main: bool
    device: torch.device


def local_context(device: torch.device | None = None) -> DistributedContext:
    """The main (only) process on ``device`` (default: CUDA when available, else the CPU)."""
    if device is None:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return DistributedContext(is_main=True, device=device)


def unwrap_model(model: Any) -> Any:
    """The model inside a ``module`` wrapper (DDP style), else the model."""
    return getattr(model, "module", model)
