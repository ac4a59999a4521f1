"""The IAC and MAAC example configs build and train from a run config; MAGRPO-only settings are refused."""

from __future__ import annotations

import pytest

from engine.actor_critic import IACTrainer, MAACTrainer
from engine.build.run import build_trainer, run_training
from engine.examples import example_path
from engine.schema.configure import trainer_config, trainer_problems
from engine.schema.run_config import ConfigError, load_run_config, parse_run_config
from engine.sinks import MemorySink


def _example(name: str, **trainer):
    data = load_run_config(example_path(name)).model_dump(mode="json")
    data["trainer"].update({"max_new_tokens": 4, "max_steps": 1, "eval_interval": 0, **trainer})
    return parse_run_config(data)


@pytest.mark.parametrize(("name", "cls"), [("iac", IACTrainer), ("maac", MAACTrainer)])
def test_examples_build_the_right_trainer_and_train(tmp_path, name, cls) -> None:
    config = _example(name)
    trainer = build_trainer(config, output_dir=tmp_path)
    assert isinstance(trainer, cls) and trainer.agent_names == ["first", "second"]
    assert trainer.args.num_generations == 4 and trainer.args.agent_learning_rate == 1e-3
    sink = MemorySink()
    result = run_training(config, output_dir=tmp_path / "run", sink=sink)
    assert result.status == "completed" and result.step == 1
    assert "reward/team" in sink.steps[0].metrics and "agent/second/loss" in sink.steps[0].metrics
    assert (tmp_path / "run" / "model" / "agent_1" / "config.json").is_file()


def test_magrpo_only_settings_are_refused_with_the_field_name() -> None:
    config = _example("iac", clip_epsilon=0.2)
    with pytest.raises(ConfigError, match="trainer.clip_epsilon: not used by iac"):
        trainer_config(config.trainer, config.agents)
    # every problem at once, each under the run config's field (what the dashboard's form shows)
    config = _example("iac", clip_epsilon=0.2, joint_mode="cross")
    assert sorted(p.partition(":")[0] for p in trainer_problems(config.trainer, config.agents)) == [
        "trainer.clip_epsilon", "trainer.joint_mode"]
    config = _example("iac", algorithm="marlhf", rl_algorithm="maac", actor_critic={"use_separate_critic": False})
    assert trainer_problems(config.trainer, config.agents) == [
        "trainer.actor_critic.use_separate_critic: only rl_algorithm iac reads it (maac has one centralised critic); "
        "leave it at its default (True)"]
    assert trainer_problems(_example("iac").trainer, config.agents) == []
    # the critic's settings belong to iac/maac only: a MAGRPO config refuses them when it is parsed
    with pytest.raises(ConfigError, match=r"trainer.actor_critic: applies to iac/maac \(and marlhf with rl_algorithm "
                                          r"iac/maac\) only, not to magrpo"):
        _example("iac", algorithm="magrpo", actor_critic={"critic_type": "q"})
