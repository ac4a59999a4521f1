"""The operator's outbound settings, read from the environment by ``jobs.settings`` and handed to the
engine: ``COOPLAB_API_HOSTS`` (which host each ``COOPLAB_API_KEY_*`` may go to) and
``COOPLAB_ALLOW_REMOTE_CODE``. A real listener on 127.0.0.1 and a real model folder with custom code;
checked in pre-flight (``jobs.preflight.check_run_config``) and by a worker running a stored run."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from db import states
from engine.schema.run_config import ConfigError
from jobs.executor import execute_run
from jobs.preflight import check_run_config
from jobs.settings import Settings, operator_permissions
from tests.engine.preference.api_listener import Listener

KEY = "sk-live-OPERATOR-0123456789"
VARIABLE = "COOPLAB_API_KEY_TESTLAB"


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def api_config(url: str) -> dict:
    return {"agents": [{"name": "a"}, {"name": "b"}], "task": {"name": "quickstart"},
            "trainer": {"algorithm": "madpo_iter", "comparator_policy": "api", "comparator_api_url": url,
                        "comparator_api_key_env": VARIABLE, "num_iterations": 1, "max_steps": 1,
                        "preference_num_candidates": 2, "max_new_tokens": 4, "items_per_step": 1,
                        "train_batch_size": 1, "eval_interval": 0, "checkpoint_interval": 0}}


def test_the_settings_are_read_and_handed_to_the_engine(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("COOPLAB_API_HOSTS", f"{VARIABLE}=api.lab.example, 127.0.0.1:9000")
    monkeypatch.setenv("COOPLAB_ALLOW_REMOTE_CODE", "true")
    monkeypatch.setenv(VARIABLE, KEY)
    monkeypatch.setenv("DATABASE_URL", "postgresql://secret")
    permissions = operator_permissions(Settings(home=tmp_path), os.environ)
    hosts = permissions.api_hosts
    assert hosts.hosts_of(VARIABLE) == ["api.lab.example"] and str(hosts) == f"{VARIABLE}=api.lab.example,127.0.0.1:9000"
    assert permissions.allow_remote_code is True
    assert dict(permissions.api_keys) == {VARIABLE: KEY}  # only COOPLAB_API_KEY_* entries are handed over
    other = operator_permissions(Settings(home=tmp_path, api_hosts="", allow_remote_code=False))
    assert other.api_hosts is not None and str(other.api_hosts) == "" and other.allow_remote_code is False
    assert other.api_keys is None and permissions.allow_remote_code is True  # each value keeps its own


def test_a_bad_listing_names_the_setting(tmp_path) -> None:
    with pytest.raises(ValueError, match="COOPLAB_API_HOSTS entry 'COOPLAB_API_KEY_X=http://h'"):
        Settings(home=tmp_path, api_hosts="COOPLAB_API_KEY_X=http://h")


def test_preflight_refuses_the_key_to_an_unlisted_listener(listener: Listener, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(VARIABLE, KEY)
    with pytest.raises(ConfigError, match=f"trainer.comparator_api_url: the key in {VARIABLE} is not sent to "
                                          f"127.0.0.1:{listener.port}"):
        check_run_config(api_config(listener.url), settings=Settings(home=tmp_path))
    assert listener.connections == 0
    listed = Settings(home=tmp_path, api_hosts=f"{VARIABLE}=127.0.0.1:{listener.port}")
    assert check_run_config(api_config(listener.url), settings=listed).trainer.comparator_api_url == listener.url


@pytest.mark.parametrize("url", ["file:///etc/passwd", "gopher://127.0.0.1:6379/_POST", "http://127.0.0.1:6379/"])
def test_preflight_refuses_other_schemes_and_loopback(url: str, tmp_path) -> None:
    with pytest.raises(ConfigError, match="trainer.comparator_api_url: "):
        check_run_config(api_config(url), settings=Settings(home=tmp_path))


def test_a_stored_run_that_skipped_preflight_fails_without_sending_the_key(jobs_env, store, experiment_id,
                                                                             listener: Listener, monkeypatch) -> None:
    monkeypatch.setenv(VARIABLE, KEY)
    run = store.create_run(experiment_id, api_config(listener.url), "cpu")  # stored directly: no pre-flight
    assert execute_run(run.id, settings=jobs_env, store=store, worker=None) == states.FAILED
    failed = store.get_run(run.id)
    assert f"the key in {VARIABLE} is not sent to 127.0.0.1:{listener.port}" in failed.error
    assert "COOPLAB_API_HOSTS" in failed.error and KEY not in failed.error
    assert listener.connections == 0 and listener.authorizations() == []


@pytest.fixture
def code_folder(tmp_path: Path) -> tuple[Path, Path]:
    """A tiny Llama folder whose config.json auto_map names custom_code.py, which writes ``marker``."""
    from engine.models import build_tiny_model

    folder, marker = tmp_path / "custom-model", tmp_path / "marker.txt"
    model, tokenizer = build_tiny_model("llama", "xs")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "custom_code.py").write_text(textwrap.dedent(f"""
        from pathlib import Path
        Path({str(marker)!r}).write_text("ran")
        from transformers import LlamaConfig, LlamaForCausalLM
        class CustomConfig(LlamaConfig):
            pass
        class CustomModel(LlamaForCausalLM):
            config_class = CustomConfig
        """))
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "custom_code.CustomConfig", "AutoModelForCausalLM": "custom_code.CustomModel"}
    (folder / "config.json").write_text(json.dumps(config))
    return folder, marker


def remote_code_config(folder: Path) -> dict:
    return {"agents": [{"name": "a", "model": str(folder), "model_kwargs": {"trust_remote_code": True}},
                       {"name": "b"}],
            "task": {"name": "quickstart"}, "trainer": {"max_steps": 1, "max_new_tokens": 4}}


def test_preflight_refuses_trust_remote_code_unless_the_operator_allows_it(code_folder, tmp_path) -> None:
    folder, marker = code_folder
    with pytest.raises(ConfigError, match="agents.0.model_kwargs: trust_remote_code=True would run Python") as info:
        check_run_config(remote_code_config(folder), settings=Settings(home=tmp_path))
    assert "COOPLAB_ALLOW_REMOTE_CODE=true" in str(info.value)
    check_run_config(remote_code_config(folder), settings=Settings(home=tmp_path, allow_remote_code=True))
    assert not marker.exists()


def test_a_stored_run_asking_for_remote_code_fails_without_running_it(jobs_env, store, experiment_id,
                                                                      code_folder) -> None:
    folder, marker = code_folder
    run = store.create_run(experiment_id, remote_code_config(folder), "cpu")  # stored directly: no pre-flight
    assert execute_run(run.id, settings=jobs_env, store=store, worker=None) == states.FAILED
    assert "trust_remote_code=True would run Python" in store.get_run(run.id).error
    assert not marker.exists()
