"""LoRA adapters per agent (opt-in, needs the ``peft`` extra): several agents on one frozen base.

- :mod:`engine.lora.adapters`: wrap an agent's model in a LoRA adapter; agents that share weights get
  one frozen base (its tensors exist once) and an adapter each; the untouched base is kept as the
  reference model of the KL penalty.
- :mod:`engine.lora.weights`: what a checkpoint holds (the adapter only for LoRA agents), and the
  merged export (base + adapter folded into plain weights that ``from_pretrained`` loads).
- :mod:`engine.lora.memory`: memory accounting of a team (each tensor counted once).
- :mod:`engine.lora.export`: merged weights from a run's checkpoint (``cooplab export-merged``).
"""

from engine.lora.adapters import (
    LoraSettings,
    PeftMissingError,
    attach_lora,
    frozen_base,
    is_lora,
    lora_settings_of,
    lora_team,
    peft_model_of,
    require_peft,
)
from engine.lora.memory import TeamMemory, team_memory
from engine.lora.weights import checkpoint_weights, load_checkpoint_weights, merged_model, save_agent_export

__all__ = [
    "LoraSettings",
    "PeftMissingError",
    "TeamMemory",
    "attach_lora",
    "checkpoint_weights",
    "frozen_base",
    "is_lora",
    "load_checkpoint_weights",
    "lora_settings_of",
    "lora_team",
    "merged_model",
    "peft_model_of",
    "require_peft",
    "save_agent_export",
    "team_memory",
]
