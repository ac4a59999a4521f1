"""MARLHF with an actor-critic RL stage (``rl_algorithm`` ``iac`` or ``maac``, as CoMLRL offers).

The stages are MARLHF's (:class:`engine.preference.marlhf.LearnedRewardStage`: pairs labelled by the
task's reward, a reward model fitted on them); the RL steps are :class:`engine.actor_critic.iac.IACTrainer`'s
or :class:`engine.actor_critic.maac.MAACTrainer`'s with the learned reward as every agent's reward,
while evaluation keeps the task's. ``MARLHFTrainer(args=MARLHFConfig(rl_algorithm="iac"), ...)``
returns one of these; they take MARLHF's (MAGRPO's) constructor arguments, and the critics come from
the config's critic settings (``critic_model_name``: the critics' backbone, default a copy of each
agent's model; ``critic_learning_rate``, ``critic_devices``, ``use_separate_critic``, ``critic_type``,
``value_loss_coef``, ``value_clip_range``, the value heads' widths).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Literal

from engine.actor_critic.base import ActorCriticTrainerBase
from engine.actor_critic.iac import IACTrainer
from engine.actor_critic.maac import MAACTrainer
from engine.actor_critic.rollout import AgentRewards
from engine.preference.marlhf import LearnedRewardStage
from engine.rewards.team_reward import TeamReward
from engine.schema.preference_configs import MARLHFConfig
from engine.trainer.magrpo import MAGRPOTrainer

_MARLHF = inspect.signature(MAGRPOTrainer.__init__)
_ACTOR_CRITIC = set(inspect.signature(ActorCriticTrainerBase.__init__).parameters) - {"self"}


class _ActorCriticStage(LearnedRewardStage):
    rl_algorithm: Literal["iac", "maac"] = "iac"
    if TYPE_CHECKING:  # set by the actor-critic trainer it is mixed into
        reward_func: Any

    def __init__(self, *args: Any, centralized_adapter: Any = None, **kwargs: Any) -> None:
        given = _MARLHF.bind(self, *args, **kwargs)
        explicit_agents = given.arguments.get("num_agents")
        given.apply_defaults()
        a = dict(given.arguments)
        config = a["args"] if a["args"] is not None else self._default_config()
        if not isinstance(config, MARLHFConfig) or config.rl_algorithm != self.rl_algorithm:
            got = config.rl_algorithm if isinstance(config, MARLHFConfig) else type(config).__name__
            raise ValueError(f"args: {type(self).__name__} takes a MARLHFConfig with rl_algorithm="
                             f"{self.rl_algorithm!r}, got {got!r}")
        if centralized_adapter is not None:
            raise ValueError("centralized_adapter: a centralized MARLHF runs a MAGRPO-family RL stage; set "
                             "rl_algorithm to magrpo, mareinforce, maremax or marloo")
        if a["eval_check"] is not None:
            raise ValueError("eval_check: pass@k is reported by MAGRPO-family stages; an iac/maac stage evaluates "
                             "with the task's reward and eval_logger only")
        if explicit_agents is not None and explicit_agents != config.num_agents:  # the critics follow the config's
            raise ValueError(f"num_agents: {explicit_agents} agents, but args.num_agents is {config.num_agents}; "
                             f"they must match")
        ac = {k: v for k, v in a.items() if k in _ACTOR_CRITIC}
        super().__init__(**{**ac, "args": config, "critic_model": config.critic_model_name})
        self._init_learned_reward(TeamReward(self.reward_func, self.rewards.processor))

    def _default_config(self) -> MARLHFConfig:
        return MARLHFConfig(rl_algorithm=self.rl_algorithm, num_generations=1)

    def _use_learned_reward(self, learned: TeamReward) -> None:
        self.rewards = AgentRewards(learned.reward_func, None, self.num_agents)  # evaluation keeps eval_rewards


class MARLHFIACTrainer(_ActorCriticStage, IACTrainer):
    """MARLHF whose RL stage is independent actor-critic (see the module docstring)."""

    rl_algorithm = "iac"


class MARLHFMAACTrainer(_ActorCriticStage, MAACTrainer):
    """MARLHF whose RL stage is multi-agent actor-critic with a centralised critic (module docstring)."""

    rl_algorithm = "maac"
