"""Memory accounting of a team: every tensor counted once, however many agents hold it.

Agents that share weights (one model object, or LoRA adapters over one frozen base) hold the same
tensors: counting per agent would count them once per agent. :func:`team_memory` counts distinct
storages, so a shared base counts once, and reports what a team without sharing would need beside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class TeamMemory:
    """Bytes held by a team's weights and optimizer states."""

    weight_bytes: int  # distinct parameter and buffer storages of all agents, each once
    trainable_bytes: int  # distinct trainable parameters (full weights, or the adapters)
    optimizer_bytes: int  # optimizer state tensors (each agent has its own)
    unshared_weight_bytes: int  # the weights if every agent held its own copy

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.optimizer_bytes


def _storage_key(t: torch.Tensor) -> tuple[str, int]:
    return (str(t.device), t.untyped_storage().data_ptr())


def _distinct_bytes(tensors: Iterable[torch.Tensor], seen: dict[tuple[str, int], int]) -> int:
    added = 0
    for t in tensors:
        key = _storage_key(t)
        if key not in seen:
            seen[key] = t.untyped_storage().nbytes()
            added += seen[key]
    return added


def _model_tensors(model: Any) -> list[torch.Tensor]:
    return [*model.parameters(), *model.buffers()]


def _optimizer_tensors(optimizer: Any) -> list[torch.Tensor]:
    return [v for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]


def team_memory(models: Sequence[Any], optimizers: Sequence[Any] = ()) -> TeamMemory:
    """Account the weights of ``models`` (one per agent, shared objects allowed) and ``optimizers``."""
    seen: dict[tuple[str, int], int] = {}
    weight_bytes = _distinct_bytes((t for m in models for t in _model_tensors(m)), seen)
    trainable_seen: dict[tuple[str, int], int] = {}
    trainable = _distinct_bytes((p for m in models for p in m.parameters() if p.requires_grad), trainable_seen)
    optimizer_seen: dict[tuple[str, int], int] = {}
    optimizer_bytes = _distinct_bytes((t for o in optimizers for t in _optimizer_tensors(o)), optimizer_seen)
    unshared = sum(_distinct_bytes(_model_tensors(m), {}) for m in models)
    return TeamMemory(weight_bytes, trainable, optimizer_bytes, unshared)
