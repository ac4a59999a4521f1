"""Run-config errors name the field, and unknown fields suggest the closest real one."""

from __future__ import annotations

import pytest

from engine.schema.run_config import ConfigError, load_run_config, parse_run_config


def test_unknown_field_names_its_section_and_suggests_the_closest_name():
    with pytest.raises(ConfigError) as err:
        parse_run_config({"agents": [{"name": "a", "modle": "builtin:tiny-llama"}]})
    message = str(err.value)
    assert message.startswith("agents.0.modle: unknown field; did you mean 'model'?")
    assert "share_weights_with" in message  # the allowed names of that section are listed


def test_unknown_top_level_and_trainer_fields_list_their_own_sections():
    with pytest.raises(ConfigError) as err:
        parse_run_config({"agents": [{"name": "a"}], "trainr": {}, "trainer": {"num_generation": 4}})
    lines = str(err.value).splitlines()
    top_line = next(line for line in lines if line.startswith("trainr:"))
    assert "did you mean 'trainer'?" in top_line
    trainer_line = next(line for line in lines if line.startswith("trainer.num_generation:"))
    assert "did you mean 'num_generations'?" in trainer_line
    assert "joint_mode" in trainer_line


def test_each_bad_value_gets_its_own_line():
    with pytest.raises(ConfigError) as err:
        parse_run_config({"agents": [{"name": "a", "learning_rate": -1}], "trainer": {"num_generations": 1}})
    lines = str(err.value).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("agents.0.learning_rate:")
    assert lines[1].startswith("trainer.num_generations:")


def test_team_rules_are_checked_after_the_fields(tmp_path):
    path = tmp_path / "team.yaml"
    path.write_text("agents:\n  - name: a\n  - name: b\n    share_weights_with: c\n")
    with pytest.raises(ConfigError, match=r"agents.1.share_weights_with='c' must name an earlier agent"):
        load_run_config(path)
    with pytest.raises(ConfigError, match="config file not found"):
        load_run_config(tmp_path / "missing.yaml")
