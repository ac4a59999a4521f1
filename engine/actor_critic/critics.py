"""Critics: a value head, a critic model (a causal LM's backbone + value head) and the text a
critic reads.

A :class:`ValueCritic` reads text with its own tokenizer (so a critic may be a different model
than the actor) and returns one value per output (one per agent for MAAC's centralised critic) at
the last token. A value head on the actor's own backbone (IAC with ``use_separate_critic=False``)
reads the actor's hidden states instead, see :func:`head_values`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, cast

import torch
from torch import nn

from engine.sampling.sampler import left_pad


class ValueHead(nn.Module):
    """``Linear(H, out)``, or ``Linear(H, hidden) -> Tanh -> Linear(hidden, out)``; small normal init."""

    def __init__(self, hidden_size: int, out_dim: int = 1, hidden_dim: int | None = None) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = hidden_size
        if hidden_dim:
            layers += [nn.Linear(hidden_size, hidden_dim), nn.Tanh()]
            width = hidden_dim
        layers.append(nn.Linear(width, out_dim))
        self.net = nn.Sequential(*layers)
        for layer in self.net:
            if isinstance(layer, nn.Linear):
                nn.init.normal_(layer.weight, std=0.02)
                nn.init.zeros_(layer.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        first = cast(nn.Linear, self.net[0])
        return self.net(hidden.to(first.weight.dtype))


def hidden_size_of(model: Any) -> int:
    """The width of a transformers model's hidden states."""
    model_config = getattr(model, "config", None)  # transformers' config: the field's name varies by architecture
    size = getattr(model_config, "hidden_size", None) or getattr(model_config, "n_embd", None)
    if not size:
        raise ValueError(f"cannot read the hidden size of {type(model).__name__}; its config has no hidden_size")
    return int(size)


def backbone_of(model: Any) -> nn.Module:
    """A causal LM's transformer without its LM head (``model.base_model``), or the model itself."""
    base = getattr(model, "base_model", None)
    return base if isinstance(base, nn.Module) and base is not model else model


class ValueCritic(nn.Module):
    """A critic model: a transformer backbone plus a value head, reading left-padded text."""

    def __init__(self, backbone: nn.Module, tokenizer: Any, *, hidden_size: int, out_dim: int = 1,
                 head_hidden_dim: int | None = None) -> None:
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.head = ValueHead(hidden_size, out_dim, head_hidden_dim)
        param = next(backbone.parameters())
        self.head.to(device=param.device, dtype=torch.float32)

    @classmethod
    def from_causal_lm(cls, model: Any, tokenizer: Any, *, out_dim: int = 1, head_hidden_dim: int | None = None,
                       copy_weights: bool = True, device: torch.device | str | None = None) -> ValueCritic:
        """A critic on (a copy of) a causal LM's backbone. ``copy_weights=False`` adopts the model itself."""
        backbone = backbone_of(model)
        if copy_weights:
            backbone = copy.deepcopy(backbone)
        if device is not None:
            backbone = backbone.to(device)
        backbone.requires_grad_(True)
        backbone.train()
        return cls(backbone, tokenizer, hidden_size=hidden_size_of(model), out_dim=out_dim,
                   head_hidden_dim=head_hidden_dim)

    @property
    def device(self) -> torch.device:
        return next(self.backbone.parameters()).device

    def encode(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Left-padded token ids and attention mask of ``texts`` with the critic's tokenizer."""
        tok = self.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        ids = [tok(text, add_special_tokens=True)["input_ids"] or [pad] for text in texts]
        input_ids, mask = left_pad(ids, int(pad))
        return input_ids.to(self.device), mask.to(self.device)

    def forward(self, texts: Sequence[str]) -> torch.Tensor:
        """Values ``(B, out_dim)`` of ``texts``, read at each text's last token."""
        input_ids, mask = self.encode(texts)
        position_ids = (mask.cumsum(-1) - 1).clamp_min(0)
        out = self.backbone(input_ids=input_ids, attention_mask=mask, position_ids=position_ids, use_cache=False)
        hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        return self.head(hidden[:, -1, :]).float()


def head_values(hidden: torch.Tensor, head: ValueHead, positions: torch.Tensor) -> torch.Tensor:
    """Values of a head on the actor's backbone: ``head(hidden[b, positions[b]])`` -> ``(B,)``."""
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    return head(hidden[rows, positions.to(hidden.device)]).squeeze(-1).float()


def agent_critic_text(prompt: str, completion: str | None) -> str:
    """What an independent critic reads: the history (V), or the history and the reply (Q)."""
    return prompt if completion is None else f"{prompt}{completion}"


def joint_critic_text(prompts: Sequence[str], completions: Sequence[str] | None,
                      names: Sequence[str]) -> str:
    """What MAAC's centralised critic reads: every agent's observation, and for Q the joint action."""
    blocks = [f"[{name}]\n{prompt}" for name, prompt in zip(names, prompts, strict=True)]
    text = "\n\n".join(blocks)
    if completions is not None:
        actions = "\n".join(f"[{name}] {c}" for name, c in zip(names, completions, strict=True))
        text = f"{text}\n\n[Joint action]\n{actions}"
    return text
