"""Schedules as data: which trainers update after each round, checked by hand; and spec validation."""

from __future__ import annotations

import pytest

from engine.schema.run_config import ConfigError, parse_run_config
from engine.schema.system_spec import parse_system_spec
from engine.systems.schedule import (
    AllTogether,
    Alternating,
    Custom,
    EveryK,
    RoundRobin,
    ScheduleError,
    check_schedule,
)

NAMES = ["a", "b", "c"]


def _plan(schedule, names, rounds: int) -> list[list[str]]:
    return [schedule.trainers_to_update(r, names) for r in range(rounds)]


def test_alternating_with_phases() -> None:
    assert _plan(Alternating(), ["a", "b"], 4) == [["a"], ["b"], ["a"], ["b"]]
    assert _plan(Alternating(phase_length=2, order=("b", "a")), ["a", "b"], 5) == [["b"], ["b"], ["a"], ["a"], ["b"]]


def test_round_robin_every_k_all_together_and_custom() -> None:
    assert _plan(RoundRobin(), NAMES, 4) == [["a"], ["b"], ["c"], ["a"]]
    # a every round, b after rounds 1, 3 (every 2nd), c after round 2 (every 3rd)
    assert _plan(EveryK(every={"b": 2, "c": 3}), NAMES, 4) == [["a"], ["a", "b"], ["a", "c"], ["a", "b"]]
    assert _plan(AllTogether(), NAMES, 1) == [NAMES]
    assert _plan(Custom(lambda r, names: names[r % 2:]), NAMES, 2) == [NAMES, ["b", "c"]]


def test_bad_schedules_are_refused_with_the_fix() -> None:
    with pytest.raises(ScheduleError, match="exactly 2 trainers.*round_robin"):
        check_schedule(Alternating(), NAMES)
    with pytest.raises(ScheduleError, match="unknown trainers \\['z'\\]"):
        check_schedule(EveryK(every={"z": 2}), NAMES)
    with pytest.raises(ScheduleError, match="leaves out trainers \\['c'\\]"):
        check_schedule(RoundRobin(order=("a", "b")), NAMES)
    with pytest.raises(ScheduleError, match="returned unknown trainers \\['q'\\] at round 0"):
        Custom(lambda r, names: ["q"]).trainers_to_update(0, NAMES)
    with pytest.raises(ScheduleError, match="phase_length"):
        RoundRobin(phase_length=0)


def _config(system: dict, **trainer) -> object:
    return parse_run_config({
        "agents": [{"name": "first"}, {"name": "second"}],
        "trainer": {"num_generations": 2, **trainer},
        "system": system,
    })


def test_spec_accepts_a_valid_system() -> None:
    spec = parse_system_spec(_config({"trainers": [{"name": "p", "agents": ["first"]},
                                                   {"name": "w", "agents": ["second"],
                                                    "trainer": {"agent_learning_rate": 1e-4}}],
                                      "schedule": {"type": "alternating", "phase_length": 2}, "rounds": 4}))
    assert spec.schedule.type == "alternating" and spec.schedule.phase_length == 2 and spec.rounds == 4


@pytest.mark.parametrize(("system", "message"), [
    ({"trainers": [{"name": "p", "agents": ["first", "nobody"]}, {"name": "w", "agents": ["second"]}]},
     "system.trainers.0.agents: 'nobody' is not an agent"),
    ({"trainers": [{"name": "p", "agents": ["first"]}]}, "agents \\['second'\\] belong to no trainer"),
    ({"trainers": [{"name": "p", "agents": ["first", "second"]}, {"name": "w", "agents": ["second"]}]},
     "'second' is already trained by 'p'"),
    ({"trainers": [{"name": "p", "agents": ["first"]}, {"name": "w", "agents": ["second"]}],
      "schedule": {"type": "sometimes"}}, "system.schedule"),
    ({"trainers": [{"name": "p", "agents": ["first"]}, {"name": "w", "agents": ["second"]}],
      "schedule": {"type": "alternating", "phase_length": 0}}, "system.schedule.alternating.phase_length"),
    ({"trainers": [{"name": "p", "agents": ["first"], "trainer": {"num_turns": 2}},
                   {"name": "w", "agents": ["second"]}]}, "system.trainers.0.trainer.num_turns: a system plays one"),
    ({"trainers": [{"name": "p", "agents": ["first"], "trainer": {"algorithm": "iac"}},
                   {"name": "w", "agents": ["second"]}]}, "system.trainers.0.trainer.algorithm: 'iac' cannot"),
    ({"trainers": [{"name": "p", "agents": ["first"], "trainer": {"lr": 1}},
                   {"name": "w", "agents": ["second"]}]}, "system.trainers.0.trainer.lr: unknown field; allowed here: .*agent_learning_rate"),
    ({"trainers": [{"name": "p", "agents": ["first"]}, {"name": "w", "agents": ["second"]}],
      "schedule": {"type": "every_k", "every": {"x": 2}}}, "system.schedule.every: unknown trainers \\['x'\\]"),
    ({"trainers": [{"name": "p", "agents": ["first"]}, {"name": "w", "agents": ["second"]}],
      "schedule": {"type": "alternating", "phase_lenght": 2}},
     "system.schedule.alternating.phase_lenght: unknown field; did you mean 'phase_length'\\? allowed here: order, "),
])
def test_spec_errors_name_the_field(system, message) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_system_spec(_config(system))
