"""LoRA adapters on agents' models, with one frozen base for agents that share weights.

``attach_lora(base, settings, seed=...)`` freezes ``base`` and returns a new ``peft`` model whose
modules are a structural copy of ``base`` holding the *same* weight tensors (nothing is copied but
the module objects), with its own adapter. Calling it once per agent on one base gives agents that
share every frozen weight tensor (one copy in memory) and train separate adapters with separate
optimizers. The base itself stays a plain model with frozen weights that equals every agent's model
before training (LoRA's B matrix starts at zero), so the KL penalty uses it as the reference model
instead of a deep copy (:func:`frozen_base`).

peft is an optional dependency (``pip install 'cooplab[lora]'``); :func:`require_peft` raises
:class:`PeftMissingError` with that command when it is missing.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from engine.schema.run_config import AgentSpec

INSTALL_HINT = "install it with `pip install 'cooplab[lora]'` (or `pip install peft`)"
# set with object.__setattr__ on an agent's model: not submodules, so never in parameters() or state_dict()
_BASE_ATTRIBUTE = "_cooplab_frozen_base"
_PEFT_ATTRIBUTE = "_cooplab_peft"


class PeftMissingError(ImportError):
    """LoRA was asked for but the ``peft`` package is not installed."""


def require_peft() -> Any:
    """The ``peft`` module, or :class:`PeftMissingError` naming the install command."""
    try:
        import peft
    except ImportError as exc:
        raise PeftMissingError(f"LoRA (lora_rank) needs the peft package, which is missing: {INSTALL_HINT}") from exc
    return peft


@dataclass(frozen=True)
class LoraSettings:
    """One agent's adapter: rank, alpha, dropout and target modules (None = peft's default)."""

    rank: int
    alpha: float = 16.0
    dropout: float = 0.0
    target_modules: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise ValueError(f"lora_rank: must be >= 1, got {self.rank}")
        if self.alpha <= 0:
            raise ValueError(f"lora_alpha: must be > 0, got {self.alpha}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"lora_dropout: must be in [0, 1), got {self.dropout}")

    def peft_config(self) -> Any:
        """The ``peft.LoraConfig`` of these settings (a causal-LM task)."""
        peft = require_peft()
        targets: Any = list(self.target_modules) if self.target_modules else None
        if targets == ["all-linear"]:
            targets = "all-linear"  # peft's keyword: every linear layer but the output head
        return peft.LoraConfig(r=self.rank, lora_alpha=self.alpha, lora_dropout=self.dropout,
                               target_modules=targets, task_type="CAUSAL_LM", bias="none")


def lora_settings_of(agent: AgentSpec) -> LoraSettings | None:
    """The LoRA settings of a run-config agent (``AgentSpec``), None when it fine-tunes every weight."""
    if agent.lora_rank is None:
        return None
    targets = agent.lora_target_modules
    return LoraSettings(int(agent.lora_rank), float(agent.lora_alpha), float(agent.lora_dropout),
                        tuple(targets) if targets else None)


def peft_model_of(model: Any) -> Any:
    """The ``peft`` model of a LoRA agent (the model itself when it is one), else None."""
    wrapper = getattr(model, _PEFT_ATTRIBUTE, None)
    if wrapper is not None:
        return wrapper
    peft = sys.modules.get("peft")  # a peft model exists only once peft is imported: never import it here
    return model if peft is not None and isinstance(model, peft.PeftModel) else None


def is_lora(model: Any) -> bool:
    """True for a LoRA agent (its trainable weights are its adapters): one built by :func:`attach_lora`,
    or a ``peft`` model passed in by hand."""
    return peft_model_of(model) is not None


def frozen_base(model: Any) -> Any:
    """The frozen plain model under an agent built by :func:`attach_lora` (None for other models)."""
    return getattr(model, _BASE_ATTRIBUTE, None)


def _structural_copy(base: torch.nn.Module) -> torch.nn.Module:
    """New module objects over the same parameter and buffer tensors (the weights are not copied)."""
    memo: dict[int, Any] = {id(t): t for t in base.parameters()}
    memo.update({id(t): t for t in base.buffers()})
    return copy.deepcopy(base, memo)


def attach_lora(base: torch.nn.Module, settings: LoraSettings, *, seed: int = 0) -> Any:
    """A LoRA agent over ``base``'s frozen weights (see the module docstring).

    The agent is the ``transformers`` model with the adapters injected into its projections (peft's
    ``get_base_model()``): its forward is the peft model's, and it keeps the model's own signature
    (``position_ids``, the KV cache, ``logits_to_keep``) that sampling and the shared-prompt forward
    use. :func:`peft_model_of` gives the ``peft`` model (adapter saving, merging).

    The adapter's initial weights depend only on ``seed``; the global RNG is left as it was. A target
    module that ``base`` lacks raises :class:`ValueError` naming the module names it has.
    """
    peft = require_peft()
    if is_lora(base):
        raise ValueError("attach_lora: the model already has LoRA adapters; pass its plain base model")
    base.requires_grad_(False)
    base.eval()
    agent_modules = _structural_copy(base)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            model = peft.get_peft_model(agent_modules, settings.peft_config())
        except ValueError as exc:
            names = sorted({n.rsplit(".", 1)[-1] for n, m in base.named_modules() if isinstance(m, torch.nn.Linear)})
            raise ValueError(f"lora_target_modules: {exc} (linear modules of this model: {names})") from None
    device = next(base.parameters()).device
    model.to(device)  # adapters where the base is (moves nothing else)
    agent = model.get_base_model()
    object.__setattr__(agent, _PEFT_ATTRIBUTE, model)
    object.__setattr__(agent, _BASE_ATTRIBUTE, base)
    return agent


def lora_team(bases: Sequence[torch.nn.Module], settings: Sequence[LoraSettings | None], *,
              seed: int = 0) -> list[Any]:
    """One model per agent: ``bases[i]`` itself when ``settings[i]`` is None (full fine-tuning), else a
    LoRA agent over it. Agents given the same base object share its frozen weights; agent i's
    adapter is seeded with ``seed * 1000 + i``."""
    return [base if s is None else attach_lora(base, s, seed=seed * 1000 + i)
            for i, (base, s) in enumerate(zip(bases, settings, strict=True))]
