"""IAC: independent actor-critic. Every agent has its own critic: a separate model with a value
head and its own optimizer (``use_separate_critic=True``), or a value head on the agent's own
backbone trained together with the policy (``use_separate_critic=False``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from engine.actor_critic.base import ActorCriticTrainerBase
from engine.actor_critic.critics import ValueCritic, ValueHead, agent_critic_text, hidden_size_of
from engine.actor_critic.rollout import ACRollout, TurnSample
from engine.actor_critic.update import critic_stats, head_old_values, update_critic
from engine.schema.actor_critic_configs import IACConfig

VALUE_CHUNK = 64


def critic_device(devices: Any, index: int, default: torch.device) -> torch.device:
    """``critic_devices[index]`` (one entry is broadcast), else ``default``."""
    if isinstance(devices, str):
        devices = [devices]
    if not devices:
        return default
    return torch.device(devices[index if len(devices) > 1 else 0])


def load_critic_source(source: Any, tokenizer: Any, fallback_tokenizer: Any, device: torch.device) -> tuple[Any, Any]:
    """A critic's causal LM and tokenizer from an id/folder (loaded) or a model object (adopted)."""
    if isinstance(source, str):
        from engine.models import load_agent

        return load_agent(source, tokenizer=tokenizer, device=device)
    return source, tokenizer if tokenizer is not None else fallback_tokenizer


class IACTrainer(ActorCriticTrainerBase):
    """Independent actor-critic (CoMLRL's ``IACTrainer`` constructor; see :class:`IACConfig`).

    ``critics`` (one per agent) or ``critic_model`` (for every agent) name the critics' models (ids
    or objects, with ``critic_tokenizer`` for objects); by default each critic starts as a copy of
    its agent's backbone.
    """

    config_class = IACConfig
    args: IACConfig

    def _build_critics(self, critic_model: Any, critics: Sequence[Any] | None, critic_tokenizer: Any) -> None:
        cfg = self.args
        if not cfg.use_separate_critic:
            if critic_model is not None or critics is not None:
                raise ValueError("use_separate_critic=False puts the value head on each agent's backbone; "
                                 "do not pass critic_model/critics (or set use_separate_critic=True)")
            for agent in self.agents:
                head = ValueHead(hidden_size_of(agent.model), 1, cfg.value_head_hidden_dim).to(agent.device)
                assert agent.optimizer is not None  # every loaded agent has one
                agent.optimizer.add_param_group({"params": list(head.parameters()), "lr": agent.learning_rate})
                self.value_heads.append(head)
            return
        if critics is not None and len(critics) != self.num_agents:
            raise ValueError(f"critics: got {len(critics)} for {self.num_agents} agents; pass one per agent")
        tokenizers = critic_tokenizer if isinstance(critic_tokenizer, list | tuple) else \
            [critic_tokenizer] * self.num_agents
        for agent in self.agents:
            device = critic_device(cfg.critic_devices, agent.index, agent.device)
            source = critics[agent.index] if critics is not None else critic_model
            if source is None:
                model, tok = agent.model, agent.tokenizer
            else:
                model, tok = load_critic_source(source, tokenizers[agent.index], agent.tokenizer, device)
            critic = ValueCritic.from_causal_lm(model, tok, out_dim=1, head_hidden_dim=cfg.critic_value_head_hidden_dim,
                                                copy_weights=True, device=device)
            self.critics.append(critic)
            self.critic_optimizers.append(torch.optim.AdamW(critic.parameters(), lr=cfg.effective_critic_learning_rate,
                                                            weight_decay=cfg.weight_decay))

    def _head_of(self, agent_index: int) -> ValueHead | None:
        return self.value_heads[agent_index] if self.value_heads else None

    def _text(self, sample: TurnSample) -> str:
        return agent_critic_text(sample.prompt, sample.text if self.args.critic_type == "q" else None)

    @torch.no_grad()
    def _record_values(self, rollout: ACRollout) -> None:
        for agent in self.agents:
            samples = rollout.samples(agent.index)
            if self.value_heads:
                head_old_values(agent, self.value_heads[agent.index], samples, self.args.critic_type)
                continue
            critic = self.critics[agent.index]
            was = critic.training
            critic.eval()
            for start in range(0, len(samples), VALUE_CHUNK):
                part = samples[start:start + VALUE_CHUNK]
                for s, v in zip(part, critic([self._text(s) for s in part])[:, 0].tolist(), strict=True):
                    s.old_value = float(v)
            critic.train(was)

    def _update_critics(self, rollout: ACRollout) -> dict[str, float]:
        metrics: dict[str, float] = {}
        for agent in self.agents:
            samples = rollout.samples(agent.index)
            prefix = f"critic/{agent.name}/"
            stats = critic_stats([s.old_value for s in samples], [s.target for s in samples])
            if self.critics:
                stats.update(update_critic(
                    self.critics[agent.index], self.critic_optimizers[agent.index], samples, texts=self._text,
                    old=lambda s: [s.old_value], target=lambda s: [s.target], turn_of=lambda s: s.turn,
                    settings=self.settings, rng=self.update_rngs[-1], who=f"critic of {agent.name!r}",
                ))
            metrics.update({prefix + k: v for k, v in stats.items()})
        return metrics

    def update(self, rollout: ACRollout) -> dict[str, float]:
        metrics = super().update(rollout)
        if self.value_heads:  # the head trains with the actor: report its loss as the critic's
            for agent in self.agents:
                metrics[f"critic/{agent.name}/value_loss"] = metrics.pop(f"agent/{agent.name}/value_loss")
        return metrics
