"""The YAML alias bomb through the engine's entry points: the run-config loader and the
``cooplab train`` command refuse it at once, naming the aliases and the fix."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from cooplab.cli import app
from engine.schema.run_config import ConfigError, load_run_config
from tests.yaml_bomb import bomb_run_config, refused_quickly


@pytest.fixture
def bomb_file(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(bomb_run_config(str(tmp_path / "folder-model")), encoding="utf-8")
    assert path.stat().st_size < 1024
    return path


def test_the_run_config_loader_refuses_the_alias_bomb(bomb_file) -> None:
    error = refused_quickly(lambda: load_run_config(bomb_file), ConfigError)
    message = str(error)
    assert str(bomb_file) in message and "alias" in message
    assert "write the values out" in message  # the fix


def test_cooplab_train_refuses_the_alias_bomb_with_exit_2(bomb_file, tmp_path) -> None:
    out = tmp_path / "out"
    result = refused_quickly(lambda: _exit(CliRunner().invoke(app, ["train", str(bomb_file), "--output", str(out)])),
                             _Exited)
    assert result.code == 2, result.output
    assert "alias" in result.output and "write the values out" in result.output
    assert not out.exists()


class _Exited(Exception):
    def __init__(self, code: int, output: str) -> None:
        super().__init__(code)
        self.code, self.output = code, output


def _exit(result) -> None:
    """The CLI's exit as an exception, so :func:`refused_quickly` can time it."""
    raise _Exited(result.exit_code, result.output)
