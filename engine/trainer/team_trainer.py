"""What a MAGRPO trainer is besides its step: CoMLRL's constructor, the rollout and credit calls a
coordinator makes, evaluation and ``close()``.

:class:`TeamTrainer` sets up the team (agents, reward, rollout tree, update settings, schedule) and
holds the calls that run outside a training step; :class:`engine.trainer.magrpo.MAGRPOTrainer`, the
class users construct, adds the step, ``update()`` and the per-agent map the step runs on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.rewards.team_reward import TeamReward
from engine.schema.algorithms import TrainerConfig
from engine.schema.configs import MAGRPOConfig
from engine.schema.rules import team_problems
from engine.sinks.base import Sink
from engine.trainer.agents import rollout_engines
from engine.trainer.core import TrainerCore
from engine.trainer.evaluation import EvalOutcome, evaluate, evaluate_items, path_completions
from engine.trainer.losses import UpdateSettings
from engine.trainer.rollout import Rollout, RolloutSettings, TreeBuilder, assign_returns, nodes_per_item
from engine.trainer.setup import comlrl_agents
from engine.trainer.threads import agent_threads


class TeamTrainer(TrainerCore):
    """A team of agents trained over a rollout tree: the set-up and every call besides the step.

    Arguments up to ``args`` are CoMLRL's; ``agents`` may also be
    :class:`engine.trainer.setup.AgentSetup` records, one per agent, with every other per-agent
    argument left unset (the run-config build passes them). The keyword-only extras: ``sink`` (where reports go;
    nothing is reported by default), ``agent_names``, ``agent_learning_rates``, ``agent_generation``
    (per-agent sampling overrides: max_new_tokens, temperature, top_p, top_k), ``system_prompts``,
    ``eval_check(item, agent_completions) -> bool`` (enables pass@k) and ``output_dir`` (default
    checkpoint location). CoMLRL's ``wandb_config`` (when no ``sink`` is given) reports to a
    ``WandbSink``; otherwise nothing goes to wandb.
    """

    shards_agents = False  # engine.distributed.trainer.FSDPMAGRPOTrainer: each agent sharded over the ranks

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
        if cfg.parallel_training == "fsdp" and not self.shards_agents:
            raise ValueError("parallel_training='fsdp' is trained by engine.distributed.trainer.FSDPMAGRPOTrainer on "
                             "the ranks of a torchrun launch (cooplab train starts it, docs/gpu.md); use 'auto', "
                             "'none' or 'mp' here")
        team = comlrl_agents(cfg, agent_model=agent_model, agents=agents, num_agents=num_agents,
                             tokenizer=tokenizer, formatters=formatters, agent_names=agent_names,
                             agent_learning_rates=agent_learning_rates, agent_generation=agent_generation,
                             system_prompts=system_prompts)
        for problem in team_problems(cfg.credit_assignment, len(team)):
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
            samples_per_node=cfg.num_generations, num_turns=cfg.num_turns, joint_mode=cfg.joint_mode,
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

    def _default_config(self) -> TrainerConfig:  # the preference trainers built on this one return theirs
        return MAGRPOConfig()

    # -- the step in two calls, for a coordinator (engine.systems); update() is MAGRPOTrainer's -------
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
        returns are then computed with this trainer's discount, ready for ``update()``."""
        credit_rollout(rollout, rewards, terms)
        assign_returns(rollout, self.args.discount)

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


def credit_rollout(rollout: Rollout, rewards: Sequence[Sequence[float]],
                   terms: Mapping[str, Sequence[float]] | Sequence[Mapping[str, Sequence[float]]] | None) -> None:
    """Rewards from outside for an unscored single-turn rollout: ``rewards[n][j]`` for item n's joint
    action j, ``terms`` per-term values of the same shape (one mapping per item, or one for all)."""
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

