"""CoMLRL's ``comlrl.trainers.actor_critic.ac_base``: what IAC and MAAC share.

``ActorCriticTrainerBase`` takes CoMLRL's actor-critic constructor (``agent_model, critic_model,
tokenizer, reward_func, reward_processor, formatters, args, train_dataset, eval_dataset,
model_config, wandb_config, metrics_callback, external_transition, agents, critics``), checks it in
CoMLRL's order with its messages, and trains with CoopLab's trainer of the algorithm.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from engine.comlrl._critics import ActorView, CriticView, save_comlrl_layout
from engine.comlrl._rollouts import comlrl_metrics_callback
from engine.comlrl._wrap import (
    CoMLRLReward,
    CompatTrainer,
    check_devices,
    check_reward_func,
    check_tokenizers,
)
from engine.comlrl.utils.formatters import build_formatters
from engine.comlrl.utils.model_loading import infer_model_name, resolve_model_sources


def _is_model_object(source: Any) -> bool:
    return source is not None and not isinstance(source, str)


def report_domain_metrics(engine: Any, per_item: Callable[[Sequence[Any]], dict[str, float]]) -> None:
    """CoMLRL also calls ``metrics_callback`` on each training rollout and logs what it returns; CoopLab's
    trainer calls it at evaluation only. Its training steps' metrics (``rollout_metrics`` with
    ``split="train"``) get the callback's means over the step's items, under the callback's keys."""
    own = type(engine).rollout_metrics

    def rollout_metrics(rollout: Any, *, split: str = "train") -> dict[str, float]:
        metrics = own(engine, rollout, split=split)
        if split == "train":
            metrics.update(per_item(rollout.chains))
        return metrics

    vars(engine)["rollout_metrics"] = rollout_metrics


class ActorCriticTrainerBase(CompatTrainer):
    """Base of :class:`IACTrainer` and :class:`MAACTrainer` (see the module docstring)."""

    default_config_cls: ClassVar[type]
    _engine_class: ClassVar[type]

    def __init__(
        self,
        agent_model: Any = None,
        critic_model: Any = None,
        tokenizer: Any = None,
        reward_func: Callable | None = None,
        reward_processor: Callable[[float], float] | None = None,
        formatters: Any = None,
        args: Any = None,
        train_dataset: Any = None,
        eval_dataset: Any = None,
        model_config: dict[str, Any] | None = None,
        wandb_config: dict[str, Any] | None = None,
        metrics_callback: Callable | None = None,
        external_transition: Callable | None = None,
        agents: Sequence[Any] | None = None,
        critics: Sequence[Any] | None = None,
        **cooplab_options: Any,
    ) -> None:
        args = args if args is not None else self.default_config_cls()
        sources, critic_sources = self._check(args, agent_model=agent_model, critic_model=critic_model,
                                              tokenizer=tokenizer, reward_func=reward_func, formatters=formatters,
                                              external_transition=external_transition, agents=agents, critics=critics)
        engine = self._engine_class(
            agents=sources, tokenizer=tokenizer, model_config=model_config, train_dataset=train_dataset,
            eval_dataset=eval_dataset, reward_func=CoMLRLReward(reward_func, len(sources)),
            reward_processor=reward_processor, formatters=formatters, external_transition=external_transition,
            args=args, critics=critic_sources,
            metrics_callback=comlrl_metrics_callback(metrics_callback) if metrics_callback is not None else None,
            **cooplab_options)
        self._adopt(engine, reward_func=reward_func, reward_processor=reward_processor, train_dataset=train_dataset,
                    model_name=infer_model_name(sources[0]), wandb_config=wandb_config, model_config=model_config,
                    formatters=formatters)
        if metrics_callback is not None:
            report_domain_metrics(engine, comlrl_metrics_callback(metrics_callback))

    shared_critic: ClassVar[bool] = False  # MAAC: one critic for the team

    @property
    def agents(self) -> list[ActorView]:
        """The actors as CoMLRL shows them (``.model``, ``.value_head``; :class:`ActorView`)."""
        heads = list(self._engine.value_heads) or [None] * len(self._engine.agents)
        return [ActorView(agent.model, head) for agent, head in zip(self._engine.agents, heads, strict=True)]

    @property
    def critics(self) -> list[CriticView]:
        """The critics as CoMLRL shows them (``.model``, ``.value_head``; :class:`CriticView`)."""
        return [CriticView(critic) for critic in self._engine.critics]

    def save_model(self, output_dir: str) -> None:
        """CoMLRL's layout: ``agent_{i}/`` (model, tokenizer, ``value_head.pt`` of a head on the actor),
        IAC's critics in ``agent_{i}/critic/``, MAAC's in ``critic/`` (model + ``value_head.pt``)."""
        save_comlrl_layout(self._engine, output_dir, shared_critic=self.shared_critic)

    def _check(self, args: Any, *, agent_model: Any, critic_model: Any, tokenizer: Any, reward_func: Any,
               formatters: Any, external_transition: Any, agents: Sequence[Any] | None,
               critics: Sequence[Any] | None) -> tuple[list[Any], list[Any] | None]:
        """CoMLRL's checks before any model loads, in its order; returns the agents' and critics' sources."""
        name = self.algorithm_name
        check_reward_func(reward_func)
        if agent_model is None and agents is None:
            raise ValueError("Either agent_model or agents must be provided.")
        self._check_critic_arguments(args, critic_model, critics)
        if agents is None and args.num_agents > 1 and _is_model_object(agent_model):
            raise ValueError(f"Multi-agent {name} requires `agent_model` to be a pretrained identifier string.")
        if agents is not None and tokenizer is None:
            raise ValueError("Tokenizer must be provided when using agents.")
        if args.num_turns > 1 and external_transition is None:
            raise ValueError(f"Multi-turn {name} requires an external_transition.")
        sources, _ = resolve_model_sources(kind="agents", model=agent_model, models=agents,
                                           expected_count=args.num_agents, model_label="agent_model")
        check_tokenizers(tokenizer, sources, agents_given=agents is not None)
        build_formatters(formatters, args.num_agents)
        if args.reference_kl_enabled:
            check_devices(args.reference_devices, args.num_agents, "reference_devices")
        return sources, self._critic_sources(args, critic_model, critics)

    def _check_critic_arguments(self, args: Any, critic_model: Any, critics: Sequence[Any] | None) -> None:
        """What may be said about the critics before the agents are looked at."""

    def _critic_sources(self, args: Any, critic_model: Any, critics: Sequence[Any] | None) -> list[Any] | None:
        """Where the critics come from: each trainer (IAC, MAAC) says, as CoMLRL's own constructors do."""
        raise NotImplementedError(f"{type(self).__name__} must say where its critics come from")
