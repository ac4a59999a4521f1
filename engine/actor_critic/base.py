"""What IAC and MAAC share: construction (CoMLRL's constructor), the step (roll out, values,
TD targets, advantages, critic and actor updates), the training loop, evaluation and checkpoints.

Subclasses say where values come from (:meth:`_record_values`) and how critics learn
(:meth:`_update_critics`); everything else is here. Agents, sampling, prompt rendering, the policy
loss and checkpoint folders are the MAGRPO trainer's own pieces, reused as they are.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from engine.actor_critic.critics import ValueHead
from engine.actor_critic.rollout import ACRollout, AgentRewards, Chain, ChainSettings, run_chains
from engine.actor_critic.targets import discounted_returns, normalize, td_targets
from engine.actor_critic.update import StepSettings, update_actor
from engine.schema.actor_critic_configs import ActorCriticConfig
from engine.schema.algorithms import TrainerConfig
from engine.sinks.base import Episode, Sink, TurnRecord
from engine.trainer.core import TrainerCore, step_timing
from engine.trainer.setup import comlrl_agents


class ActorCriticTrainerBase(TrainerCore):
    """Base of :class:`IACTrainer` and :class:`MAACTrainer` (see the module docstring)."""

    config_class: type[ActorCriticConfig] = ActorCriticConfig

    def __init__(
        self,
        agent_model: Any = None,
        agents: Sequence[Any] | None = None,
        tokenizer: Any = None,
        model_config: dict[str, Any] | None = None,
        train_dataset: Any = None,
        eval_dataset: Any = None,
        reward_func: Any = None,
        reward_processor: Callable[[float], float] | None = None,
        formatters: Any = None,
        external_transition: Callable | None = None,
        wandb_config: dict[str, Any] | None = None,
        eval_logger: Callable | None = None,
        eval_aggregator: Callable | None = None,
        args: ActorCriticConfig | None = None,
        critic_model: Any = None,
        critics: Sequence[Any] | None = None,
        metrics_callback: Callable[[list[Chain]], dict[str, float]] | None = None,
        *,
        critic_tokenizer: Any = None,
        sink: Sink | None = None,
        agent_names: Sequence[str] | None = None,
        agent_learning_rates: Sequence[float | None] | None = None,
        agent_generation: Sequence[dict[str, Any] | None] | None = None,
        system_prompts: Sequence[str | None] | None = None,
        output_dir: str | Path | None = None,
    ) -> None:
        if reward_func is None:
            raise ValueError("reward_func is required: one team reward (or one per agent) per joint action")
        cfg = self._configured(args, model_config)
        team = comlrl_agents(cfg, agent_model=agent_model, agents=agents, num_agents=cfg.num_agents,
                             tokenizer=tokenizer, formatters=formatters, agent_names=agent_names,
                             agent_learning_rates=agent_learning_rates, agent_generation=agent_generation,
                             system_prompts=system_prompts)
        self._setup(cfg, team, train_dataset=train_dataset, eval_dataset=eval_dataset,
                    external_transition=external_transition, eval_logger=eval_logger,
                    eval_aggregator=eval_aggregator, sink=sink, wandb_config=wandb_config, output_dir=output_dir)
        self.reward_func = reward_func
        self.rewards = AgentRewards(reward_func, reward_processor, self.num_agents)
        self.eval_rewards = self.rewards  # evaluation's reward (MARLHF trains on a learned one, evaluates on this)
        self.metrics_callback = metrics_callback
        self.critics: list[torch.nn.Module] = []
        self.critic_optimizers: list[torch.optim.Optimizer] = []
        self.value_heads: list[ValueHead] = []
        self._build_critics(critic_model, critics, critic_tokenizer)
        self.settings = StepSettings(
            train_batch_size=cfg.effective_train_batch_size, loss_type=cfg.loss_type,
            max_grad_norm=cfg.max_grad_norm, value_clip_range=cfg.value_clip_range,
            value_loss_coef=cfg.value_loss_coef, critic_type=cfg.critic_type,
        )
        # one update stream per agent, plus one for the critics
        self._schedule(cfg.num_generations * cfg.num_turns, update_streams=self.num_agents + 1)

    def _default_config(self) -> TrainerConfig:  # MARLHF's actor-critic stage returns a MARLHFConfig
        return self.config_class()

    # -- what subclasses provide -----------------------------------------------------------------
    def _build_critics(self, critic_model: Any, critics: Sequence[Any] | None, critic_tokenizer: Any) -> None:
        raise TypeError(f"{type(self).__name__} must define _build_critics")

    def _record_values(self, rollout: ACRollout) -> None:
        """Fill every sample's rollout-time ``old_value`` (no gradients)."""
        raise TypeError(f"{type(self).__name__} must define _record_values")

    def _update_critics(self, rollout: ACRollout) -> dict[str, float]:
        """Critic steps on the rollout's targets; returns ``critic/...`` metrics."""
        raise TypeError(f"{type(self).__name__} must define _update_critics")

    def _head_of(self, agent_index: int) -> ValueHead | None:
        return None

    # -- the step --------------------------------------------------------------------------------
    def _chain_settings(self, *, num_generations: int | None = None, greedy: bool = False) -> ChainSettings:
        cfg = self.args
        return ChainSettings(
            num_generations=num_generations or cfg.num_generations, num_turns=cfg.num_turns,
            early_termination_threshold=cfg.early_termination_threshold,
            external_prompt_passthrough=cfg.external_prompt_passthrough,
            reference_kl_coef=cfg.reference_kl_coef if cfg.reference_kl_enabled else 0.0, greedy=greedy,
        )

    def rollout(self, items: Sequence[dict], item_indices: Sequence[int] | None = None) -> ACRollout:
        """Roll out trajectories for ``items``, record the critic's values, targets and advantages."""
        indices = list(item_indices) if item_indices is not None else list(range(len(items)))
        rollout = run_chains(self.agents, self.rewards, self.external_transition, [dict(i) for i in items],
                             indices, self._chain_settings())
        self._record_values(rollout)
        self.assign_targets(rollout)
        return rollout

    def assign_targets(self, rollout: ACRollout) -> None:
        """TD(0) targets per chain and agent, advantages ``target - V_old`` (z-normalised per agent and turn)."""
        cfg = self.args
        for chain in rollout.chains:
            for i in range(self.num_agents):
                samples = [turn[i] for turn in chain.turns]
                targets = td_targets([s.reward for s in samples], [s.old_value for s in samples], cfg.discount)
                for s, y in zip(samples, targets, strict=True):
                    s.target = y
                    s.advantage = y - s.old_value
        if cfg.advantage_normalization:
            for i in range(self.num_agents):
                by_turn: dict[int, list] = {}
                for s in rollout.samples(i):
                    by_turn.setdefault(s.turn, []).append(s)
                for group in by_turn.values():
                    values = normalize(torch.tensor([s.advantage for s in group], dtype=torch.float64)).tolist()
                    for s, a in zip(group, values, strict=True):
                        s.advantage = float(a)

    def update(self, rollout: ACRollout) -> dict[str, float]:
        """Critic updates, then one pass of actor updates per agent. Returns the metrics."""
        metrics = self._update_critics(rollout)
        for agent in self.agents:
            stats = update_actor(agent, rollout.samples(agent.index), self.settings, self.update_rngs[agent.index],
                                 head=self._head_of(agent.index))
            metrics.update({f"agent/{agent.name}/{k}": v for k, v in stats.items()})
        return metrics

    def train_step(self) -> tuple[dict[str, float], list[Episode]]:
        """One training step: the step's items rolled out, critics and actors updated."""
        cfg = self.args
        t_start = time.perf_counter()
        indices = self.items_for_step(self.step)
        rollout = self.rollout([dict(self.train_dataset[i]) for i in indices], indices)
        t_update = time.perf_counter()
        metrics = self.update(rollout)
        t_end = time.perf_counter()
        self.step += 1
        self.env_step += rollout.env_steps
        metrics.update(self.rollout_metrics(rollout))
        metrics.update(step_timing(t_start, t_update, t_end, generate_s=rollout.timings["generate_s"],
                                   reward_s=rollout.timings["reward_s"], tokens=rollout.num_tokens))
        metrics["train/epoch"] = self.epoch_of_last_step()
        chosen = self.report_rng.sample(rollout.chains, min(cfg.transcripts_per_step, len(rollout.chains)))
        return metrics, [self.chain_episode(c, k) for k, c in enumerate(chosen)]

    # -- reporting -------------------------------------------------------------------------------
    def rollout_metrics(self, rollout: ACRollout, *, split: str = "train") -> dict[str, float]:
        """Reward and discounted return per turn (team = mean over agents), KL and reward terms.

        Train keys: ``train/reward_mean``, ``turn_t/...``, ``reward/<term>``; eval keys: ``eval/...``.
        """
        cfg = self.args
        turn_prefix = "" if split == "train" else f"{split}/"
        team = [[sum(s.reward for s in turn) / len(turn) for turn in c.turns] for c in rollout.chains]
        returns = [discounted_returns(r, cfg.discount) for r in team]
        out = {f"{split}/reward_mean": _mean([x for r in team for x in r])}
        for t in range(cfg.num_turns):
            rewards_t = [r[t] for r in team if len(r) > t]
            if rewards_t:
                out[f"{turn_prefix}turn_{t + 1}/reward_mean"] = _mean(rewards_t)
                out[f"{turn_prefix}turn_{t + 1}/expected_return"] = _mean([g[t] for g in returns if len(g) > t])
        kls = [s.ref_kl for c in rollout.chains for turn in c.turns for s in turn if s.ref_kl is not None]
        if kls:
            out[f"{split}/reference_kl_mean"] = _mean(kls)
        for term, values in rollout.reward_terms.items():
            out[f"{turn_prefix}reward/{term}"] = _mean(values)
        return out

    def chain_episode(self, chain: Chain, sample_index: int, split: str = "train") -> Episode:
        """A chain as an :class:`Episode`: every turn of every agent with its reward, return and advantage."""
        turns = []
        for i in range(self.num_agents):
            rewards = [turn[i].reward for turn in chain.turns]
            for s, ret in zip([turn[i] for turn in chain.turns], discounted_returns(rewards, self.args.discount),
                              strict=True):
                turns.append((s.turn, i, TurnRecord(turn=s.turn + 1, agent_index=i, agent_name=self.agent_names[i],
                                                    prompt=s.prompt, completion=s.text, reward=float(s.reward),
                                                    ret=float(ret), advantage=float(s.advantage))))
        ordered = tuple(r for _, _, r in sorted(turns, key=lambda x: (x[0], x[1])))
        return Episode(sample_index=sample_index, split=split, item_index=chain.item_index, turns=ordered)

    # -- evaluation ------------------------------------------------------------------------------
    def evaluate(self, num_eval_samples: int | None = None, *, greedy: bool | None = None,
                 sink: Sink | None = None) -> dict[str, float]:
        """One trajectory per eval item; ``eval/turn_t/{reward_mean,expected_return}`` and hook metrics."""
        cfg = self.args
        if self.eval_dataset is None:
            return {}
        count = min(cfg.eval_num_samples if num_eval_samples is None else num_eval_samples, len(self.eval_dataset))
        if count <= 0:
            return {}
        items = [dict(self.eval_dataset[i]) for i in range(count)]
        greedy = cfg.eval_greedy if greedy is None else greedy
        rollout = run_chains(self.agents, self.eval_rewards, self.external_transition, items, list(range(count)),
                             self._chain_settings(num_generations=1, greedy=greedy))
        metrics = self.rollout_metrics(rollout, split="eval")
        if self.metrics_callback is not None:
            extra = self.metrics_callback(rollout.chains) or {}
            metrics.update({(k if k.startswith("eval/") else f"eval/{k}"): float(v) for k, v in extra.items()})
        if self.eval_logger is not None:
            completions = [[[turn[i].text for turn in c.turns] for c in rollout.chains] for i in range(self.num_agents)]
            per_item = self.eval_logger(agent_completions_turns=completions, batch_items=items,
                                        prompts=[str(it.get("prompt", "")) for it in items]) or []
            reduced = (self.eval_aggregator(per_item, num_turns=cfg.num_turns) if self.eval_aggregator is not None
                       else _average_rows(per_item))
            metrics.update({(k if k.startswith("eval/") else f"eval/{k}"): float(v) for k, v in reduced.items()
                            if isinstance(v, int | float)})
        if sink is not None:
            sink.log_metrics(self.step, self.env_step, metrics)
            sink.log_transcripts(self.step, [self.chain_episode(c, k, "eval") for k, c in enumerate(rollout.chains)])
        return metrics

    # -- state: the actors' part comes from TrainerCore, the critics' is added here ---------------
    def _training_state(self) -> dict[str, Any]:
        state = super()._training_state()
        state["critics"] = [{k: v.detach().cpu().clone() for k, v in c.state_dict().items()} for c in self.critics]
        state["critic_optimizers"] = [o.state_dict() for o in self.critic_optimizers]
        state["value_heads"] = [{k: v.detach().cpu().clone() for k, v in h.state_dict().items()}
                                for h in self.value_heads]
        return state

    def _restore_training_state(self, state: dict[str, Any]) -> None:
        if len(state.get("critics", [])) != len(self.critics) or \
                len(state.get("value_heads", [])) != len(self.value_heads):
            raise ValueError("the checkpoint's critics differ from this trainer's (another algorithm or critic setup)")
        for critic, weights in zip(self.critics, state["critics"], strict=True):
            critic.load_state_dict(weights)
        for head, weights in zip(self.value_heads, state["value_heads"], strict=True):
            head.load_state_dict(weights)
        for opt, opt_state in zip(self.critic_optimizers, state["critic_optimizers"], strict=True):
            opt.load_state_dict(opt_state)
        super()._restore_training_state(state)

    def save_model(self, output_dir: str | Path) -> None:
        """``agent_{i}/`` (model + tokenizer) per agent, plus the critics' weights (``critic_*.pt``)."""
        super().save_model(output_dir)
        out = Path(output_dir)
        for u, critic in enumerate(self.critics):
            torch.save(critic.state_dict(), out / f"critic_{u}.pt")
        for u, head in enumerate(self.value_heads):
            torch.save(head.state_dict(), out / f"agent_{u}" / "value_head.pt")


def _mean(values: Sequence[float]) -> float:
    values = list(values)
    return float(sum(values) / len(values)) if values else 0.0


def _average_rows(rows: Sequence[dict]) -> dict[str, float]:
    sums: dict[str, list[float]] = {}
    for row in rows:
        for key, value in row.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                sums.setdefault(key, []).append(float(value))
    return {k: sum(v) / len(v) for k, v in sums.items()}
