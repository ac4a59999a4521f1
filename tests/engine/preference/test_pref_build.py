"""``trainer.algorithm: madpo`` through the one build path: its config class, its own settings, and
the settings it refuses (MAGRPO's that it never reads, and madpo's on other algorithms)."""

from __future__ import annotations

import pytest

from engine.examples import example_path
from engine.schema.algorithms import trainer_class
from engine.schema.configure import trainer_config
from engine.schema.preference_configs import MADPOConfig
from engine.schema.run_config import ConfigError, load_run_config, parse_run_config


def _run(**trainer) -> dict:
    return {"agents": [{"name": "first"}, {"name": "second"}], "task": {"name": "quickstart"},
            "trainer": {"algorithm": "madpo", **trainer}}


def test_madpo_run_config_maps_onto_madpo_config() -> None:
    run = parse_run_config(_run(dpo_beta=0.3, pair_selection="Random", reference_free=False, train_batch_size=4))
    cfg = trainer_config(run.trainer, run.agents)
    assert isinstance(cfg, MADPOConfig) and trainer_class("madpo").__name__ == "MADPOTrainer"
    assert (cfg.dpo_beta, cfg.pair_selection, cfg.reference_free, cfg.effective_train_batch_size) == (
        0.3, "random", False, 4)
    assert cfg.agent_names == ["first", "second"] and cfg.num_turns == 1
    example = load_run_config(example_path("madpo"))
    assert isinstance(trainer_config(example.trainer, example.agents), MADPOConfig)


@pytest.mark.parametrize(("algorithm", "setting", "value"), [
    ("madpo", "clip_epsilon", 0.2), ("madpo", "num_generations", 8), ("madpo", "advantage_mode", "rloo"),
    ("magrpo", "dpo_beta", 0.5), ("iac", "preference_num_candidates", 4),
])
def test_settings_an_algorithm_does_not_read_are_refused(algorithm, setting, value) -> None:
    run = parse_run_config(_run(algorithm=algorithm, **{setting: value}))
    with pytest.raises(ConfigError, match=f"trainer.{setting}: not used by {algorithm}"):
        trainer_config(run.trainer, run.agents)


def test_madpo_refuses_multi_turn_by_name() -> None:
    run = parse_run_config(_run(num_turns=2))
    with pytest.raises(ConfigError, match="trainer.num_turns: MADPO is single-turn"):
        trainer_config(run.trainer, run.agents)


def test_collaboration_mode_centralized_is_the_preference_trainers_and_refused_by_name_elsewhere() -> None:
    from engine import MADPOConfig, MADPOIterConfig, MARLHFConfig, MARLHFIterConfig

    for cls in (MADPOConfig, MADPOIterConfig, MARLHFConfig, MARLHFIterConfig):
        assert cls(collaboration_mode="Centralized").collaboration_mode == "centralized"
