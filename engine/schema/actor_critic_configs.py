"""Actor-critic configs: CoMLRL's ``IACConfig``/``MAACConfig`` field names and defaults, plus extras.

The settings come from :mod:`engine.schema.catalog` (a class has those its algorithm reads, CoMLRL's
first); this module sets CoMLRL's actor-critic defaults where they differ from MAGRPO's (``top_k``
off, 40 epochs, a buffer of 8, one sample per item, logging every step). ``IACConfig(...)`` calls
from CoMLRL scripts work unchanged. Departures, each deliberate:

* ``num_generations > 1`` works with ``num_turns > 1``: each of the K samples of an item continues
  as its own trajectory (K chains per item, no tree), so multi-turn runs are not forced to K = 1.
* ``early_termination_threshold`` defaults to ``None`` (off), as in :class:`engine.schema.configs.MAGRPOConfig`:
  CoMLRL's ``-0.2`` stops every trajectory after turn 1 when rewards are non-negative.
* ``value_clip_range`` clips every critic's update (CoMLRL clips only a value head on the actor);
  MAAC gains the field too (default ``None``: unclipped, as in CoMLRL).
* A MAAC critic is stepped once per joint sample (CoMLRL steps it once per agent, N times).

Every field is validated; an invalid value raises :class:`ValueError` starting with the field name.
"""

from __future__ import annotations

from engine.schema.catalog import ACTOR_CRITIC
from engine.schema.derive import ConfigModel, config_class

ACTOR_CRITIC_DEFAULTS = {"rollout_buffer_size": 8, "top_k": None, "num_train_epochs": 40, "num_generations": 1,
                         "logging_steps": 1}


class _ActorCritic(ConfigModel):
    @property
    def effective_critic_learning_rate(self) -> float:
        """The critics' learning rate (``critic_learning_rate``, else the agents')."""
        return self.critic_learning_rate if self.critic_learning_rate is not None else self.agent_learning_rate


ActorCriticConfig = config_class(
    "ActorCriticConfig", ACTOR_CRITIC, module=__name__, defaults=ACTOR_CRITIC_DEFAULTS,
    bases=(_ActorCritic,), doc="Settings shared by :class:`IACConfig` and :class:`MAACConfig` (CoMLRL's first).",
)
IACConfig = config_class(
    "IACConfig", "iac", module=__name__, defaults={**ACTOR_CRITIC_DEFAULTS, "value_clip_range": 0.2},
    bases=(ActorCriticConfig,),
    doc="Independent actor-critic: every agent has its own critic (CoMLRL's ``IACConfig``). "
        "``use_separate_critic=False`` puts a value head on the agent's own backbone, trained with the actor "
        "by one optimizer (``value_loss_coef``).",
)
MAACConfig = config_class(
    "MAACConfig", "maac", module=__name__, defaults=ACTOR_CRITIC_DEFAULTS, bases=(ActorCriticConfig,),
    doc="Multi-agent actor-critic: one centralised critic reads every agent's observation (CoMLRL's "
        "``MAACConfig``); ``value_clip_range`` is a CoopLab extra (``None`` = unclipped as in CoMLRL).",
)
