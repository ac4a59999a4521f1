"""Presets are valid run configs for registered tasks with valid params and team sizes."""

from __future__ import annotations

import pytest

from engine.schema.presets import PRESETS, preset_config
from engine.schema.run_config import parse_run_config
from engine.tasks import get_task_info, validate_params


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_is_a_valid_run_config(name):
    preset = PRESETS[name]
    assert preset["title"] and preset["description"]
    config = parse_run_config(preset["config"])
    info = get_task_info(config.task.name)
    info.check_team_size(len(config.agents))
    validate_params(info, config.task.params)
    if config.trainer.num_turns > 1:
        assert info.max_turns is None or info.max_turns >= config.trainer.num_turns


def test_expected_presets_and_copies_are_independent():
    assert {"quickstart", "humaneval", "writing", "self_refine"} <= set(PRESETS)
    assert {"coop_humaneval", "mbpp", "humaneval_level", "tldr", "arxiv"} <= set(PRESETS)  # CoMLRL's benchmarks
    config = preset_config("quickstart")
    config["trainer"]["seed"] = 99
    assert PRESETS["quickstart"]["config"]["trainer"]["seed"] == 0
    with pytest.raises(KeyError, match="unknown preset"):
        preset_config("nope")
