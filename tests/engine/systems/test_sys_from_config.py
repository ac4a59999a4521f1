"""The shipped system example config builds and runs end to end (tiny built-in models, few rounds)."""

from __future__ import annotations

import pytest

from engine.examples import example_path
from engine.permissions.operator import OperatorPermissions
from engine.schema.run_config import ConfigError, load_run_config, parse_run_config
from engine.sinks import MemorySink
from engine.systems.from_config import build_system, run_system


def _example(task_modules: tuple[str, ...] = (), **system_overrides):
    data = load_run_config(example_path("system_alternating")).model_dump(mode="json")
    data["trainer"]["max_new_tokens"] = 4
    data["system"].update(system_overrides)
    return parse_run_config(data, task_modules=task_modules)


def test_example_system_runs_and_writes_per_trainer_outputs(tmp_path) -> None:
    config = _example(rounds=3, items_per_round=1)
    sink = MemorySink()
    result = run_system(config, output_dir=tmp_path, sink=sink)
    assert result.status == "completed" and result.step == 3
    # alternating with phase_length 2: first_trainer, first_trainer, second_trainer
    assert [s.metrics["trainer/first_trainer/updated"] for s in sink.steps] == [1.0, 1.0, 0.0]
    assert "trainer/second_trainer/agent/second/loss" in sink.steps[2].metrics
    assert (tmp_path / "model" / "first_trainer" / "agent_0" / "config.json").is_file()
    assert (tmp_path / "model" / "second_trainer" / "agent_0" / "config.json").is_file()
    assert (tmp_path / "checkpoints" / "checkpoint-3" / "trainer_second_trainer").is_dir()
    assert "reward/team" in sink.steps[0].metrics  # the task's reward terms reach the sink
    evals = [(step, m["eval/reward_mean"]) for step, _, m in sink.metrics if "eval/reward_mean" in m]
    assert [step for step, _ in evals] == [0, 3]  # scheduled at round 0, then the final weights
    assert all(0.0 <= value <= 1.0 for _, value in evals)


def test_group_overrides_reach_their_trainer(tmp_path) -> None:
    system = build_system(_example(rounds=1), output_dir=tmp_path)
    assert system.trainers["second_trainer"].agents[0].learning_rate == 2e-3
    assert system.trainers["first_trainer"].agents[0].learning_rate == 1e-3
    assert system.schedule.phase_length == 2
    data = _example(rounds=5).model_dump(mode="json")
    data["trainer"]["max_steps"] = 2  # what `cooplab train --max-steps 2` does
    assert build_system(parse_run_config(data), output_dir=None).total_rounds == 2


def test_a_config_without_a_system_section_is_refused() -> None:
    data = load_run_config(example_path("system_alternating")).model_dump(mode="json")
    data["system"] = None
    with pytest.raises(ConfigError, match="system: this run config has no system section"):
        build_system(parse_run_config(data), output_dir=None)


def only_second(round_index: int, names: list[str]) -> list[str]:
    """A custom schedule loaded by name from a config: the second trainer trains on even rounds."""
    return [names[1]] if round_index % 2 == 0 else []


def test_custom_schedule_loads_from_a_module_path() -> None:
    operator = OperatorPermissions(task_modules=[__name__, "no_such_module_xyz"])
    config = _example(operator.task_modules, rounds=2, schedule={"type": "custom", "function": f"{__name__}:only_second"})
    system = build_system(config, output_dir=None, permissions=operator)
    plan = [system.schedule.trainers_to_update(r, system.names) for r in range(3)]
    assert plan == [["second_trainer"], [], ["second_trainer"]]
    assert system.trainers["first_trainer"].total_steps == 1  # never updated; the LR plan still needs >= 1
    bad = _example(operator.task_modules, schedule={"type": "custom", "function": "no_such_module_xyz:fn"})
    with pytest.raises(ConfigError, match="system.schedule: custom schedule function 'no_such_module_xyz:fn' cannot"):
        build_system(bad, output_dir=None, permissions=operator)
    with pytest.raises(ConfigError, match="'no_such_module_xyz:fn' is not allowed"):
        build_system(bad, output_dir=None)  # parsed under one allowlist, built under none: refused again


def test_custom_schedule_from_a_module_off_the_allowlist_is_refused_without_importing_it():
    for path, reason in [("os:system", "module 'os' is not on the task module allowlist"),
                         (f"{__name__}:only_second", "is not on the task module allowlist"),
                         ("mylab.schedulesevil:fn", "module 'mylab.schedulesevil' is not on"),
                         ("mylab.schedules:_private", "private or dunder attribute")]:
        with pytest.raises(ConfigError) as info:
            _example(("mylab.schedules",), schedule={"type": "custom", "function": path})
        message = str(info.value)
        assert message.startswith("system.schedule.function: ") and reason in message, message
        assert "allowed modules: mylab.schedules" in message and "COOPLAB_TASK_MODULES" in message
    operator = OperatorPermissions(task_modules=[__name__])  # an allowed module lends nothing it imported
    with pytest.raises(ConfigError, match=f"custom schedule function '{__name__}:run_system' is not allowed: it "
                                          "resolves to 'run_system' from module 'engine.systems.from_config'"):
        build_system(_example(operator.task_modules, schedule={"type": "custom", "function": f"{__name__}:run_system"}),
                     output_dir=None, permissions=operator)
