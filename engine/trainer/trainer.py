"""``MAGRPOTrainer``: CoMLRL's constructor and ``train()``/``evaluate()``/``save_model()``.

A training step is :func:`engine.trainer.step.magrpo_step`, one function from the step's items to
its metrics. A coordinator can drive the same step in parts:

    rollout = trainer.rollout(items)          # grow and score the trees (no gradients)
    metrics = trainer.update([rollout])       # advantages + one policy update per agent
    state = trainer.state_dict()              # everything needed to continue exactly

``train()`` is the shared loop over steps (:mod:`engine.trainer.loop`): report through the sink,
evaluate and checkpoint on schedule, and stop when the sink asks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.rewards.team_reward import TeamReward
from engine.schema.configs import MAGRPOConfig
from engine.schema.rules import team_problems
from engine.sinks.base import Episode, Sink
from engine.trainer.agent_setup import comlrl_agents
from engine.trainer.agents import AgentRuntime, rollout_engines
from engine.trainer.core import TrainerCore
from engine.trainer.credit import agent_batch, assign_returns, credit_rollout, fill_advantages
from engine.trainer.evaluation import EvalOutcome, evaluate, evaluate_items, path_completions
from engine.trainer.loop import TrainResult  # noqa: F401  (re-exported)
from engine.trainer.losses import lr_factor
from engine.trainer.parallel import agent_threads, map_agents
from engine.trainer.reporting import agent_metrics
from engine.trainer.rollout import RolloutSettings, TreeBuilder
from engine.trainer.setup import dataset_length  # noqa: F401  (re-exported)
from engine.trainer.step import magrpo_step
from engine.trainer.tree import Rollout, nodes_per_item
from engine.trainer.update import UpdateSettings, optimize_agent, score_for_loss, set_learning_rates


class MAGRPOTrainer(TrainerCore):
    """Cooperative multi-agent GRPO (and its baseline variants) over a rollout tree.

    Arguments up to ``args`` are CoMLRL's; ``agents`` may also be
    :class:`engine.trainer.agent_setup.AgentSetup` records, one per agent, with every other per-agent
    argument left unset (the run-config build passes them). The keyword-only extras: ``sink`` (where reports go;
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
        cfg = self._configured(args, model_config)
        team = comlrl_agents(cfg, agent_model=agent_model, agents=agents, num_agents=num_agents,
                             tokenizer=tokenizer, formatters=formatters, agent_names=agent_names,
                             agent_learning_rates=agent_learning_rates, agent_generation=agent_generation,
                             system_prompts=system_prompts)
        for problem in team_problems(cfg, len(team)):
            raise ValueError(problem)
        self._setup(cfg, team, train_dataset=train_dataset, eval_dataset=eval_dataset,
                    external_transition=external_transition, eval_logger=eval_logger,
                    eval_aggregator=eval_aggregator, sink=sink, wandb_config=wandb_config, output_dir=output_dir)
        self.reward = TeamReward(reward_func, reward_processor)
        self.reward_func = reward_func
        self.eval_check = eval_check
        self._pool = agent_threads(cfg.parallel_training, [agent.device for agent in self.agents],
                                   [agent.model for agent in self.agents])
        self.tree = TreeBuilder(self.agents, self.reward, external_transition, RolloutSettings(
            num_generations=cfg.num_generations, num_turns=cfg.num_turns, joint_mode=cfg.joint_mode,
            turn_order=cfg.turn_order, early_termination_threshold=cfg.early_termination_threshold,
            external_prompt_passthrough=cfg.external_prompt_passthrough,
            counterfactual=cfg.credit_assignment == "counterfactual",
        ), pool=self._pool)  # None for agents sharing a model: it is never sampled from two threads
        self.update_settings = UpdateSettings(
            loss_type=cfg.loss_type, clip_epsilon=cfg.clip_epsilon, num_inner_epochs=cfg.num_inner_epochs,
            train_batch_size=cfg.effective_train_batch_size, micro_batch_size=cfg.micro_batch_size,
            max_grad_norm=cfg.max_grad_norm, reference_kl_enabled=cfg.reference_kl_enabled,
            reference_kl_mode=cfg.reference_kl_mode, reference_kl_coef=cfg.reference_kl_coef,
            rollout_correction=cfg.rollout_correction, tis_cap=cfg.tis_cap,
        )
        self._schedule(nodes_per_item(cfg.joint_mode, self.num_agents, cfg.num_generations, cfg.num_turns),
                       update_streams=self.num_agents)

    def _default_config(self) -> MAGRPOConfig:
        return MAGRPOConfig()

    def train_step(self) -> tuple[dict[str, float], list[Episode]]:
        """One training step (:func:`engine.trainer.step.magrpo_step`): metrics and episodes."""
        return magrpo_step(self)

    def map_agents(self, fn: Callable[[AgentRuntime], Any]) -> list[Any]:
        """``fn(agent)`` for every agent, in order; in the agents' threads when they have them."""
        return map_agents(fn, self.agents, self._pool)

    # -- the step in two calls, for a coordinator (engine.systems) --------------------------------
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
        credit_rollout(rollout, rewards, terms)
        assign_returns(rollout, self.args.discount)

    def update(self, rollouts: Sequence[Rollout], *, advance_step: bool = False) -> dict[str, float]:
        """Steps 4 and 5 of :func:`engine.trainer.step.magrpo_step` on scored ``rollouts``: per agent its
        batch, advantages and optimiser steps. Returns the ``agent/<name>/...`` metrics.

        The learning rate follows the schedule at ``self.step`` over ``self.total_steps`` (a
        coordinator may set ``total_steps`` to the number of updates it will make);
        ``advance_step`` counts this update in ``self.step``, as a training step does.
        """
        cfg = self.args
        if any(not node.returns for rollout in rollouts for node in rollout.nodes):
            raise ValueError("update() needs scored rollouts: a rollout(..., score=False) gets its rewards "
                             "from credit(rollout, rewards) first")
        batches = [agent_batch(agent.index, rollouts) for agent in self.agents]
        self.map_agents(lambda agent: score_for_loss(agent, batches[agent.index].samples, cfg))
        for batch in batches:
            fill_advantages(batch, rollouts, cfg)
        factor = lr_factor(self.step, warmup_steps=cfg.warmup_steps, total_steps=self.total_steps,
                           schedule=cfg.lr_scheduler)
        set_learning_rates(self.agents, factor)
        stats = self.map_agents(lambda agent: optimize_agent(agent, batches[agent.index].samples,
                                                             self.update_settings, self.update_rngs[agent.index]))
        if advance_step:
            self.step += 1
        return agent_metrics(self.agents, batches, stats, factor)

    # -- evaluation (engine.trainer.evaluation) ---------------------------------------------------
    def evaluate(self, num_eval_samples: int | None = None, *, greedy: bool | None = None,
                 samples_per_item: int | None = None, sink: Sink | None = None) -> dict[str, float]:
        """``eval/...`` metrics on the first ``num_eval_samples`` eval items
        (:func:`engine.trainer.evaluation.evaluate`)."""
        return evaluate(self, num_eval_samples, greedy=greedy, samples_per_item=samples_per_item, sink=sink)

    def evaluate_items(self, dataset: Any, count: int, *, greedy: bool | None = None,
                       samples_per_item: int | None = None, split: str = "eval") -> EvalOutcome | None:
        """Every item's outcome on the first ``count`` items of ``dataset``
        (:func:`engine.trainer.evaluation.evaluate_items`)."""
        return evaluate_items(self, dataset, count, greedy=greedy, samples_per_item=samples_per_item, split=split)

    def _eval_completions(self, paths: list[list[Any]]) -> list[list[list[str]]]:
        """``[agent][item][turn]`` texts along the eval paths, for CoMLRL's ``eval_logger``."""
        return path_completions(paths, self.num_agents)

    def close(self) -> None:
        """Stop the per-agent worker threads (``mp`` mode) and the rollout engines' server processes
        (``rollout_backend: vllm``; sampling afterwards raises, naming the stopped server)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
            self.tree.pool = None
        for engine in rollout_engines(self.agents):
            engine.close()
