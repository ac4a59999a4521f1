"""CoMLRL's ``comlrl.utils.reference_kl``: reference models and the k3 KL to them.

CoopLab's trainers keep the reference models themselves (``trainer.reference_models``); these are the
helpers a CoMLRL script may call directly.

Their ``args`` is whatever the script passes, as in CoMLRL: a config of any trainer (CoMLRL's
preference configs have no reference KL), an ``argparse.Namespace``, a ``SimpleNamespace``. So they
read each setting with CoMLRL's default when it is absent (``getattr(args, name, default)``: enabled
False, coefficient 0.1, devices None) rather than through a config class; CoopLab's own code reads its
typed configs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from engine.comlrl.schedulers.device_scheduler import DeviceScheduler
from engine.comlrl.utils.distributed import unwrap_model
from engine.comlrl.utils.model_loading import freeze_model
from engine.trainer.losses import k3_kl


def reference_kl_enabled(args: Any) -> bool:
    return bool(getattr(args, "reference_kl_enabled", False))


def reference_kl_coef(args: Any) -> float:
    return float(getattr(args, "reference_kl_coef", 0.1))


def validate_reference_kl_config(args: Any, expected_count: int) -> None:
    """A non-negative coefficient, and 1 or ``expected_count`` reference devices."""
    if reference_kl_coef(args) < 0:
        raise ValueError("reference_kl_coef must be >= 0.")
    devices = getattr(args, "reference_devices", None)
    if reference_kl_enabled(args) and devices is not None:
        DeviceScheduler.resolve_devices(devices, expected_count, kind="reference_devices")


def resolve_reference_devices(args: Any, fallback_devices: Sequence[torch.device],
                              expected_count: int) -> list[torch.device]:
    """``args.reference_devices`` (1 or ``expected_count`` entries), else ``fallback_devices``."""
    devices = getattr(args, "reference_devices", None)
    if devices is None:
        return list(fallback_devices)
    return DeviceScheduler.resolve_devices(devices, expected_count, kind="reference_devices")


def clone_reference_models(policy_models: Sequence[Any], *, devices: Sequence[torch.device]) -> list[Any]:
    """A frozen copy of each policy model on its device."""
    return [freeze_model(copy.deepcopy(model).to(devices[i])) for i, model in enumerate(policy_models)]


def load_reference_models_from_sources(model_sources: Sequence[str], *, devices: Sequence[torch.device],
                                       model_kwargs: Mapping[str, Any] | None = None) -> list[Any]:
    """A frozen model loaded from each id or folder, on its device."""
    from transformers import AutoModelForCausalLM

    models: list[Any] = [AutoModelForCausalLM.from_pretrained(source, **dict(model_kwargs or {}))
                         for source in model_sources]
    return [freeze_model(model.to(devices[i])) for i, model in enumerate(models)]


def response_token_logprobs(model: Any, sequences: torch.Tensor, attention_mask: torch.Tensor, prompt_len: int,
                            response_len: int) -> torch.Tensor:
    """Log-probs of the ``response_len`` tokens after the first ``prompt_len`` of each sequence."""
    module = unwrap_model(model)
    logits = module(input_ids=sequences, attention_mask=attention_mask, return_dict=True).logits
    token_logps = torch.log_softmax(logits[:, :-1, :], dim=-1).gather(-1, sequences[:, 1:].unsqueeze(-1)).squeeze(-1)
    start = max(int(prompt_len) - 1, 0)
    return token_logps[:, start:start + int(response_len)]


def reference_kl_for_sequence(policy_model: Any, reference_model: Any, sequences: torch.Tensor,
                              attention_mask: torch.Tensor, prompt_len: int, response_len: int) -> torch.Tensor:
    """The k3 estimate of KL(policy || reference) summed over the response tokens, one per sequence (on
    the CPU, no gradients); both models' training modes are restored."""
    policy, reference = unwrap_model(policy_model), unwrap_model(reference_model)
    policy_device = next(policy.parameters()).device
    reference_device = next(reference.parameters()).device
    modes = policy.training, reference.training
    policy.eval()
    reference.eval()
    try:
        with torch.no_grad():
            policy_logps = response_token_logprobs(policy, sequences.to(policy_device), attention_mask.to(policy_device),
                                                   prompt_len, response_len).to(reference_device)
            reference_logps = response_token_logprobs(reference, sequences.to(reference_device),
                                                      attention_mask.to(reference_device), prompt_len, response_len)
            kl = k3_kl(policy_logps, reference_logps)
    finally:
        policy.train(modes[0])
        reference.train(modes[1])
    return kl.sum(dim=-1).detach().cpu()
