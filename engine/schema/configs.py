"""Trainer configuration: CoMLRL's ``MAGRPOConfig`` field names and defaults, plus CoopLab's extras.

The settings come from :mod:`engine.schema.catalog` (each declared once, with its bounds and
description); this module only chooses them. The first block mirrors CoMLRL 1.4.3 exactly (name
and default), so a CoMLRL script's ``MAGRPOConfig(...)`` call works unchanged; the second adds what
CoMLRL lacks (clipping, schedules, seeds, checkpoints, reporting). Values are validated on
construction and on assignment, and an invalid value raises :class:`ValueError` whose message starts
with the field name. ``advantage_mode=None`` means the algorithm's baseline.

Two deliberate departures from CoMLRL's defaults:

* ``early_termination_threshold`` defaults to ``None`` (off). CoMLRL's ``-0.2`` stops expanding a
  branch once the node's mean reward is *above* -0.2, which only means "nearly solved" for tasks
  whose rewards are shifted to be <= 0 (its code task shifts by -4). With ordinary non-negative
  rewards every branch would stop after turn 1 and multi-turn training would silently become
  single-turn. Set it explicitly when your reward scale makes it meaningful.
* ``discount`` is honoured: returns are ``r_t + discount * mean(child returns)`` (CoMLRL 1.4.3
  ignores it and always sums undiscounted).
"""

from __future__ import annotations

from engine.schema.derive import config_class, subclass

COMLRL_SETTINGS = (
    "num_train_epochs", "agent_learning_rate", "logging_steps", "num_agents", "parallel_training", "agent_devices",
    "num_generations", "max_new_tokens", "temperature", "top_p", "top_k", "num_turns", "discount", "joint_mode",
    "early_termination_threshold", "external_prompt_passthrough", "eval_interval", "eval_num_samples",
    "eval_batch_size", "rollout_buffer_size", "train_batch_size", "advantage_normalization", "advantage_mode",
    "reference_kl_enabled", "reference_kl_coef", "reference_devices",
)
EXTRA_SETTINGS = (
    "turn_order", "loss_type", "clip_epsilon", "num_inner_epochs", "reference_kl_mode", "max_grad_norm",
    "weight_decay", "lr_scheduler", "warmup_steps", "gradient_checkpointing", "seed", "shuffle",
    "per_agent_normalization", "items_per_step", "fast_decode", "rollout_dtype", "micro_batch_size", "max_steps", "eval_greedy",
    "eval_samples_per_item", "checkpoint_interval", "checkpoint_total_limit", "best_checkpoint_metric",
    "best_checkpoint_mode", "transcripts_per_step", "model_config", "agent_names",
)

MAGRPOConfig = config_class(
    "MAGRPOConfig", COMLRL_SETTINGS + EXTRA_SETTINGS, module=__name__,
    doc="Settings of a :class:`engine.trainer.MAGRPOTrainer` run (CoMLRL 1.4.3's names and defaults first).",
)
MAREINFORCEConfig = subclass(
    MAGRPOConfig, "MAREINFORCEConfig", module=__name__, forced_advantage_mode="raw", algorithm_name="mareinforce",
    doc="MAGRPO with no baseline (``advantage_mode='raw'``), as CoMLRL's MAREINFORCE.",
)
MAReMaxConfig = subclass(
    MAGRPOConfig, "MAReMaxConfig", module=__name__, forced_advantage_mode="max", algorithm_name="maremax",
    doc="MAGRPO with the group maximum as baseline (``advantage_mode='max'``), as CoMLRL's MAReMax.",
)
MARLOOConfig = subclass(
    MAGRPOConfig, "MARLOOConfig", module=__name__, forced_advantage_mode="rloo", algorithm_name="marloo",
    doc="MAGRPO with the leave-one-out baseline (``advantage_mode='rloo'``), as CoMLRL's MARLOO.",
)
