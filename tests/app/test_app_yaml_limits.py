"""The YAML alias bomb through every place the dashboard reads YAML: the experiment import ("Start
from a preset or a YAML file"), the system-of-trainers editor and a study's value list. Each refuses
it at once, naming the aliases and the fix, instead of freezing the server."""

from __future__ import annotations

from app import draft as drafts
from app import study_form
from app.system_draft import SystemTextError, from_text
from jobs.study_space import StudySpaceError
from tests.yaml_bomb import alias_bomb, bomb_run_config, refused_quickly


def test_the_experiment_import_refuses_the_alias_bomb() -> None:
    error = refused_quickly(lambda: drafts.from_yaml(bomb_run_config()), drafts.DraftImportError)
    assert "alias" in str(error) and "write the values out" in str(error)


def test_the_system_editor_refuses_the_alias_bomb() -> None:
    text = "trainers: [{name: t, agents: [first]}]\nschedule: {type: all_together}\nlaughs:\n" + alias_bomb("  ")
    error = refused_quickly(lambda: from_text(text), SystemTextError)
    assert "alias" in str(error) and "write the values out" in str(error)


def test_a_study_value_list_refuses_the_alias_bomb() -> None:
    block = "- &a\n  - lol\n  - lol\n  - lol\n" + "".join(
        f"- &{name}\n" + f"  - *{previous}\n" * 3 for previous, name in zip("abcdefghijklmnop", "bcdefghijklmnopq", strict=True))
    assert "," not in block  # one value of the comma-separated list
    error = refused_quickly(lambda: study_form.parse_values(block), StudySpaceError)
    assert "alias" in str(error) and "write the values out" in str(error)


def test_ordinary_yaml_still_imports() -> None:
    assert drafts.from_yaml("agents: [{name: first, model: 'builtin:tiny-llama'}]\ntask: {name: pair}\n")[
        "agents"][0]["name"] == "first"
    assert study_form.parse_values("0.001, true, builtin:tiny-qwen2") == [0.001, True, "builtin:tiny-qwen2"]
