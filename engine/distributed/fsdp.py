"""One agent sharded over its ranks with FSDP2, and one policy-gradient update of the ranks' rollouts.

:func:`shard_agent` applies ``torch.distributed.fsdp.fully_shard`` to each decoder layer and then to
the model (the root: embeddings, final norm, head), over a one-dimensional device mesh of the agent's
ranks; with ``mixed_precision`` the layers compute in bfloat16 and reduce gradients in float32 (the
sharded parameters, their gradients and AdamW's moments stay float32); ``cpu_offload`` keeps them on
the host; ``checkpointing`` turns on the model's activation checkpointing.

:func:`update_step` runs one optimizer step of an agent on the samples of the groups this rank holds
(:mod:`engine.distributed.groups`): the loss is the trainer's (:func:`engine.trainer.losses.policy_loss`,
a mean over sequences) scaled by :func:`engine.distributed.groups.loss_scale`, so FSDP's mean of the
ranks' gradients is the gradient of the whole batch, and the step equals the single-process step on
the same batch (tested on two gloo ranks). Agents of different models each have their own mesh
(the same ranks or others) and their own step; the team's rewards and advantages are computed once
per joint action on the rank that holds the group.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

from engine.distributed.groups import loss_scale
from engine.trainer.losses import policy_loss, token_logprobs


def agent_mesh(ranks: Sequence[int] | None = None, device_type: str = "cpu") -> DeviceMesh:
    """A one-dimensional mesh over ``ranks`` (None: every rank of the default process group)."""
    if ranks is None:
        return init_device_mesh(device_type, (torch.distributed.get_world_size(),))
    return DeviceMesh(device_type, list(ranks))


def decoder_layers(model: Any) -> Sequence[torch.nn.Module]:
    """The decoder layers of a Hugging Face causal LM (``model.model.layers``, GPT-2's ``transformer.h``)."""
    for path in (("model", "layers"), ("transformer", "h"), ("model", "decoder", "layers")):
        node = model
        for name in path:
            node = getattr(node, name, None)
        if isinstance(node, torch.nn.ModuleList):
            return list(node)
    raise ValueError(f"{type(model).__name__}: no decoder layers found (model.layers or transformer.h); "
                     "FSDP sharding needs a decoder-only Hugging Face model")


def shard_agent(model: Any, mesh: DeviceMesh, *, mixed_precision: bool = False, cpu_offload: bool = False,
                checkpointing: bool = False) -> Any:
    """Shard ``model`` in place over ``mesh``: each decoder layer is a unit, the root holds the rest."""
    if checkpointing:  # the trainer's way (gradient_checkpointing), before the layers are wrapped
        enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
        enable()
        if hasattr(model.config, "use_cache"):
            model.config.use_cache = False
    options: dict[str, Any] = {"mesh": mesh}
    if mixed_precision:
        options["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    if cpu_offload:
        # pinned host memory needs an accelerator: on a CPU mesh (gloo tests) the states are not pinned
        options["offload_policy"] = CPUOffloadPolicy(pin_memory=mesh.device_type != "cpu")
    for layer in decoder_layers(model):
        fully_shard(layer, **options)
    fully_shard(model, **options)
    return model


@dataclass
class Sample:
    """One completion of an agent with its advantage."""

    prompt_ids: list[int]
    completion_ids: list[int]
    advantage: float
    ref_logps: torch.Tensor | None = None  # (T,) the reference model's, for the KL as a loss term


def completion_logprobs(model: Any, samples: Sequence[Sample], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(logps, mask)`` of the completion tokens, (B, T) right-padded, prompts left-padded to one width."""
    prompt_width = max(len(s.prompt_ids) for s in samples)
    width = max(len(s.completion_ids) for s in samples)
    ids, attention = [], []
    for s in samples:
        left = prompt_width - len(s.prompt_ids)
        right = width - len(s.completion_ids)
        ids.append([pad_id] * left + s.prompt_ids + s.completion_ids + [pad_id] * right)
        attention.append([0] * left + [1] * (len(s.prompt_ids) + len(s.completion_ids)) + [0] * right)
    device = next(iter(model.parameters())).device
    input_ids = torch.tensor(ids, device=device)
    mask = torch.tensor(attention, device=device)
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    logits = model(input_ids=input_ids, attention_mask=mask, position_ids=positions).logits
    logits = logits[:, prompt_width - 1:prompt_width - 1 + width]
    targets = input_ids[:, prompt_width:prompt_width + width]
    return token_logprobs(logits, targets), mask[:, prompt_width:prompt_width + width]


def grad_norm_clipped(model: Any, max_grad_norm: float | None) -> float:
    """The norm of the whole gradient of ``model`` over every rank, after clipping it to ``max_grad_norm``
    (None: measured, not clipped). Under FSDP2 each gradient is a DTensor sharded over the mesh, and
    ``clip_grad_norm_`` reduces the shards' norms over the mesh (a collective: every rank calls it), so
    the norm and the clipping factor are the whole gradient's, the same on every rank and equal to the
    single-process ones (tested on two gloo ranks with the clip binding)."""
    norm = torch.nn.utils.clip_grad_norm_(list(model.parameters()),
                                          max_grad_norm if max_grad_norm is not None else float("inf"))
    whole = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
    return float(whole)


@torch.no_grad()
def score_samples(model: Any, samples: Sequence[Sample], pad_id: int) -> list[torch.Tensor]:
    """Each sample's completion log-probs under ``model`` (eval mode, no gradients), ``(T,)`` float32 on the
    CPU. One forward of all of ``samples``: collective for a sharded model, so every rank calls it once per
    model, whatever its number of samples; the model is resharded afterwards (FSDP2 keeps the root gathered
    after a forward without a backward, :mod:`engine.distributed.rollouts`)."""
    was_training = model.training
    model.eval()
    try:
        logps, _ = completion_logprobs(model, samples, pad_id)
    finally:
        model.train(was_training)
        if hasattr(model, "reshard"):
            model.reshard()
    rows = logps.float().cpu()
    return [rows[i, :len(s.completion_ids)].clone() for i, s in enumerate(samples)]


def update_step(model: Any, optimizer: torch.optim.Optimizer, samples: Sequence[Sample], *, total_rows: int,
                world: int, pad_id: int, loss_type: str = "seq_sum", max_grad_norm: float | None = None,
                kl_coef: float = 0.0) -> tuple[float, float]:
    """One optimizer step on this rank's ``samples`` of a batch of ``total_rows`` over ``world`` ranks;
    returns this rank's scaled loss and the whole gradient's norm before clipping (:func:`grad_norm_clipped`).
    Every rank must call it (the gathers and reductions are collective). A non-finite norm raises on
    every rank alike (the norm is the same on all) before the optimizer steps. ``kl_coef`` > 0 adds the
    k3 KL to the samples' ``ref_logps`` as a loss term (``reference_kl_mode: loss``)."""
    if not samples:
        raise ValueError("every rank needs at least one group of samples per step; give at least as many "
                         "prompts per step as ranks")
    optimizer.zero_grad(set_to_none=True)
    logps, mask = completion_logprobs(model, samples, pad_id)
    advantages = torch.tensor([s.advantage for s in samples], dtype=torch.float32, device=logps.device)
    ref = None
    if kl_coef > 0:
        ref = torch.zeros_like(logps)  # (B, T): the padding is masked out of the KL
        for row, s in enumerate(samples):
            if s.ref_logps is None:
                raise ValueError("a KL loss term needs every sample's reference log-probs (score_samples)")
            ref[row, :len(s.completion_ids)] = s.ref_logps.to(ref.device, ref.dtype)
    loss, _ = policy_loss(logps, mask, advantages, loss_type=loss_type, ref_logps=ref, kl_coef=kl_coef)
    scaled = loss * loss_scale(len(samples), total_rows, world)
    scaled.backward()
    norm = grad_norm_clipped(model, max_grad_norm)
    if not math.isfinite(norm):
        raise FloatingPointError(f"the gradient norm is {norm} (non-finite); check the rewards' scale, lower "
                                 "agent_learning_rate or set max_grad_norm")
    optimizer.step()
    return float(scaled.detach()), norm


def local_bytes(model: Any, optimizer: torch.optim.Optimizer) -> tuple[int, int]:
    """``(parameter bytes, optimizer-state bytes)`` this rank holds: the local shards of sharded tensors."""
    def size(t: torch.Tensor) -> int:
        local = t.to_local() if hasattr(t, "to_local") else t
        return local.numel() * local.element_size()

    params = sum(size(p) for p in model.parameters())
    states = sum(size(v) for state in optimizer.state.values() for v in state.values()
                 if isinstance(v, torch.Tensor) and v.dim() > 0)
    return params, states


def full_state(model: Any) -> dict[str, torch.Tensor]:
    """Every parameter gathered whole (a collective: every rank calls it), on the CPU."""
    out = {}
    for name, p in model.named_parameters():
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        out[name] = full.detach().cpu().clone()
    return out
