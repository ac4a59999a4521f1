"""CoMLRL's ``comlrl.trainers.preference.collaboration``: one joint policy's text at the environment
boundary (:class:`CentralizedCollaboration`, CoopLab's) and the log-probability of a joint response."""

from __future__ import annotations

from typing import Any

import torch

from engine.comlrl.utils.distributed import unwrap_model
from engine.comlrl.utils.tokenizer_utils import apply_tokenizer_specials
from engine.preference.centralized import CentralizedCollaboration

__all__ = ["CentralizedCollaboration", "joint_sequence_log_prob"]


def joint_sequence_log_prob(agent: Any, tokenizer: Any, prompt_ids: torch.Tensor,
                            completion_ids: torch.Tensor) -> torch.Tensor:
    """The summed log-probability of a joint response after ``prompt_ids``, every role's tokens
    scored with the earlier ones in context, in one forward in training mode (as CoMLRL computes its
    joint policy gradient). ``completion_ids`` ends at its first pad token (kept when pad is eos); an
    empty response scores 0 (a leaf that needs no gradient)."""
    model = unwrap_model(agent)
    device = next(model.parameters()).device
    apply_tokenizer_specials(tokenizer, [model])
    prompt_ids = prompt_ids.to(device).clone()  # sampled in inference mode: autograd needs plain tensors
    completion_ids = completion_ids.to(device).clone()
    pad_id = tokenizer.pad_token_id
    if pad_id is not None:
        pads = (completion_ids == pad_id).nonzero()
        if pads.numel():
            end = int(pads[0].item()) + (1 if pad_id == tokenizer.eos_token_id else 0)
            completion_ids = completion_ids[:end]
    if not completion_ids.numel():
        return torch.zeros((), device=device, requires_grad=True)
    if not prompt_ids.numel():
        raise ValueError("Centralized training requires a non-empty tokenized prompt.")
    model.train()
    input_ids = torch.cat([prompt_ids, completion_ids[:-1]]).unsqueeze(0)
    logits = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), use_cache=False).logits
    scored = logits[0, prompt_ids.numel() - 1:].float().log_softmax(-1)
    return scored.gather(1, completion_ids[:, None]).sum()
