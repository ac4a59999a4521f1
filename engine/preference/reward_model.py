"""The joint reward model of MARLHF: an LM backbone plus a linear head read at the last token of a
joint answer (every agent's prompt and response), trained on preference pairs with the
Bradley-Terry loss ``-log sigmoid(s_winner - s_loser)``, then used as the team reward.

Shapes: ``B`` joint answers, ``L`` tokens, ``H`` hidden size.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from engine.preference.pairs import PreferencePair
from engine.trainer.setup import make_adamw

SCORE_CHUNK = 32  # joint answers per no-grad scoring forward


def joint_text(prompts: Sequence[str], responses: Sequence[str]) -> str:
    """What the reward model reads: each agent's prompt and response, in agent order (CoMLRL's blocks)."""
    return "\n\n".join(f"Agent {i} prompt:\n{p}\nAgent {i} response:\n{r}"
                       for i, (p, r) in enumerate(zip(prompts, responses, strict=True)))


def bradley_terry_loss(winner_scores: torch.Tensor, loser_scores: torch.Tensor) -> torch.Tensor:
    """``-log sigmoid(s_w - s_l)`` averaged over pairs. (B,), (B,) -> ()."""
    return -F.logsigmoid(winner_scores - loser_scores).mean()


class JointRewardModel(torch.nn.Module):
    """Backbone (a transformers base model) + ``Linear(H, 1)`` on the last real token."""

    def __init__(self, backbone: Any, tokenizer: Any, *, max_length: int | None = None) -> None:
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.max_length = max_length
        hidden = backbone.config.hidden_size
        param = next(backbone.parameters())
        self.head = torch.nn.Linear(hidden, 1).to(device=param.device, dtype=param.dtype)
        torch.nn.init.normal_(self.head.weight, std=0.02)
        torch.nn.init.zeros_(self.head.bias)

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    def encode(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded ids and mask (B, L); a text longer than ``max_length`` keeps its last tokens."""
        rows = [list(self.tokenizer(t, add_special_tokens=True)["input_ids"]) for t in texts]
        if self.max_length is not None:
            rows = [r[-self.max_length:] for r in rows]
        rows = [r or [self._pad_id()] for r in rows]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self._pad_id(), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for b, r in enumerate(rows):
            ids[b, :len(r)] = torch.tensor(r, dtype=torch.long)
            mask[b, :len(r)] = 1
        return ids.to(self.device), mask.to(self.device)

    def _pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id)

    def forward(self, texts: Sequence[str]) -> torch.Tensor:
        """Scores of joint answers (B,)."""
        ids, mask = self.encode(texts)
        hidden = self.backbone(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state  # (B, L, H)
        last = hidden[torch.arange(ids.shape[0], device=ids.device), mask.sum(-1) - 1]  # (B, H)
        return self.head(last).squeeze(-1).float()

    @torch.no_grad()
    def score(self, texts: Sequence[str]) -> list[float]:
        was_training = self.training
        self.eval()
        try:
            return [x for s in range(0, len(texts), SCORE_CHUNK) for x in self(texts[s:s + SCORE_CHUNK]).tolist()]
        finally:
            self.train(was_training)

    def accuracy(self, pairs: Sequence[PreferencePair]) -> float:
        """Share of pairs whose winner scores above its loser (ties count as wrong)."""
        if not pairs:
            raise ValueError("accuracy of the reward model needs at least one pair")
        wins = self.score([joint_text(p.prompts, p.winner_completions) for p in pairs])
        losses = self.score([joint_text(p.loser_prompts, p.loser_completions) for p in pairs])
        return sum(w > lo for w, lo in zip(wins, losses, strict=True)) / len(pairs)


def build_reward_model(source: str | None, agent: Any, *, device: str | None, max_length: int | None,
                       freeze_backbone: bool) -> JointRewardModel:
    """A reward model on ``source`` (HF id or folder, its own tokenizer) or on a copy of ``agent``'s
    backbone and tokenizer; placed on ``device`` (default the agent's)."""
    if source is not None:
        from transformers import AutoModel, AutoTokenizer

        from engine.permissions.read_paths import checked_read

        source = checked_read("trainer.reward_model_name", source)  # a folder inside the read roots of the run
        # a run config names the source: code that comes with it never runs (engine.permissions.remote_code)
        backbone = AutoModel.from_pretrained(source, trust_remote_code=False)
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False)
    else:
        backbone, tokenizer = copy.deepcopy(agent.model.base_model), agent.tokenizer
    backbone = backbone.to(torch.device(device) if device else agent.device)
    backbone.requires_grad_(not freeze_backbone)
    return JointRewardModel(backbone, tokenizer, max_length=max_length)


def fit_reward_model(model: JointRewardModel, pairs: Sequence[PreferencePair], *, epochs: int, batch_size: int,
                     learning_rate: float, weight_decay: float, max_grad_norm: float | None,
                     seed: int) -> dict[str, float]:
    """Bradley-Terry training on ``pairs`` (seeded order per epoch). Returns ``reward_model/...``."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_adamw(params, lr=learning_rate, weight_decay=weight_decay)
    rng = random.Random(seed * 613 + 1)
    order = list(range(len(pairs)))
    losses = []
    model.train()
    for _ in range(epochs):
        rng.shuffle(order)
        for start in range(0, len(order), batch_size):
            batch = [pairs[i] for i in order[start:start + batch_size]]
            scores = model([joint_text(p.prompts, p.winner_completions) for p in batch]
                           + [joint_text(p.loser_prompts, p.loser_completions) for p in batch])
            loss = bradley_terry_loss(scores[:len(batch)], scores[len(batch):])
            if not torch.isfinite(loss):
                raise FloatingPointError(f"the reward model's loss is {float(loss)}; lower reward_learning_rate")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm or math.inf)
            optimizer.step()
            losses.append(float(loss.detach()))
    optimizer.zero_grad(set_to_none=True)
    model.eval()
    return {"reward_model/loss": sum(losses) / max(len(losses), 1), "reward_model/train_accuracy": model.accuracy(pairs),
            "reward_model/optimizer_steps": float(len(losses))}


class LearnedReward:
    """The reward model as a team reward (a reward-term object for :class:`engine.rewards.team_reward.TeamReward`)."""

    term_names: list[str] = []

    def __init__(self, model: JointRewardModel) -> None:
        self.model = model

    def score(self, agent_completions: Sequence[Sequence[str]], batch_items: Sequence[dict],
              prompts: Sequence[Sequence[str]]) -> tuple[list[float], dict[str, list[float]]]:
        texts = [joint_text([p[j] for p in prompts], [c[j] for c in agent_completions]) for j in range(len(batch_items))]
        return self.model.score(texts), {}
