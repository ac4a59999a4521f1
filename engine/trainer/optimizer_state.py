"""AdamW's state allocated when the optimizer is made, not inside the first ``step()``.

torch creates each parameter's moment buffers (two tensors the size of the weights) and step counter
lazily, in the first ``step()``: on a real model that first training step pays for allocating and
zeroing two extra copies of the trainable weights per agent (about 1 GB for SmolLM2-135M in float32),
and its time and memory jump. :func:`allocate_adam_state` creates exactly what torch would create
(same dtypes, devices, zeros), so every later step computes the same numbers bit for bit, and the
allocation happens while the trainer is built.
"""

from __future__ import annotations

import torch


def _step_counter(param: torch.Tensor, group: dict) -> torch.Tensor:
    """The ``step`` tensor torch's Adam/AdamW makes: on the parameter's device for fused or capturable
    groups (float32), else a CPU scalar of the default float dtype's precision."""
    if group.get("fused") or group.get("capturable"):
        return torch.zeros((), dtype=torch.float32, device=param.device)
    dtype = torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32
    return torch.tensor(0.0, dtype=dtype, device="cpu")


def allocate_adam_state(optimizer: torch.optim.Optimizer) -> None:
    """Create the lazily made state of every parameter of an Adam/AdamW ``optimizer`` that has none."""
    if not isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW):
        raise TypeError(f"allocate_adam_state: expected Adam or AdamW, got {type(optimizer).__name__}")
    for group in optimizer.param_groups:
        for param in group["params"]:
            state = optimizer.state[param]
            if state:
                continue
            state["step"] = _step_counter(param, group)
            state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
            if group.get("amsgrad"):
                state["max_exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
