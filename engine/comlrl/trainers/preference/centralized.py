"""CoMLRL's ``comlrl.trainers.preference.centralized``: the protocol of a model that writes every
role (build one joint prompt, split a joint completion), with its tagged default."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from engine.preference.centralized import CentralizedComparatorParseError, TaggedCentralizedComparatorAdapter

__all__ = ["CentralizedComparatorAdapter", "CentralizedComparatorParseError", "TaggedCentralizedComparatorAdapter"]


class CentralizedComparatorAdapter(Protocol):
    """Domain prompt and parser shared by centralized comparators and actors."""

    def build_prompt(self, batch_item: dict[str, Any], agent_prompts: Sequence[str]) -> str:
        """One prompt asking a policy to produce every agent's output."""

    def parse_completion(self, completion: str, batch_item: dict[str, Any], num_agents: int) -> Sequence[str]:
        """One centralized completion split into the agents' outputs."""
