"""CoopLab's training library: cooperative multi-LLM reinforcement learning (MAGRPO family).

The public names load lazily, so ``import engine.spec`` (the run-config schema) does not import
torch. ``from engine import MAGRPOConfig, MAGRPOTrainer`` works as in CoMLRL.
"""

from __future__ import annotations

from engine.lazy import lazy_exports

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "RunConfig": "engine.spec",
    "AgentSpec": "engine.spec",
    "TaskSpec": "engine.spec",
    "TrainerSpec": "engine.spec",
    "ConfigError": "engine.spec",
    "load_run_config": "engine.spec",
    "parse_run_config": "engine.spec",
    "Sink": "engine.sinks.base",
    "BaseSink": "engine.sinks.base",
    "Episode": "engine.sinks.base",
    "TurnRecord": "engine.sinks.base",
    "MAGRPOConfig": "engine.config",
    "MAREINFORCEConfig": "engine.config",
    "MAReMaxConfig": "engine.config",
    "MARLOOConfig": "engine.config",
    "MAGRPOTrainer": "engine.trainer",
    "MAREINFORCETrainer": "engine.trainer",
    "MAReMaxTrainer": "engine.trainer",
    "MARLOOTrainer": "engine.trainer",
    "TrainResult": "engine.trainer",
    "RewardProcessors": "engine.rewards",
    "build_trainer": "engine.build",
    "run_training": "engine.build",
    "IACConfig": "engine.actor_critic",
    "IACTrainer": "engine.actor_critic",
    "MAACConfig": "engine.actor_critic",
    "MAACTrainer": "engine.actor_critic",
    "MADPOConfig": "engine.preference.config",
    "MADPOTrainer": "engine.preference.madpo",
    "PreferencePair": "engine.preference.pairs",
    "CentralizedMAGRPOConfig": "engine.preference.config",
    "MARLHFConfig": "engine.preference.config",
    "MADPOIterConfig": "engine.preference.config",
    "MADPOIterTrainer": "engine.preference.madpo_iter",
    "MARLHFIterConfig": "engine.preference.config",
    "MARLHFIterTrainer": "engine.preference.marlhf_iter",
    "MARLHFTrainer": "engine.preference.marlhf",
    "JointRewardModel": "engine.preference.reward_model",
    "CentralizedMAGRPOTrainer": "engine.preference.centralized_magrpo",
    "TaggedCentralizedComparatorAdapter": "engine.preference.centralized",
    "CentralizedComparatorParseError": "engine.preference.centralized",
    "System": "engine.systems",
    "SystemSpec": "engine.systems",
    "build_system": "engine.systems",
    "deferred_reward": "engine.systems",
    "AllTogether": "engine.systems",
    "Alternating": "engine.systems",
    "RoundRobin": "engine.systems",
    "EveryK": "engine.systems",
    "Custom": "engine.systems",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
