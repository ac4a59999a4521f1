"""CoopLab's training library: cooperative multi-LLM reinforcement learning (MAGRPO family).

The public names load lazily, so ``import engine.schema.run_config`` (the run-config schema) does not import
torch. ``from engine import MAGRPOConfig, MAGRPOTrainer`` works as in CoMLRL.
"""

from __future__ import annotations

from engine.lazy import lazy_exports

# module -> the public names it defines
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "engine.schema.run_config": ("RunConfig", "AgentSpec", "TaskSpec", "TrainerSpec", "ConfigError", "load_run_config",
        "parse_run_config"),
    "engine.sinks.base": ("Sink", "BaseSink", "Episode", "TurnRecord"),
    "engine.schema.configs": ("MAGRPOConfig", "MAREINFORCEConfig", "MAReMaxConfig", "MARLOOConfig"),
    "engine.trainer": ("MAGRPOTrainer", "MAREINFORCETrainer", "MAReMaxTrainer", "MARLOOTrainer",
        "TrainResult"),
    "engine.rewards.team_reward": ("RewardProcessors",),
    "engine.build.run": ("build_trainer", "run_training"),
    "engine.actor_critic": ("IACConfig", "IACTrainer", "MAACConfig", "MAACTrainer"),
    "engine.schema.preference_configs": ("MADPOConfig", "CentralizedMAGRPOConfig", "MARLHFConfig", "MADPOIterConfig",
        "MARLHFIterConfig"),
    "engine.preference.madpo": ("MADPOTrainer",),
    "engine.preference.pairs": ("PreferencePair",),
    "engine.preference.madpo_iter": ("MADPOIterTrainer",),
    "engine.preference.marlhf": ("MARLHFTrainer",),
    "engine.preference.marlhf_iter": ("MARLHFIterTrainer",),
    "engine.preference.reward_model": ("JointRewardModel",),
    "engine.preference.centralized_magrpo": ("CentralizedMAGRPOTrainer",),
    "engine.preference.centralized": ("TaggedCentralizedComparatorAdapter", "CentralizedComparatorParseError",
        "EqualPartsCentralizedAdapter"),
    "engine.systems": ("System", "SystemSpec", "build_system", "deferred_reward", "AllTogether",
        "Alternating", "RoundRobin", "EveryK", "Custom"),
})
