"""From a run config to a trainer: field mapping, weight sharing, run_training outputs, examples."""

from __future__ import annotations

import dataclasses

import pytest

from engine.build.run import build_trainer, run_training
from engine.examples import example_names, example_path
from engine.schema.configs import MAGRPOConfig
from engine.schema.configure import trainer_config
from engine.schema.run_config import ConfigError, TrainerSpec, load_run_config, parse_run_config
from engine.sinks import MemorySink


def _config(**trainer) -> dict:
    values = {"max_steps": 2, "num_generations": 2, "max_new_tokens": 4, "rollout_buffer_size": 1,
              "eval_interval": 0, "agent_learning_rate": 1e-3}
    values.update(trainer)
    return {
        "name": "t",
        "agents": [{"name": "first", "model": "builtin:tiny-llama"},
                   {"name": "second", "model": "builtin:tiny-llama", "share_weights_with": "first",
                    "learning_rate": 2e-3, "max_new_tokens": 3}],
        "task": {"name": "quickstart", "params": {"num_items": 4, "eval_items": 1}},
        "trainer": values,
    }


def test_every_trainer_spec_field_is_described_and_reaches_the_config() -> None:
    from engine.schema.preference_configs import MADPOIterConfig, MARLHFConfig, MARLHFIterConfig

    config_fields = {f.name for cls in (MAGRPOConfig, MADPOIterConfig, MARLHFConfig, MARLHFIterConfig)
                     for f in dataclasses.fields(cls)}
    for name, field in TrainerSpec.model_fields.items():
        assert field.description, f"TrainerSpec.{name} has no description"
        assert name in config_fields or name in {"algorithm", "device", "torch_dtype", "actor_critic"}, name


@pytest.mark.parametrize(("algorithm", "mode"), [("magrpo", "mean"), ("mareinforce", "raw"), ("maremax", "max"),
                                                  ("marloo", "rloo")])
def test_algorithm_picks_the_baseline(algorithm: str, mode: str) -> None:
    run = parse_run_config(_config(algorithm=algorithm))
    cfg = trainer_config(run.trainer, run.agents)
    assert cfg.advantage_mode == mode and cfg.agent_names == ["first", "second"]
    assert cfg.agent_devices == ["cpu"] and cfg.max_steps == 2


def test_unsupported_algorithm_choices_name_the_field() -> None:
    run = parse_run_config(_config(algorithm="grpo"))
    with pytest.raises(ConfigError, match="trainer.algorithm"):
        trainer_config(run.trainer, run.agents)


def test_one_build_path_gives_each_algorithm_its_config_class() -> None:
    from engine.schema.actor_critic_configs import IACConfig, MAACConfig
    from engine.schema.configs import MAGRPOConfig

    for algorithm, cls, mode in (("magrpo", MAGRPOConfig, "mean"), ("marloo", MAGRPOConfig, "rloo"),
                                 ("iac", IACConfig, None), ("maac", MAACConfig, None)):
        run = parse_run_config(_config(algorithm=algorithm))
        cfg = trainer_config(run.trainer, run.agents)
        assert type(cfg) is cls and cfg.agent_names == [a.name for a in run.agents]
        assert getattr(cfg, "advantage_mode", None) == mode


def test_spec_rejects_bad_fields_by_name() -> None:
    with pytest.raises(ConfigError, match="trainer.num_generations"):
        parse_run_config(_config(num_generations=1))
    with pytest.raises(ConfigError, match="trainer"):
        parse_run_config(_config(turn_order="sequential", joint_mode="cross"))


def test_build_trainer_shares_weights_and_applies_agent_overrides(tmp_path) -> None:
    trainer = build_trainer(parse_run_config(_config()), output_dir=tmp_path)
    first, second = trainer.agents
    assert first.model is second.model and first.optimizer is not second.optimizer
    assert (first.learning_rate, second.learning_rate) == (1e-3, 2e-3)
    assert (first.generation.max_new_tokens, second.generation.max_new_tokens) == (4, 3)
    assert trainer.agent_names == ["first", "second"]


def test_the_build_hands_each_agent_to_the_trainer_as_one_record() -> None:
    from engine.build.team import Team, agent_setups

    run = parse_run_config(_config())
    model, tokenizer = object(), object()  # one loaded model shared by both agents
    setups = agent_setups(Team(list(run.agents), [model, model], [tokenizer, tokenizer]), ["fmt0", "fmt1"])
    assert [(s.name, s.model, s.tokenizer, s.formatter) for s in setups] == [
        ("first", model, tokenizer, "fmt0"), ("second", model, tokenizer, "fmt1")]
    assert [(s.learning_rate, s.max_new_tokens) for s in setups] == [(None, None), (2e-3, 3)]


def test_multi_turn_on_a_single_turn_task_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="trainer.num_turns"):
        build_trainer(parse_run_config(_config(num_turns=2)), output_dir=tmp_path)


def test_run_training_writes_config_checkpoint_and_models(tmp_path) -> None:
    sink = MemorySink()
    result = run_training(parse_run_config(_config()), output_dir=tmp_path, sink=sink)
    assert result.status == "completed" and result.step == 2 and result.env_step == 4
    assert result.last_checkpoint == str(tmp_path / "checkpoints" / "checkpoint-2")
    assert load_run_config(tmp_path / "config.yaml").name == "t"
    assert (tmp_path / "model" / "agent_1" / "config.json").is_file()
    assert [s.step for s in sink.steps] == [1, 2] and sink.finished == ["completed"]
    resumed = run_training(parse_run_config(_config(max_steps=3)), output_dir=tmp_path / "again", sink=MemorySink(),
                           resume_from=result.last_checkpoint)
    assert resumed.step == 3 and resumed.env_step == 6


@pytest.mark.parametrize("name", example_names())
def test_example_configs_validate(name: str) -> None:
    """Each shipped example parses, and the parsed config names what its file says: the run, the
    agents and their models, the task, the algorithm and every trainer setting written there, the
    system's trainers; its task params and trainer config build for those agents."""
    from engine.schema.algorithms import CONFIG_CLASSES
    from engine.schema.safe_yaml import load_yaml
    from engine.tasks import get_task_info, validate_params

    path = example_path(name)
    written = load_yaml(path.read_text(encoding="utf-8"), source=str(path))
    config = load_run_config(path)
    assert config.name == written["name"] and config.task.name == written["task"]["name"]
    names = [agent["name"] for agent in written["agents"]]
    assert [agent.name for agent in config.agents] == names
    assert [agent.model for agent, spec in zip(config.agents, written["agents"], strict=True) if "model" in spec] == [
        spec["model"] for spec in written["agents"] if "model" in spec]
    assert {key: getattr(config.trainer, key) for key in written["trainer"]} == written["trainer"]
    assert config.trainer.algorithm == written["trainer"].get("algorithm", "magrpo")
    params = validate_params(get_task_info(config.task.name), config.task.params)
    assert params.model_dump().items() >= (written["task"].get("params") or {}).items()
    if "system" in written:
        assert [group.name for group in config.system.trainers] == [g["name"] for g in written["system"]["trainers"]]
    else:
        assert config.system is None
    built = trainer_config(config.trainer, config.agents)
    assert type(built) is CONFIG_CLASSES[config.trainer.algorithm] and built.agent_names == names


def test_examples_are_shipped() -> None:
    assert {"quickstart", "shared-sequential", "humaneval-smollm2", "centralized_madpo"} <= set(example_names())
    with pytest.raises(FileNotFoundError, match="available"):
        example_path("missing")
