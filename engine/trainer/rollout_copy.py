"""A copy of an agent's weights in another dtype to sample from (``rollout_dtype``).

Sampling a small batch reads every weight once per token, so on a CPU with bfloat16 instructions
(AVX512-BF16, AMX) or on a GPU, a bfloat16 copy samples faster than the float32 weights being
trained. Before each sampling call the copy takes in what changed since the last call: every
weight after a step of an optimizer it watches (torch's fused AdamW leaves the version counters
alone), and any parameter or buffer written in place otherwise (a ``load_state_dict``, a resume:
their version counters moved). Training, the update's log-probs and checkpoints stay in the
model's own dtype.

The samples then come from the rounded policy. The log-probs the sampler returns are the copy's,
so with ``clip_epsilon`` the update's ratio ``exp(log p - old log p)`` is the importance ratio of
the trained policy against the one that sampled (not exactly 1 on the first pass).
"""

from __future__ import annotations

import copy
import logging
import sys
from collections.abc import Sequence
from typing import Any

import torch

from engine.lora.adapters import is_lora
from engine.schema.algorithms import POLICY_GRADIENT_CONFIGS, TrainerConfig
from engine.trainer.agents import AgentRuntime

log = logging.getLogger("cooplab.sampling")


class RolloutCopy:
    """The sampling copy of one model object (agents that share the model share the copy)."""

    def __init__(self, source: torch.nn.Module, dtype: torch.dtype) -> None:
        if is_lora(source):
            raise ValueError(
                "rollout_dtype: LoRA agents sample from their adapters on the frozen base; a copy in another "
                "dtype is not supported for them. Leave rollout_dtype empty, or set torch_dtype for the whole model"
            )
        self.source = source
        self.dtype = dtype
        self.model = copy.deepcopy(source)
        for param in self.model.parameters():  # buffers (rotary frequencies) keep their dtype, as from_pretrained
            param.data = param.data.to(dtype)
        self.model.eval()
        self.model.requires_grad_(False)
        self._pairs = list(zip(_tensors(source), _tensors(self.model), strict=True))
        self._versions = [src._version for src, _ in self._pairs]
        self._stepped = False
        self.tensors_copied = 0  # how many tensors refreshes have copied in (tests, diagnostics)

    def watch(self, optimizer: torch.optim.Optimizer) -> None:
        """Refresh every weight before the next sampling call whenever ``optimizer`` steps."""
        optimizer.register_step_post_hook(self._after_step)

    def _after_step(self, *_: Any) -> None:
        self._stepped = True

    def refreshed(self) -> torch.nn.Module:
        """The copy, after copying in every source tensor that changed since the last refresh."""
        with torch.no_grad():
            for i, (src, dst) in enumerate(self._pairs):
                if self._stepped or src._version != self._versions[i]:
                    dst.copy_(src)
                    self._versions[i] = src._version
                    self.tensors_copied += 1
        self._stepped = False
        return self.model


def _tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    """Parameters then buffers, each once (tied weights appear once), in a fixed order."""
    seen: set[int] = set()
    out: list[torch.Tensor] = []
    for tensor in [*model.parameters(), *model.buffers()]:
        if id(tensor) not in seen:
            seen.add(id(tensor))
            out.append(tensor)
    return out


def native_bfloat16(device: torch.device) -> bool:
    """Whether ``device`` computes bfloat16 natively: a GPU that supports it, or a CPU whose flags list
    AVX512-BF16 or AMX-BF16 (read from ``/proc/cpuinfo``; elsewhere False, so sampling stays float32)."""
    if device.type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device.type != "cpu":
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def configured_rollout_dtype(config: TrainerConfig) -> str | None:
    """The ``rollout_dtype`` a trainer config asks for, ``auto`` dropped when an inference engine
    samples (``rollout_backend`` other than ``hf``: it samples in the model's own dtype)."""
    setting = config.rollout_dtype
    if setting == "auto" and config.rollout_backend != "hf":
        return None
    return setting


def choose_rollout_dtype(model: torch.nn.Module, rollout_dtype: str | None) -> tuple[str | None, str]:
    """The dtype ``model`` samples in (None: its own weights) and why, for ``rollout_dtype``."""
    weights = next(model.parameters())
    own = str(weights.dtype).removeprefix("torch.")
    if rollout_dtype is None:
        return None, f"rollout_dtype is empty: sampling from the {own} weights"
    if rollout_dtype != "auto":
        return rollout_dtype, f"rollout_dtype is {rollout_dtype}"
    if is_lora(model):
        return None, f"LoRA adapters sample on their frozen base: sampling from the {own} weights"
    if weights.dtype != torch.float32:
        return None, f"the weights are {own} already"
    device = weights.device
    if not native_bfloat16(device):
        return None, f"{device.type} has no native bfloat16: sampling from the float32 weights"
    where = "this GPU computes bfloat16" if device.type == "cuda" else "this CPU has bfloat16 instructions"
    return "bfloat16", f"rollout_dtype auto: {where}"


def rollout_copy_for(model: torch.nn.Module, rollout_dtype: str | None, copies: dict[int, Any]) -> RolloutCopy | None:
    """The sampling copy of ``model`` for ``rollout_dtype`` (one per model object, kept in ``copies``);
    None when unset, when ``auto`` chooses none (:func:`choose_rollout_dtype`) or when the model
    already has that dtype."""
    from engine.models.loading import resolve_dtype  # transformers, only when a copy is asked for

    chosen, _ = choose_rollout_dtype(model, rollout_dtype)
    if chosen is None:
        return None
    dtype = resolve_dtype(chosen)
    if next(model.parameters()).dtype == dtype:
        return None
    if id(model) not in copies:
        copies[id(model)] = RolloutCopy(model, dtype)
    return copies[id(model)]


def corrects_sampler(agent: AgentRuntime, rollout_correction: str) -> bool:
    """Whether ``agent``'s update weights its tokens by truncated importance sampling: ``tis`` always
    (where the sampler kept its log-probs), ``auto`` when the agent samples from a copy in another
    dtype than the weights it trains (``rollout_dtype``), ``none`` never."""
    if rollout_correction == "tis":
        return True
    if rollout_correction != "auto" or agent.rollout_copy is None:
        return False
    trained = next((p.dtype for p in agent.model.parameters() if p.is_floating_point()), None)
    return agent.rollout_copy.dtype != trained


# -- the start-up lines that say how each agent samples: which dtype, why, and whether the update
#    is corrected for it (rollout_dtype, rollout_correction) ------------------------------------------
def sampling_notes(agents: Sequence[Any], config: TrainerConfig) -> list[str]:
    """One line per agent: the dtype it samples in and why, and the rollout correction it gets (none
    where the algorithm has no rollout_correction: actor-critic and MADPO)."""
    setting = configured_rollout_dtype(config)
    correction = config.rollout_correction if isinstance(config, POLICY_GRADIENT_CONFIGS) else "none"
    lines = []
    for agent in agents:
        own = str(next(agent.model.parameters()).dtype).removeprefix("torch.")
        _, why = choose_rollout_dtype(agent.model, setting)
        if agent.rollout_copy is None:
            what = f"samples from its {own} weights"
        else:
            what = f"samples from a {str(agent.rollout_copy.dtype).removeprefix('torch.')} copy of its {own} weights"
        fixed = (f"; the update weights each token by truncated importance sampling (tis_cap "
                 f"{config.tis_cap:g})"
                 if isinstance(config, POLICY_GRADIENT_CONFIGS) and corrects_sampler(agent, correction) else "")
        lines.append(f"sampling: agent {agent.name!r} {what} ({why}){fixed}")
    return lines


def announce(lines: Sequence[str]) -> None:
    """Log ``lines`` (a job's run log has a handler); with no logging set up, print them to stderr."""
    for line in lines:
        if logging.getLogger().handlers or log.handlers:
            log.info(line)
        else:
            print(line, file=sys.stderr, flush=True)
