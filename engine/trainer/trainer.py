"""``MAGRPOTrainer``: CoMLRL's constructor and ``train()``/``evaluate()``/``save_model()``, built from
small steps a coordinator can also drive one by one:

    rollout = trainer.rollout(items)          # grow and score the trees (no gradients)
    metrics = trainer.update([rollout])       # advantages + one policy update per agent
    state = trainer.state_dict()              # everything needed to continue exactly

``train()`` is the loop over those: pick the step's items, roll out, update, report through the
sink, evaluate and checkpoint on schedule, and stop when the sink asks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.rewards.team_reward import TeamReward
from engine.schema.configs import MAGRPOConfig
from engine.sinks.base import Episode, Sink
from engine.trainer.core import TrainerCore, step_timing
from engine.trainer.credit import agent_batch, assign_returns, batch_advantages, record_on_tree, sample_values
from engine.trainer.evaluation import EvaluationMixin
from engine.trainer.loop import TrainResult  # noqa: F401  (re-exported)
from engine.trainer.losses import lr_factor
from engine.trainer.parallel import agent_threads, map_agents
from engine.trainer.reporting import rollout_metrics, sample_episodes
from engine.trainer.rollout import RolloutSettings, TreeBuilder
from engine.trainer.setup import dataset_length  # noqa: F401  (re-exported)
from engine.trainer.tree import Rollout, nodes_per_item
from engine.trainer.update import UpdateSettings, optimize_agent, sample_kl, score_logprobs


class MAGRPOTrainer(EvaluationMixin, TrainerCore):
    """Cooperative multi-agent GRPO (and its baseline variants) over a rollout tree.

    Arguments up to ``args`` are CoMLRL's. The keyword-only extras: ``sink`` (where reports go;
    nothing is reported by default), ``agent_names``, ``agent_learning_rates``, ``agent_generation``
    (per-agent sampling overrides: max_new_tokens, temperature, top_p, top_k), ``system_prompts``,
    ``eval_check(item, agent_completions) -> bool`` (enables pass@k) and ``output_dir`` (default
    checkpoint location). CoMLRL's ``wandb_config`` (when no ``sink`` is given) reports to a
    ``WandbSink``; otherwise nothing goes to wandb.
    """

    def __init__(
        self,
        agent_model: Any = None,
        agents: Sequence[Any] | None = None,
        num_agents: int = 2,
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
        args: MAGRPOConfig | None = None,
        *,
        sink: Sink | None = None,
        agent_names: Sequence[str] | None = None,
        agent_learning_rates: Sequence[float | None] | None = None,
        agent_generation: Sequence[dict[str, Any] | None] | None = None,
        system_prompts: Sequence[str | None] | None = None,
        eval_check: Callable[[dict, list[str]], bool] | None = None,
        output_dir: str | Path | None = None,
    ) -> None:
        self._setup(
            args=args, model_config=model_config, agent_model=agent_model, agents=agents, num_agents=num_agents,
            tokenizer=tokenizer, train_dataset=train_dataset, eval_dataset=eval_dataset, formatters=formatters,
            external_transition=external_transition, eval_logger=eval_logger, eval_aggregator=eval_aggregator,
            agent_names=agent_names, agent_learning_rates=agent_learning_rates, agent_generation=agent_generation,
            system_prompts=system_prompts, sink=sink, output_dir=output_dir, wandb_config=wandb_config,
        )
        cfg = self.args
        self.reward = TeamReward(reward_func, reward_processor)
        self.reward_func = reward_func
        self.eval_check = eval_check
        self._pool = agent_threads(cfg.parallel_training, [agent.device for agent in self.agents],
                                   [agent.model for agent in self.agents])
        self.tree = TreeBuilder(self.agents, self.reward, external_transition, RolloutSettings(
            num_generations=cfg.num_generations, num_turns=cfg.num_turns, joint_mode=cfg.joint_mode,
            turn_order=cfg.turn_order, early_termination_threshold=cfg.early_termination_threshold,
            external_prompt_passthrough=cfg.external_prompt_passthrough,
        ), pool=self._pool)  # None for agents sharing a model: it is never sampled from two threads
        self.update_settings = UpdateSettings(
            loss_type=cfg.loss_type, clip_epsilon=cfg.clip_epsilon, num_inner_epochs=cfg.num_inner_epochs,
            train_batch_size=cfg.effective_train_batch_size, micro_batch_size=cfg.micro_batch_size,
            max_grad_norm=cfg.max_grad_norm, reference_kl_enabled=cfg.reference_kl_enabled,
            reference_kl_mode=cfg.reference_kl_mode, reference_kl_coef=cfg.reference_kl_coef,
        )
        self._schedule(nodes_per_item(cfg.joint_mode, self.num_agents, cfg.num_generations, cfg.num_turns),
                       update_streams=self.num_agents)

    def _default_config(self) -> MAGRPOConfig:
        return MAGRPOConfig()

    # -- the three steps a coordinator drives -------------------------------------------------------
    def rollout(self, items: Sequence[dict], item_indices: Sequence[int] | None = None, *,
                score: bool = True) -> Rollout:
        """Grow and score the rollout trees of ``items`` (no gradients); returns carry the discount.

        ``score=False`` (single turn) samples without calling the reward function; a coordinator
        that scores the joint outcome itself then hands the rewards over with :meth:`credit`.
        """
        indices = list(item_indices) if item_indices is not None else list(range(len(items)))
        rollout = self.tree.build([dict(i) for i in items], indices, score=score)
        if score:
            assign_returns(rollout, self.args.discount)
        return rollout

    def credit(self, rollout: Rollout, rewards: Sequence[Sequence[float]],
               terms: Mapping[str, Sequence[float]] | Sequence[Mapping[str, Sequence[float]]] | None = None) -> None:
        """Give an unscored single-turn rollout its rewards: ``rewards[n][j]`` for item n's joint
        action j (``terms``: per-term values of the same shape, one mapping per item or one for all);
        returns are then computed with this trainer's discount, ready for :meth:`update`."""
        if any(node.turn > 0 for node in rollout.nodes):
            raise ValueError("credit() takes single-turn rollouts; multi-turn rollouts are scored while they grow")
        if len(rewards) != len(rollout.roots):
            raise ValueError(f"credit(): got rewards for {len(rewards)} items, the rollout has {len(rollout.roots)}")
        for n, (root, values) in enumerate(zip(rollout.roots, rewards, strict=True)):
            if len(values) != len(root.joint_actions):
                raise ValueError(f"credit(): item {n} has {len(root.joint_actions)} joint actions, got "
                                 f"{len(values)} rewards")
            root.rewards = [float(v) for v in values]
            node_terms = terms[n] if isinstance(terms, Sequence) else terms
            root.reward_terms = {k: [float(x) for x in v] for k, v in (node_terms or {}).items()}
        assign_returns(rollout, self.args.discount)

    def update(self, rollouts: Sequence[Rollout], *, advance_step: bool = False) -> dict[str, float]:
        """Advantages for every agent, then one update per agent. Returns ``agent/<name>/...`` metrics.

        The learning rate follows the schedule at ``self.step`` over ``self.total_steps`` (a
        coordinator may set ``total_steps`` to the number of updates it will make);
        ``advance_step`` counts this update in ``self.step``, as ``train_step`` does.
        """
        cfg = self.args
        if any(not node.returns for rollout in rollouts for node in rollout.nodes):
            raise ValueError("update() needs scored rollouts: a rollout(..., score=False) gets its rewards "
                             "from credit(rollout, rewards) first")
        # per agent, flat over every node of every rollout: S samples, their sibling groups, returns (S,)
        batches = [agent_batch(agent.index, rollouts) for agent in self.agents]
        self._map(lambda agent: self._score(agent, batches[agent.index].samples))
        kl_coef = cfg.reference_kl_coef if cfg.reference_kl_enabled and cfg.reference_kl_mode == "reward" else 0.0
        for batch in batches:
            batch.kl = sample_kl(batch.samples) if cfg.reference_kl_enabled else None  # (S,)
            batch.values = sample_values(batch.returns, batch.kl, kl_coef)  # (S,)
            batch.advantages = batch_advantages(batch.values, batch.groups, mode=cfg.advantage_mode,  # (S,)
                                                normalize=cfg.advantage_normalization,
                                                per_agent_normalization=cfg.per_agent_normalization)
            for sample, advantage in zip(batch.samples, batch.advantages, strict=True):
                sample.advantage = float(advantage)
            record_on_tree(batch, rollouts)  # the transcripts show each sample's advantage and KL
        factor = lr_factor(self.step, warmup_steps=cfg.warmup_steps, total_steps=self.total_steps,
                           schedule=cfg.lr_scheduler)
        for agent in self.agents:
            for group in agent.optimizer.param_groups:
                group["lr"] = agent.learning_rate * factor
        stats = self._map(lambda agent: optimize_agent(agent, batches[agent.index].samples, self.update_settings,
                                                       self._update_rngs[agent.index]))
        if advance_step:
            self.step += 1
        metrics: dict[str, float] = {}
        for agent, batch, agent_stats in zip(self.agents, batches, stats, strict=True):
            prefix = f"agent/{agent.name}/"
            metrics.update({prefix + k: v for k, v in agent_stats.items()})
            metrics[prefix + "lr"] = agent.learning_rate * factor
            if batch.kl is not None:
                metrics[prefix + "kl"] = float(sum(batch.kl) / max(len(batch.kl), 1))
        return metrics

    def _score(self, agent: Any, samples: list) -> None:
        """The log-probs the loss needs besides the current policy's: the rollout policy's (the
        sampler keeps them; scored only when missing) and the reference model's. An agent sampling
        from a ``rollout_dtype`` copy has its log-probs scored again by its own weights for the KL,
        which must be zero where the trained policy equals the reference."""
        cfg = self.args
        missing = any(s.old_logps is None for s in samples)
        rescore = cfg.reference_kl_enabled and agent.rollout_copy is not None
        if ((cfg.clip_epsilon is not None or cfg.reference_kl_enabled) and missing) or rescore:
            score_logprobs(agent, samples, reference=False)
        if cfg.reference_kl_enabled:
            score_logprobs(agent, samples, reference=True)

    def _map(self, fn: Callable) -> list[Any]:
        return map_agents(fn, self.agents, self._pool)

    def train_step(self) -> tuple[dict[str, float], list[Episode]]:
        """One training step: the step's items rolled out, one update, metrics and episodes."""
        cfg = self.args
        t_start = time.perf_counter()
        indices = self.items_for_step(self.step)
        rollouts = []
        for start in range(0, len(indices), self.items_per_step):
            chunk = indices[start:start + self.items_per_step]
            rollouts.append(self.rollout([dict(self.train_dataset[i]) for i in chunk], chunk))
        t_update = time.perf_counter()
        metrics = self.update(rollouts, advance_step=True)
        t_end = time.perf_counter()
        self.env_step += sum(r.env_steps for r in rollouts)
        metrics.update(rollout_metrics(rollouts, cfg.num_turns))
        generate_s = sum(r.timings["generate_s"] for r in rollouts)
        tokens = sum(r.num_tokens for r in rollouts)
        metrics.update(step_timing(t_start, t_update, t_end, generate_s=generate_s, tokens=tokens,
                                   reward_s=sum(r.timings["reward_s"] for r in rollouts)))
        metrics["train/epoch"] = self.epoch_of_last_step()
        episodes = sample_episodes(rollouts, self.agent_names, cfg.transcripts_per_step, self._report_rng)
        return metrics, episodes

    def close(self) -> None:
        """Stop the per-agent worker threads (``mp`` mode)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
            self.tree.pool = None
