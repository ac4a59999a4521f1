"""What a checkpoint holds for an agent, and what its export is.

A LoRA agent's checkpoint is its adapter only (the frozen base comes from the run config's model
source, unchanged); any other model's checkpoint is every weight, as before. The export of a LoRA
agent is its merged weights (base + alpha/r * B A folded in, on a copy: the shared base is left
untouched), loadable with ``AutoModelForCausalLM.from_pretrained``, plus the adapter alone under
``adapter/`` (loadable with ``peft.PeftModel.from_pretrained`` on the base).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, load_model, save_file, save_model

from engine.lora.adapters import _BASE_ATTRIBUTE, _PEFT_ATTRIBUTE, frozen_base, is_lora, peft_model_of

ADAPTER_FOLDER = "adapter"


def _adapter_names(model: Any) -> list[str]:
    return [name for name, p in model.named_parameters() if p.requires_grad]


def checkpoint_weights(model: Any) -> dict[str, torch.Tensor]:
    """Copies of the weights a checkpoint keeps: a LoRA agent's adapter, else every weight."""
    state = model.state_dict()
    names = _adapter_names(model) if is_lora(model) else list(state)
    return {name: state[name].detach().clone() for name in names}


def load_checkpoint_weights(model: Any, weights: dict[str, torch.Tensor]) -> None:
    """Put :func:`checkpoint_weights` back; a LoRA agent's adapter must match exactly (no more, no less)."""
    if not is_lora(model):
        model.load_state_dict(weights)
        return
    expected = set(_adapter_names(model))
    if set(weights) != expected:
        missing, extra = sorted(expected - set(weights)), sorted(set(weights) - expected)
        raise ValueError(f"the checkpoint's adapter does not match this agent's (missing {missing[:3]}, "
                         f"unexpected {extra[:3]}); was it written with other lora settings?")
    model.load_state_dict(weights, strict=False)


def save_weights_file(model: Any, path: str | Path) -> None:
    """Write a checkpoint's weights file (safetensors): the adapter of a LoRA agent, else all weights."""
    if is_lora(model):
        save_file({k: v.contiguous() for k, v in checkpoint_weights(model).items()}, str(path))
    else:
        save_model(model, str(path))  # drops the duplicates of tied tensors


def load_weights_file(model: Any, path: str | Path) -> None:
    """Read a file written by :func:`save_weights_file` into ``model`` on its device."""
    device = str(next(model.parameters()).device)
    if is_lora(model):
        load_checkpoint_weights(model, load_file(str(path), device=device))
    else:
        load_model(model, str(path), device=device)


def merged_model(model: Any) -> Any:
    """A plain model with the adapter folded into a copy of the weights (``model`` itself otherwise)."""
    wrapper = peft_model_of(model)
    if wrapper is None:
        return model
    base = frozen_base(model)
    clone = copy.deepcopy(wrapper, {id(base): base} if base is not None else {})  # never copy the reference
    merged = clone.merge_and_unload()
    for name in (_BASE_ATTRIBUTE, _PEFT_ATTRIBUTE):
        merged.__dict__.pop(name, None)
    return merged


def save_agent_export(model: Any, tokenizer: Any, folder: str | Path) -> None:
    """Write one agent's final model to ``folder`` (``save_pretrained`` format; see the module docstring)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if is_lora(model):
        merged = merged_model(model)
        merged.save_pretrained(folder)
        peft_model_of(model).save_pretrained(folder / ADAPTER_FOLDER)
        del merged
    else:
        model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
