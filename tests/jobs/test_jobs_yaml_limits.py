"""The YAML alias bomb through the job entry points: the study loader (the bomb in the study file,
or in the run-config file its ``base`` names) and the ``cooplab study`` and ``cooplab submit``
commands refuse it at once, store nothing and name the aliases and the fix."""

from __future__ import annotations

import textwrap

from typer.testing import CliRunner

from cooplab.cli import app
from jobs.study_space import StudySpaceError
from jobs.study_spec import load_study_file
from tests.yaml_bomb import bomb_run_config, refused_quickly

runner = CliRunner()
STUDY = "name: laughs\nspace: {trainer.agent_learning_rate: [0.001, 0.01]}\n"


def _inline(tmp_path):
    path = tmp_path / "inline-study.yaml"
    path.write_text(STUDY + "base:\n" + textwrap.indent(bomb_run_config(), "  "), encoding="utf-8")
    return path


def _by_path(tmp_path):
    (tmp_path / "base.yaml").write_text(bomb_run_config(), encoding="utf-8")
    path = tmp_path / "study.yaml"
    path.write_text(STUDY + "base: base.yaml\n", encoding="utf-8")
    return path


def test_the_study_loader_refuses_the_alias_bomb_inline_and_in_its_base_file(tmp_path) -> None:
    for path in (_inline(tmp_path), _by_path(tmp_path)):
        error = refused_quickly(lambda path=path: load_study_file(path), StudySpaceError)
        assert "alias" in str(error) and "write the values out" in str(error), error


def test_cooplab_study_and_submit_refuse_the_alias_bomb_and_store_nothing(jobs_env, store, tmp_path) -> None:
    bomb = tmp_path / "laughs.yaml"
    bomb.write_text(bomb_run_config(), encoding="utf-8")
    for args in (["study", str(_inline(tmp_path))], ["study", str(_by_path(tmp_path))], ["submit", str(bomb)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert "alias" in result.output and "write the values out" in result.output, result.output
    assert store.list_runs() == [] and store.list_experiments() == []
