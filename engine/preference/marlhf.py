"""``MARLHFTrainer``: reinforcement learning from a learned team reward (CoMLRL's MARLHF).

``train()`` runs three stages, each resumable:

    collect preference pairs with the task's team reward      (PairCollector, as MADPO)
    fit the joint reward model on them (Bradley-Terry)        (engine.preference.reward_model)
    RL steps with the reward model as the team reward: a MAGRPO-family baseline, or actor-critic
        (rl_algorithm iac/maac: engine.preference.marlhf_actor_critic)

Evaluation keeps the task's own reward, so ``eval/...`` measures the team on the real objective.
The RL stage is the chosen trainer's own (rollouts, updates, reports, checkpoints).
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.preference.collect import PairCollector
from engine.preference.joint_policy import CentralizedRoles, centralize, unread_adapter_problem
from engine.preference.reward_model import LearnedReward, build_reward_model, fit_reward_model
from engine.rewards.team_reward import TeamReward
from engine.schema.preference_configs import MARLHFConfig
from engine.sinks.base import BaseSink, Episode, Sink
from engine.trainer.core import TrainResult
from engine.trainer.magrpo import MAGRPOTrainer
from engine.trainer.rollout import RolloutSettings, TreeBuilder

if TYPE_CHECKING:  # what the stage reads of the trainer it is mixed into (a MAGRPO-family or actor-critic one)
    from engine.trainer.core import TrainerCore as _TrainerHost
else:
    _TrainerHost = object

_CONSTRUCTOR = inspect.signature(MAGRPOTrainer.__init__)
ACTOR_CRITIC_STAGES = {"iac": "engine.preference.marlhf_actor_critic:MARLHFIACTrainer",
                       "maac": "engine.preference.marlhf_actor_critic:MARLHFMAACTrainer"}


class LearnedRewardStage(_TrainerHost):
    """Pairs, a reward model fitted on them, then RL against it: MARLHF's stages over any RL trainer.

    The host trainer (MAGRPO family, or IAC/MAAC in :mod:`engine.preference.marlhf_actor_critic`)
    calls :meth:`_init_learned_reward` at the end of its constructor with the task's team reward and
    says through :meth:`_use_learned_reward` how its RL steps take another team reward.
    """

    if TYPE_CHECKING:  # set by engine.preference.joint_policy.CentralizedRoles for a joint policy
        collection_unparsed_share: float | None

    def _use_learned_reward(self, learned: TeamReward) -> None:
        raise TypeError(f"{type(self).__name__} must define _use_learned_reward")

    def _init_learned_reward(self, task_reward: TeamReward, *, pool: Any = None) -> None:
        cfg = self.args
        self.task_reward = task_reward  # labels the pairs; evaluation keeps the task's reward
        candidates = TreeBuilder(self.agents, self.task_reward, None, RolloutSettings(
            samples_per_node=cfg.preference_num_candidates, num_turns=1, joint_mode=cfg.joint_mode,
            turn_order=cfg.turn_order, early_termination_threshold=None,
            external_prompt_passthrough=cfg.external_prompt_passthrough,
        ), pool=pool)
        self.collector = PairCollector(candidates, self.train_dataset, self.num_train_items,
                                       selection=cfg.pair_selection, limit=cfg.preference_pairs_per_sample,
                                       items_per_chunk=cfg.items_per_step or 1, seed=cfg.seed)
        self.reward_model = build_reward_model(cfg.reward_model_name, self.agents[0], device=cfg.reward_model_device,
                                               max_length=cfg.reward_max_length,
                                               freeze_backbone=cfg.reward_freeze_backbone)
        self.reward_model_metrics: dict[str, float] = {}
        self.learned_reward = TeamReward(LearnedReward(self.reward_model))
        self._use_learned_reward(self.learned_reward)  # the RL stage's team reward

    @property
    def reward_model_trained(self) -> bool:
        return bool(self.reward_model_metrics)

    def train(self, resume_from_checkpoint: str | Path | None = None, checkpoint_dir: str | Path | None = None,
              checkpoint_interval: int | None = None, checkpoint_total_limit: int | None = None, *,
              sink: Sink | None = None) -> TrainResult:
        """Collect the pairs and fit the reward model (each once, continuing a resumed run), then the
        RL steps through the shared loop."""
        self._settle_seed(resuming=resume_from_checkpoint is not None)
        if resume_from_checkpoint is not None:
            self.load_checkpoint(resume_from_checkpoint)
        stop = (sink or self.sink or BaseSink()).should_stop
        if self.collect_counting(lambda: self.collector.collect(stop)) and not self.reward_model_trained:
            self.fit_reward_model()
        return super().train(None, checkpoint_dir, checkpoint_interval, checkpoint_total_limit, sink=sink)

    def _reseed(self, seed: int) -> None:
        super()._reseed(seed)
        self.collector.reseed(seed)

    def collect_counting(self, collect: Any) -> Any:
        return collect()  # CentralizedRoles counts a joint model's unparsed completions

    def fit_reward_model(self, pairs: list[Any] | None = None) -> dict[str, float]:
        """Bradley-Terry training of the reward model on ``pairs`` (default: the collected pairs)."""
        cfg = self.args
        self.reward_model_metrics = fit_reward_model(
            self.reward_model, self.collector.pairs if pairs is None else pairs, epochs=cfg.reward_num_train_epochs,
            batch_size=cfg.reward_train_batch_size, learning_rate=cfg.reward_learning_rate,
            weight_decay=cfg.weight_decay, max_grad_norm=cfg.max_grad_norm, seed=cfg.seed)
        return self.reward_model_metrics

    def train_step(self) -> tuple[dict[str, float], list[Episode]]:
        """An RL step against the reward model; the first also reports the pairs and the reward model."""
        if not self.reward_model_trained:
            raise RuntimeError("MARLHF: the reward model is not trained yet; call train() (it collects pairs and "
                               "fits the reward model first)")
        metrics, episodes = super().train_step()
        if self.step == 1:
            metrics.update({**self.collector.metrics(), **self.reward_model_metrics})
            share = getattr(self, "collection_unparsed_share", None)  # an actor-critic host has none
            if share is not None:
                metrics["centralized/unparsed_share"] = share
        return metrics, episodes

    # -- checkpoints -------------------------------------------------------------------------------
    def _training_state(self) -> dict[str, Any]:
        state = super()._training_state()
        state["preference"] = self.collector.state()
        state["reward_model_metrics"] = dict(self.reward_model_metrics)
        state["reward_model"] = {k: v.detach().cpu().clone() for k, v in self.reward_model.state_dict().items()}
        return state

    def _restore_training_state(self, state: dict[str, Any]) -> None:
        super()._restore_training_state(state)
        self.collector.restore(state["preference"])
        self.reward_model.load_state_dict(state["reward_model"])
        self.reward_model_metrics = {k: float(v) for k, v in state["reward_model_metrics"].items()}


class MARLHFTrainer(CentralizedRoles, LearnedRewardStage, MAGRPOTrainer):
    """RL against a reward model learned from team-reward preference pairs (module docstring).

    The constructor is :class:`MAGRPOTrainer`'s; ``reward_func`` is the task's team reward, used to
    label the pairs and in evaluation. With ``collaboration_mode="centralized"`` one model writes
    every role (``centralized_adapter`` and the arguments as :class:`CentralizedMAGRPOTrainer`
    takes them): the pairs, the reward model and the RL steps see its joint completions, the task's
    reward and evaluation its roles' answers. With ``rl_algorithm`` ``iac`` or ``maac`` the RL stage
    is actor-critic: the constructor returns a
    :class:`engine.preference.marlhf_actor_critic.MARLHFIACTrainer` (``MARLHFMAACTrainer``), which
    takes the same arguments and has the same stages.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        given = {k: v for k, v in kwargs.items() if k != "centralized_adapter"}
        config = _CONSTRUCTOR.bind(None, *args, **given).arguments.get("args")
        stage = ACTOR_CRITIC_STAGES.get(config.rl_algorithm) if isinstance(config, MARLHFConfig) else None
        if cls is MARLHFTrainer and stage is not None:
            module, _, name = stage.partition(":")
            return getattr(importlib.import_module(module), name)(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, *args: Any, centralized_adapter: Any = None, **kwargs: Any) -> None:
        given = _CONSTRUCTOR.bind(self, *args, **kwargs)
        config = given.arguments.get("args")
        if config is not None and not hasattr(config, "rl_algorithm"):
            raise ValueError(f"args: MARLHFTrainer takes a MARLHFConfig, got {type(config).__name__}")
        if isinstance(config, MARLHFConfig) and config.rl_algorithm in ACTOR_CRITIC_STAGES:  # MARLHFTrainer(...) returned another class
            raise ValueError(f"rl_algorithm: {type(self).__name__} runs a MAGRPO-family stage; build MARLHFTrainer "
                             f"itself (it returns the IAC/MAAC trainer), or subclass MARLHFIACTrainer/MARLHFMAACTrainer")
        unread_adapter_problem(config if config is not None else self._default_config(), centralized_adapter)
        if isinstance(config, MARLHFConfig) and config.collaboration_mode == "centralized":  # one model writes every role
            explicit_roles = "num_agents" in given.arguments
            given.apply_defaults()
            a = dict(given.arguments)
            del a["self"]
            self.collaboration, self.role_names = centralize(a, config, centralized_adapter,
                                                             explicit_roles=explicit_roles, role_check=self._role_check)
            super().__init__(**a)
        else:
            super().__init__(*args, **kwargs)
        self._init_learned_reward(self.reward, pool=self.tree.pool)

    def _default_config(self) -> MARLHFConfig:
        return MARLHFConfig()

    def _use_learned_reward(self, learned: TeamReward) -> None:
        self.tree.reward = learned
