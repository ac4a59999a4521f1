"""A run config may read files only inside the operator's read roots (the data directory, the project's
bundled data, the Hugging Face hub cache and ``COOPLAB_DATA_ROOTS``): a ``writing`` task whose dataset is
a private file elsewhere is refused by pre-flight and, stored directly, by the worker, so the file's lines
never become transcripts every dashboard user can read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from db import states
from engine.permissions.read_paths import BUNDLED_DATA
from engine.schema.run_config import ConfigError
from jobs.executor import execute_run
from jobs.preflight import check_run_config
from jobs.settings import Settings

SECRET = "root-only-credential-4711"


@pytest.fixture
def creds(tmp_path: Path) -> Path:
    path = tmp_path / "root-only" / "creds.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(json.dumps({"text": f"{SECRET} number {i} of the private lines"}) for i in range(8)))
    return path


def writing(dataset: str) -> dict:
    return {"name": "read", "agents": [{"name": "summarizer"}, {"name": "elaborator"}],
            "task": {"name": "writing", "params": {"dataset": dataset, "eval_items": 0, "max_items": 2}},
            "trainer": {"max_steps": 1, "max_new_tokens": 4, "num_generations": 2, "eval_interval": 0}}


def test_the_read_roots_default_to_the_data_directory_bundled_data_and_hub_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    settings = Settings(home=tmp_path / "home")
    assert settings.read_roots == [settings.data_dir, BUNDLED_DATA, tmp_path / "hub"]
    extra = Settings(home=tmp_path / "home", data_roots=f" {tmp_path / 'a'} ,{tmp_path / 'b'},")
    assert extra.read_roots[-2:] == [tmp_path / "a", tmp_path / "b"]
    with pytest.raises(ValueError, match="absolute"):
        Settings(home=tmp_path, data_roots="relative/folder")


def test_preflight_refuses_a_dataset_outside_the_roots(creds, jobs_env):
    with pytest.raises(ConfigError) as caught:
        check_run_config(writing(str(creds)), settings=jobs_env)
    message = str(caught.value)
    assert message.startswith(f"task.params.dataset: {str(creds)!r}") and "COOPLAB_DATA_ROOTS" in message
    assert SECRET not in message


def test_preflight_accepts_the_data_directory_the_bundled_data_and_listed_roots(creds, jobs_env, monkeypatch):
    inside = jobs_env.data_dir / "datasets" / "mine.jsonl"
    inside.parent.mkdir()
    inside.write_text(creds.read_text())
    check_run_config(writing(str(inside)), settings=jobs_env)
    check_run_config(writing(str(BUNDLED_DATA / "writing_prompts.jsonl")), settings=jobs_env)
    monkeypatch.setenv("COOPLAB_DATA_ROOTS", str(creds.parent))
    check_run_config(writing(str(creds)), settings=Settings())


def test_a_stored_config_is_refused_by_the_worker_and_nothing_is_read(creds, jobs_env, store, experiment_id):
    run = store.create_run(experiment_id, writing(str(creds)), "cpu")  # stored directly: pre-flight never saw it
    assert execute_run(run.id, settings=jobs_env, store=store) == states.FAILED
    error = store.get_run(run.id).error
    assert "task.params.dataset" in error and "COOPLAB_DATA_ROOTS" in error, error
    assert SECRET not in error
