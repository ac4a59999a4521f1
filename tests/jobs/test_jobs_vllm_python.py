"""The vLLM venv's python is the operator's ``COOPLAB_VLLM_PYTHON``: a run config that names an interpreter
(``trainer.vllm_python: /tmp/x.sh``) is refused by pre-flight and, stored directly, by the worker, and
nothing it names runs."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from db import states
from engine.schema.run_config import ConfigError
from jobs.executor import execute_run
from jobs.preflight import check_run_config
from jobs.settings import Settings, operator_permissions


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    """An executable that leaves a marker when it runs; (script, marker)."""
    marker = tmp_path / "ran"
    path = tmp_path / "x.sh"
    path.write_text(f"#!/bin/sh\ntouch {marker}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path, marker


def config(python: Path) -> dict:
    return {"agents": [{"name": "a"}, {"name": "b"}], "task": {"name": "quickstart"},
            "trainer": {"max_steps": 1, "max_new_tokens": 4, "rollout_backend": "vllm", "vllm_python": str(python)}}


def test_the_setting_reaches_the_engine(monkeypatch, tmp_path):
    monkeypatch.setenv("COOPLAB_VLLM_PYTHON", "/opt/vllm/bin/python")
    assert operator_permissions(Settings(home=tmp_path)).chosen_vllm_python(".venv-vllm/bin/python") == (
        "/opt/vllm/bin/python")
    monkeypatch.delenv("COOPLAB_VLLM_PYTHON")
    settings = Settings(home=tmp_path)
    assert settings.vllm_python == ".venv-vllm/bin/python"  # the default: the venv scripts/install_vllm.sh makes


def test_preflight_refuses_a_config_that_names_an_interpreter(hostile, tmp_path):
    script, marker = hostile
    with pytest.raises(ConfigError) as caught:
        check_run_config(config(script), settings=Settings(home=tmp_path))
    assert str(caught.value).startswith("trainer.vllm_python:") and "COOPLAB_VLLM_PYTHON" in str(caught.value)
    assert not marker.exists()


def test_the_worker_refuses_a_stored_config_that_names_one(hostile, jobs_env, store, experiment_id):
    script, marker = hostile
    run = store.create_run(experiment_id, config(script), "cpu")  # stored directly: pre-flight never saw it
    assert execute_run(run.id, settings=jobs_env, store=store) == states.FAILED
    error = store.get_run(run.id).error
    assert "trainer.vllm_python" in error and "COOPLAB_VLLM_PYTHON" in error, error
    assert not marker.exists()
