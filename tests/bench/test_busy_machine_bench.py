"""The busy-machine benchmark's workloads are valid run configs, and a part that timed out reads as a lower bound."""

from __future__ import annotations

import pytest

from bench.busy_machine import _ratio, _seconds, run_config
from engine.schema.run_config import parse_run_config


@pytest.mark.parametrize(("agents", "task"), [(1, "self_refine"), (2, "quickstart")])
def test_the_tiny_workloads_validate(agents: int, task: str) -> None:
    config = parse_run_config(run_config(agents, 3))
    assert (len(config.agents), config.task.name, config.trainer.max_steps) == (agents, task, 3)


def test_a_part_that_timed_out_is_shown_as_more_than_it_had_trained() -> None:
    old, new = {"seconds": None, "at_least": 260.4}, {"seconds": 26.0}
    assert (_seconds(old).strip(), _seconds(new).strip(), _ratio(old, new).strip()) == (">260", "26.0", ">10.0x")
    assert _ratio({"seconds": 52.0}, new).strip() == "2.0x"
