"""CoopLab's actor-critic value heads and critics under CoMLRL's names, and CoMLRL's save layout.

CoMLRL 1.4.3 wraps a critic as ``CausalLMWithValueHead``: ``.model`` (the language model) and
``.value_head``, whose state dict names ``pre_projection.0`` (the optional hidden layer, then Tanh)
and ``value_projection`` (the output layer). CoopLab's critic
(:class:`engine.actor_critic.critics.ValueCritic`) holds a backbone and a head whose layers are
``net.0`` [``net.1`` Tanh, ``net.2``]. :class:`ValueHeadView` and :class:`CriticView` show CoopLab's
objects (and :class:`ActorView` an actor) under CoMLRL's names; a state dict saved or loaded through
them uses CoMLRL's keys, so a
``value_head.pt`` CoMLRL wrote loads into CoopLab's head and the other way round.

:func:`save_comlrl_layout` writes what CoMLRL's ``save_model`` writes: per agent ``agent_{i}/``
(the model and its tokenizer; for IAC with one agent, the folder itself) with ``value_head.pt`` when
the head sits on the actor, IAC's critics in ``agent_{i}/critic/`` and MAAC's shared critic in
``critic/`` (``save_pretrained`` of the critic's model plus ``value_head.pt``, and its tokenizer).
CoopLab's critic keeps the transformer without a language-model head, so a critic folder loaded as
a causal LM gets a new, unused LM head (transformers reports ``lm_head`` missing).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn


def _names(head: Any) -> dict[str, str]:
    """CoopLab's layer prefix -> CoMLRL's, for ``head`` (``net`` = [Linear] or [Linear, Tanh, Linear])."""
    layers = list(head.net)
    if len(layers) == 1:
        return {"net.0.": "value_projection."}
    return {"net.0.": "pre_projection.0.", f"net.{len(layers) - 1}.": "value_projection."}


def comlrl_head_state(head: Any) -> dict[str, torch.Tensor]:
    """``head``'s state dict with CoMLRL's keys."""
    names = _names(head)
    out = {}
    for key, value in head.state_dict().items():
        prefix = next(p for p in names if key.startswith(p))
        out[names[prefix] + key[len(prefix):]] = value
    return out


def cooplab_head_state(head: Any, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A CoMLRL value-head state dict with ``head``'s own keys; ValueError naming a key that does not
    fit (a head with or without the hidden layer, as ``value_head_hidden_dim`` says)."""
    back = {comlrl: cooplab for cooplab, comlrl in _names(head).items()}
    out = {}
    for key, value in state.items():
        prefix = next((p for p in back if key.startswith(p)), None)
        if prefix is None:
            raise ValueError(f"value head state: {key!r} is not one of this head's layers ({sorted(back)}); was it "
                             f"saved with another value_head_hidden_dim?")
        out[back[prefix] + key[len(prefix):]] = value
    return out


class ValueHeadView:
    """A CoopLab value head as CoMLRL's ``ValueHead``: ``state_dict``/``load_state_dict`` with CoMLRL's
    keys, ``pre_projection`` and ``value_projection``; called, it is the head."""

    def __init__(self, head: Any) -> None:
        self.head = head

    def state_dict(self) -> dict[str, torch.Tensor]:
        return comlrl_head_state(self.head)

    def load_state_dict(self, state: Mapping[str, torch.Tensor], strict: bool = True) -> Any:
        return self.head.load_state_dict(cooplab_head_state(self.head, state), strict=strict)

    def parameters(self) -> Iterator[nn.Parameter]:
        return self.head.parameters()

    @property
    def pre_projection(self) -> nn.Module | None:
        layers = list(self.head.net)
        return nn.Sequential(*layers[:2]) if len(layers) > 1 else None

    @property
    def value_projection(self) -> nn.Module:
        return self.head.net[-1]

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.head(hidden)


class ActorView:
    """An actor as CoMLRL's ``CausalLMWithValueHead``: ``.model`` (the agent's model) and ``.value_head``
    (:class:`ValueHeadView` of IAC's head on the actor, ``use_separate_critic=False``; else None).
    Every other attribute, and a call, is the model's."""

    def __init__(self, model: Any, head: Any) -> None:
        self.model = model
        self.value_head = ValueHeadView(head) if head is not None else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.model(*args, **kwargs)


class CriticView:
    """A CoopLab critic as CoMLRL's ``CausalLMWithValueHead``: ``.model`` (the critic's transformer;
    CoopLab's critic keeps no language-model head) and ``.value_head`` (:class:`ValueHeadView`).
    Everything else is the critic's."""

    def __init__(self, critic: Any) -> None:
        self.critic = critic

    @property
    def model(self) -> nn.Module:
        return self.critic.backbone

    @property
    def value_head(self) -> ValueHeadView:
        return ValueHeadView(self.critic.head)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.critic, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.critic(*args, **kwargs)


def save_critic(critic: Any, folder: Path) -> None:
    """CoMLRL's critic folder: the critic's model (``save_pretrained``) and ``value_head.pt``; plus the
    critic's tokenizer (CoopLab's critic reads text with its own), so the folder loads as a critic."""
    folder.mkdir(parents=True, exist_ok=True)
    critic.backbone.save_pretrained(folder)
    if getattr(critic, "tokenizer", None) is not None:
        critic.tokenizer.save_pretrained(folder)
    torch.save(comlrl_head_state(critic.head), folder / "value_head.pt")


def save_comlrl_layout(engine: Any, output_dir: str | Path, *, shared_critic: bool) -> None:
    """Write ``engine``'s actors, heads and critics in CoMLRL's ``save_model`` layout (module docstring).
    ``shared_critic``: MAAC's one critic in ``critic/``; else IAC's, one per agent."""
    from engine.lora.weights import save_agent_export

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    flat = not shared_critic and len(engine.agents) == 1  # CoMLRL's IAC writes a single agent into the folder
    folders = [out if flat else out / f"agent_{agent.index}" for agent in engine.agents]
    for agent, folder in zip(engine.agents, folders, strict=True):
        save_agent_export(agent.model, agent.tokenizer, folder)
    for folder, head in zip(folders, engine.value_heads, strict=False):
        torch.save(comlrl_head_state(head), folder / "value_head.pt")
    if shared_critic:
        for critic in engine.critics[:1]:
            save_critic(critic, out / "critic")
    else:
        for folder, critic in zip(folders, engine.critics, strict=False):
            save_critic(critic, folder / "critic")
