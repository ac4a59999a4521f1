"""A system's rules are written once (engine.schema.system_spec) and say the same to a run config and to
a System built in code: single-turn aligned trainers sampling the run's K, and a schedule that fits."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from engine import MAGRPOConfig, MAGRPOTrainer
from engine.models.tiny import build_tiny_model
from engine.schema.preflight import algorithm_problems
from engine.schema.run_config import ConfigError, parse_run_config
from engine.schema.system_spec import schedule_problems, system_trainer_problems
from engine.systems import Alternating, EveryK, RoundRobin, System, deferred_reward
from engine.systems.schedule import ScheduleError, check_schedule

DATA = [{"prompt": f"Count to {i}:"} for i in range(2)]
K_MESSAGE = "every trainer must sample as many completions as the run (2); remove the override"


def _settings(**overrides) -> SimpleNamespace:
    return SimpleNamespace(**{"num_turns": 1, "joint_mode": "aligned", "num_generations": 2, **overrides})


def test_trainer_rules_by_hand() -> None:
    assert system_trainer_problems({"a": _settings(), "b": _settings()}, 2) == []
    other = _settings(num_generations=3, num_turns=2)
    assert system_trainer_problems({"a": _settings(), "b": other}, 2) == [
        ("b", "num_turns", "a system plays one turn per round; set 1 (multi-turn self-play works with a "
                           "single trainer and a transition)"),
        ("b", "num_generations", K_MESSAGE)]
    crossed = system_trainer_problems({"a": _settings(joint_mode="cross")}, 2)
    assert [field for _, field, _ in crossed] == ["joint_mode"]


def test_schedule_rules_by_hand() -> None:
    names = ["a", "b", "c"]
    assert schedule_problems(None, None, names, alternating=False) == []
    assert schedule_problems(("a", "b"), None, names, alternating=False) == [
        ("order", "leaves out trainers ['c']; list each trainer once (['a', 'b', 'c'])")]
    assert [f for f, _ in schedule_problems(("a", "b", "z", "a"), None, names, alternating=True)] == [
        "order", "order", "order", "type"]  # unknown z, c left out, a twice; three trainers
    assert schedule_problems(None, {"x": 2}, names, alternating=False) == [
        ("every", "unknown trainers ['x']; the trainers are ['a', 'b', 'c']")]


def _run(trainers: list[dict], schedule: dict | None = None) -> dict:
    return {"agents": [{"name": "first"}, {"name": "second"}], "trainer": {"num_generations": 2},
            "system": {"trainers": trainers, **({"schedule": schedule} if schedule else {})}}


def test_a_run_config_and_a_schedule_object_get_the_same_schedule_message() -> None:
    trainers = [{"name": "p", "agents": ["first"]}, {"name": "w", "agents": ["second"]}]
    with pytest.raises(ConfigError) as from_config:
        parse_run_config(_run(trainers, {"type": "round_robin", "order": ["p"]}))
    with pytest.raises(ScheduleError) as from_object:
        check_schedule(RoundRobin(order=("p",)), ["p", "w"])
    message = "leaves out trainers ['w']; list each trainer once (['p', 'w'])"
    assert str(from_config.value).endswith(f"system.schedule.order: {message}")
    assert str(from_object.value) == f"schedule order: {message}"
    with pytest.raises(ScheduleError, match="^schedule every: unknown trainers \\['x'\\]"):
        check_schedule(EveryK(every={"x": 2}), ["p", "w"])


def test_a_run_config_names_the_trainer_that_samples_another_k() -> None:
    trainers = [{"name": "p", "agents": ["first"]},
                {"name": "w", "agents": ["second"], "trainer": {"num_generations": 3}}]
    expected = f"system.trainers.1.trainer.num_generations: {K_MESSAGE}"
    with pytest.raises(ConfigError, match=re.escape(expected)):
        parse_run_config(_run(trainers))


def test_a_systems_trainers_get_the_algorithms_own_rules_before_the_run() -> None:
    """grpo is the single-agent case for one trainer or a system's (checked where every config is built)."""
    message = "'grpo' is the single-agent case; this team has 2 agents (use 'magrpo')"
    group = {"name": "p", "agents": ["first", "second"], "trainer": {"algorithm": "grpo"}}
    config = parse_run_config(_run([group]))
    assert [(p.field, p.message) for p in algorithm_problems(config)] == [
        ("system.trainers.0.trainer.algorithm", message)]
    alone = parse_run_config({"agents": [{"name": "a"}, {"name": "b"}], "trainer": {"algorithm": "grpo"}})
    assert [(p.field, p.message) for p in algorithm_problems(alone)] == [("trainer.algorithm", message)]


def _trainer(seed: int, k: int) -> MAGRPOTrainer:
    model, tok = build_tiny_model("llama", "xs", seed=seed)
    cfg = MAGRPOConfig(num_turns=1, num_generations=k, max_new_tokens=4, eval_interval=0)
    return MAGRPOTrainer(agents=[model], tokenizer=[tok], train_dataset=DATA, reward_func=deferred_reward,
                         args=cfg)


def test_a_system_built_in_code_gets_the_same_message() -> None:
    with pytest.raises(ValueError, match=re.escape(f"trainer 'two': num_generations: {K_MESSAGE}")):
        System({"one": _trainer(0, 2), "two": _trainer(1, 3)}, reward_func=lambda a, b: [0.0],
               train_dataset=DATA, schedule=Alternating())
