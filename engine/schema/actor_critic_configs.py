"""Actor-critic configs: CoMLRL's ``IACConfig``/``MAACConfig`` field names and defaults, plus extras.

The settings come from :mod:`engine.schema.catalog`; this module chooses them and sets CoMLRL's
actor-critic defaults where they differ from MAGRPO's (``top_k`` off, 40 epochs, a buffer of 8,
one sample per item, logging every step). ``IACConfig(...)`` calls from CoMLRL scripts work
unchanged. Departures, each deliberate:

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

from engine.schema.derive import ConfigModel, config_class

COMLRL_SETTINGS = (
    "agent_learning_rate", "critic_learning_rate", "rollout_buffer_size", "train_batch_size", "value_loss_coef",
    "advantage_normalization", "max_new_tokens", "temperature", "top_p", "top_k", "num_train_epochs",
    "critic_type", "critic_value_head_hidden_dim", "num_agents", "num_turns", "parallel_training",
    "agent_devices", "critic_devices", "external_prompt_passthrough", "discount", "num_generations",
    "eval_interval", "eval_num_samples", "eval_batch_size", "early_termination_threshold", "logging_steps",
    "reference_kl_enabled", "reference_kl_coef", "reference_devices",
)
EXTRA_SETTINGS = (
    "loss_type", "max_grad_norm", "weight_decay", "seed", "shuffle", "items_per_step", "max_steps", "eval_greedy",
    "rollout_dtype",
    "checkpoint_interval", "checkpoint_total_limit", "best_checkpoint_metric", "best_checkpoint_mode",
    "transcripts_per_step", "gradient_checkpointing",
    "model_config", "agent_names",
)
ACTOR_CRITIC_DEFAULTS = {"rollout_buffer_size": 8, "top_k": None, "num_train_epochs": 40, "num_generations": 1,
                         "logging_steps": 1}


class _ActorCritic(ConfigModel):
    group_baseline = False  # a critic is the baseline: one sample per item is enough

    @property
    def effective_critic_learning_rate(self) -> float:
        """The critics' learning rate (``critic_learning_rate``, else the agents')."""
        return self.critic_learning_rate if self.critic_learning_rate is not None else self.agent_learning_rate


ActorCriticConfig = config_class(
    "ActorCriticConfig", COMLRL_SETTINGS + EXTRA_SETTINGS, module=__name__, defaults=ACTOR_CRITIC_DEFAULTS,
    bases=(_ActorCritic,), doc="Settings shared by :class:`IACConfig` and :class:`MAACConfig` (CoMLRL's first).",
)
IACConfig = config_class(
    "IACConfig", COMLRL_SETTINGS + EXTRA_SETTINGS + ("use_separate_critic", "value_clip_range", "value_head_hidden_dim"),
    module=__name__, defaults={**ACTOR_CRITIC_DEFAULTS, "value_clip_range": 0.2}, bases=(ActorCriticConfig,),
    algorithm_name="iac",
    doc="Independent actor-critic: every agent has its own critic (CoMLRL's ``IACConfig``). "
        "``use_separate_critic=False`` puts a value head on the agent's own backbone, trained with the actor "
        "by one optimizer (``value_loss_coef``).",
)
MAACConfig = config_class(
    "MAACConfig", COMLRL_SETTINGS + EXTRA_SETTINGS + ("value_clip_range",), module=__name__,
    defaults=ACTOR_CRITIC_DEFAULTS, bases=(ActorCriticConfig,), algorithm_name="maac",
    doc="Multi-agent actor-critic: one centralised critic reads every agent's observation (CoMLRL's "
        "``MAACConfig``); ``value_clip_range`` is a CoopLab extra (``None`` = unclipped as in CoMLRL).",
)
