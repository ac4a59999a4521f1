"""MAAC: multi-agent actor-critic with one centralised critic.

The critic reads every agent's observation (its prompt this turn) and, for ``critic_type="q"``,
the joint action; it has one output per agent, so per-agent rewards get per-agent values while a
team reward gives every output the same target. It is stepped once per joint sample (CoMLRL steps
it once per agent). Actors are plain causal LMs trained with the critic's advantages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from engine.actor_critic.base import ActorCriticTrainerBase
from engine.actor_critic.critics import ValueCritic, joint_critic_text
from engine.actor_critic.iac import VALUE_CHUNK, critic_device, load_critic_source
from engine.actor_critic.rollout import ACRollout, Chain
from engine.actor_critic.update import critic_stats, update_critic
from engine.schema.actor_critic_configs import MAACConfig


class MAACTrainer(ActorCriticTrainerBase):
    """Centralised-critic actor-critic (CoMLRL's ``MAACTrainer`` constructor; see :class:`MAACConfig`).

    ``critic_model`` (an id or a model object with ``critic_tokenizer``) is the critic's model; by
    default the critic starts as a copy of the first agent's backbone.
    """

    config_class = MAACConfig
    args: MAACConfig

    def _build_critics(self, critic_model: Any, critics: Sequence[Any] | None, critic_tokenizer: Any) -> None:
        cfg = self.args
        if critics is not None:
            if len(critics) != 1:
                raise ValueError(f"critics: MAAC has one centralised critic; got {len(critics)} (pass critic_model)")
            critic_model = critics[0]
        first = self.agents[0]
        device = critic_device(cfg.critic_devices, 0, first.device)
        if critic_model is None:
            model, tok = first.model, first.tokenizer
        else:
            model, tok = load_critic_source(critic_model, critic_tokenizer, first.tokenizer, device)
        critic = ValueCritic.from_causal_lm(model, tok, out_dim=self.num_agents,
                                            head_hidden_dim=cfg.critic_value_head_hidden_dim, copy_weights=True,
                                            device=device)
        self.critics.append(critic)
        self.critic_optimizers.append(torch.optim.AdamW(critic.parameters(), lr=cfg.effective_critic_learning_rate,
                                                        weight_decay=cfg.weight_decay))

    def joint_text(self, chain: Chain, turn: int) -> str:
        """The critic's input for one joint sample."""
        samples = chain.turns[turn]
        actions = [s.text for s in samples] if self.args.critic_type == "q" else None
        return joint_critic_text([s.prompt for s in samples], actions, self.agent_names)

    @staticmethod
    def joint_rows(rollout: ACRollout) -> list[tuple[Chain, int]]:
        """One row per joint sample: (chain, turn)."""
        return [(chain, t) for chain in rollout.chains for t in range(chain.num_turns)]

    @torch.no_grad()
    def _record_values(self, rollout: ACRollout) -> None:
        critic = self.critics[0]
        was = critic.training
        critic.eval()
        rows = self.joint_rows(rollout)
        for chain in rollout.chains:
            chain.joint_old_values = []
        for start in range(0, len(rows), VALUE_CHUNK):
            part = rows[start:start + VALUE_CHUNK]
            values = critic([self.joint_text(c, t) for c, t in part]).tolist()
            for (chain, t), row in zip(part, values, strict=True):
                chain.joint_old_values.append([float(v) for v in row])
                for s, v in zip(chain.turns[t], row, strict=True):
                    s.old_value = float(v)
        critic.train(was)

    def _update_critics(self, rollout: ACRollout) -> dict[str, float]:
        rows = self.joint_rows(rollout)
        stats = critic_stats([s.old_value for c, t in rows for s in c.turns[t]],
                             [s.target for c, t in rows for s in c.turns[t]])
        stats.update(update_critic(
            self.critics[0], self.critic_optimizers[0], rows, texts=lambda r: self.joint_text(*r),
            old=lambda r: r[0].joint_old_values[r[1]], target=lambda r: [s.target for s in r[0].turns[r[1]]],
            turn_of=lambda r: r[1], settings=self.settings, rng=self.update_rngs[-1], who="the centralised critic",
        ))
        metrics = {f"critic/{k}": v for k, v in stats.items()}
        for agent in self.agents:
            samples = rollout.samples(agent.index)
            ev = critic_stats([s.old_value for s in samples], [s.target for s in samples])["explained_variance"]
            metrics[f"critic/{agent.name}/explained_variance"] = ev
        return metrics
