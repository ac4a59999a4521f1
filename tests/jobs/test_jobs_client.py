"""The submit/stop/resume/cancel client against a real SQLite file and the real filesystem broker
(no worker: the tests read what landed in the database and in the broker's folder)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from db import states
from db.states import InvalidTransition
from db.store import Store
from engine.schema.run_config import ConfigError
from jobs.celery_app import TASK_NAME
from jobs.client import ResumeError, cancel_queued, enqueue_run, resume_run, stop_run, submit_run
from jobs.maintenance import StopEnforcer, run_maintenance
from jobs.settings import Settings
from tests.jobs.helpers import ROOT, tiny_config


def queued_messages(settings: Settings, queue: str = "cpu") -> list[dict]:
    """Task messages waiting in the filesystem broker for ``queue``."""
    messages = []
    for path in sorted((settings.broker_dir / "in").glob(f"*.{queue}.msg")):
        messages.append(json.loads(path.read_text()))
    return messages


def test_submit_stores_a_queued_run_and_sends_the_task_by_name(jobs_env, store, experiment_id):
    run_id = submit_run(tiny_config(max_steps=4), experiment_id=experiment_id, settings=jobs_env)

    run = store.get_run(run_id)
    assert run.status == states.QUEUED
    assert run.queue == "cpu"
    assert run.total_steps == 4
    assert run.config["trainer"]["max_steps"] == 4
    assert run.config["agents"][1]["name"] == "second"
    messages = queued_messages(jobs_env)
    assert len(messages) == 1
    headers = messages[0]["headers"]
    assert headers["task"] == TASK_NAME
    assert headers["id"] == run.celery_task_id
    args, kwargs, _ = json.loads(base64.b64decode(messages[0]["body"]))
    assert args == [run_id]


def test_submit_refuses_an_invalid_config_before_storing_anything(jobs_env, store, experiment_id):
    bad = tiny_config()
    bad["trainer"]["num_generations"] = 1
    with pytest.raises(ConfigError, match="trainer.num_generations"):
        submit_run(bad, experiment_id=experiment_id, settings=jobs_env)
    assert store.list_runs() == []
    assert queued_messages(jobs_env) == []


def test_submit_refuses_a_task_off_the_allowlist_before_storing_anything(jobs_env, store, experiment_id, tmp_path):
    marker = tmp_path / "shell-ran"
    bad = tiny_config()
    bad["task"] = {"name": "os:system", "params": {"command": f"touch {marker}"}}
    with pytest.raises(ConfigError) as info:
        submit_run(bad, experiment_id=experiment_id, settings=jobs_env)
    message = str(info.value)
    assert message.startswith("task.name: task 'os:system' is not allowed: module 'os' is not on the task module "
                              "allowlist") and "COOPLAB_TASK_MODULES" in message
    assert not marker.exists()
    assert store.list_runs() == []
    assert queued_messages(jobs_env) == []


def test_submit_runs_the_preflight_checks_before_storing_anything(jobs_env, store, experiment_id, tmp_path):
    bad = tiny_config()
    bad["agents"][0]["model"] = str(tmp_path / "x" / "y")
    bad["agents"][1]["max_new_tokens"] = 5000
    bad["task"]["params"]["num_items"] = 0
    with pytest.raises(ConfigError) as info:
        submit_run(bad, experiment_id=experiment_id, settings=jobs_env)
    lines = str(info.value).splitlines()
    assert f"agents.0.model: folder {tmp_path / 'x' / 'y'} does not exist" in lines
    assert any(line.startswith("agents.1.max_new_tokens: 5000 new tokens do not fit the context") for line in lines)
    assert any(line.startswith("task.params.num_items: ") for line in lines)
    huge = tiny_config()
    huge["trainer"]["max_new_tokens"] = 1e12
    with pytest.raises(ConfigError, match="trainer.max_new_tokens: Input should be less than or equal to"):
        submit_run(huge, experiment_id=experiment_id, settings=jobs_env)
    uncached = tiny_config()
    uncached["agents"][0]["model"] = "someorg/not-downloaded"
    with pytest.raises(ConfigError, match="agents.0.model: 'someorg/not-downloaded' is not a local folder"):
        submit_run(uncached, experiment_id=experiment_id, settings=jobs_env)
    assert store.list_runs() == []
    assert queued_messages(jobs_env) == []


def test_submit_accepts_a_task_from_a_module_the_settings_allow(jobs_env, store, experiment_id, monkeypatch):
    config = tiny_config()
    config["task"] = {"name": "tests.jobs.plugin_tasks:slow_quickstart", "params": {"sleep_s": 1}}
    with pytest.raises(ConfigError, match="module 'tests.jobs.plugin_tasks' is not on the task module allowlist"):
        submit_run(config, experiment_id=experiment_id, settings=jobs_env)
    monkeypatch.setenv("COOPLAB_TASK_MODULES", "tests.jobs")
    run_id = submit_run(config, experiment_id=experiment_id, settings=Settings())
    assert store.get_run(run_id).config["task"]["name"] == "tests.jobs.plugin_tasks:slow_quickstart"
    with pytest.raises(ConfigError, match="task.params.sleep_z: task 'tests.jobs.plugin_tasks:slow_quickstart' has no "
                                          "parameter 'sleep_z'"):
        submit_run({**config, "task": {"name": config["task"]["name"], "params": {"sleep_z": 1}}},
                   experiment_id=experiment_id, settings=Settings())
    assert len(store.list_runs()) == 1


def test_a_parsed_config_is_not_parsed_again_but_still_meets_the_submitters_settings(
        jobs_env, store, experiment_id, monkeypatch):
    """A caller that parsed the config hands the typed config on: pre-flight takes it as it is and returns
    it, and still checks its task against the allowlist of the settings it is submitted under."""
    from engine.schema.run_config import parse_run_config
    from jobs.preflight import check_run_config

    config = tiny_config()
    config["task"] = {"name": "tests.jobs.plugin_tasks:slow_quickstart", "params": {"sleep_s": 1}}
    parsed = parse_run_config(config, task_modules=("tests.jobs",))  # the caller parsed it with the module allowed
    monkeypatch.setenv("COOPLAB_TASK_MODULES", "tests.jobs")
    assert check_run_config(parsed, settings=Settings()) is parsed
    with pytest.raises(ConfigError, match="module 'tests.jobs.plugin_tasks' is not on the task module allowlist"):
        submit_run(parsed, experiment_id=experiment_id, settings=jobs_env)  # jobs_env allows no module
    assert store.list_runs() == []
    assert queued_messages(jobs_env) == []


def test_submit_refuses_an_unknown_device(jobs_env, store, experiment_id):
    with pytest.raises(ValueError, match="cpu' or 'cuda:N"):
        submit_run(tiny_config(), experiment_id=experiment_id, device="gpu0", settings=jobs_env)
    assert store.list_runs() == []


def test_submit_to_a_gpu_queue_routes_the_message_there(jobs_env, store, experiment_id):
    run_id = submit_run(tiny_config(), experiment_id=experiment_id, device="cuda:1", settings=jobs_env)
    assert store.get_run(run_id).queue == "cuda:1"
    assert len(queued_messages(jobs_env, "cuda:1")) == 1
    assert queued_messages(jobs_env, "cpu") == []


def test_stop_cancels_a_queued_run(jobs_env, store, experiment_id):
    run_id = submit_run(tiny_config(), experiment_id=experiment_id, settings=jobs_env)
    assert stop_run(run_id, settings=jobs_env) == states.CANCELLED
    run = store.get_run(run_id)
    assert run.status == states.CANCELLED and run.finished_at is not None


def test_stop_moves_a_running_run_to_stopping_and_leaves_final_runs_alone(jobs_env, store, experiment_id):
    run_id = submit_run(tiny_config(), experiment_id=experiment_id, settings=jobs_env)
    store.transition(run_id, states.STARTING)
    store.transition(run_id, states.RUNNING)
    assert stop_run(run_id, settings=jobs_env) == states.STOPPING
    assert store.stop_requested(run_id)
    store.transition(run_id, states.STOPPED)
    assert stop_run(run_id, settings=jobs_env) == states.STOPPED


def test_cancel_queued_refuses_a_started_run(jobs_env, store, experiment_id):
    run_id = submit_run(tiny_config(), experiment_id=experiment_id, settings=jobs_env)
    store.transition(run_id, states.STARTING)
    with pytest.raises(InvalidTransition, match="starting"):
        cancel_queued(run_id, settings=jobs_env)
    assert store.get_run(run_id).status == states.STARTING


def test_cancel_queued_cancels(jobs_env, store, experiment_id):
    run_id = submit_run(tiny_config(), experiment_id=experiment_id, settings=jobs_env)
    cancel_queued(run_id, settings=jobs_env)
    assert store.get_run(run_id).status == states.CANCELLED


def _finished_run(store: Store, experiment_id: int, config: dict, status: str = states.STOPPED) -> int:
    run = store.create_run(experiment_id, config, "cpu")
    store.transition(run.id, states.STARTING)
    store.transition(run.id, states.RUNNING)
    if status == states.STOPPED:
        store.transition(run.id, states.STOPPING)
    store.transition(run.id, status)
    return run.id


def test_resume_needs_a_finished_run_with_a_checkpoint(jobs_env, store, experiment_id):
    active = store.create_run(experiment_id, tiny_config(), "cpu").id
    with pytest.raises(ResumeError, match="still queued"):
        resume_run(active, settings=jobs_env)
    no_checkpoint = _finished_run(store, experiment_id, tiny_config())
    with pytest.raises(ResumeError, match="no checkpoint"):
        resume_run(no_checkpoint, settings=jobs_env)


def test_resume_queues_a_new_attempt_of_the_same_config(jobs_env, store, experiment_id):
    old = _finished_run(store, experiment_id, tiny_config(max_steps=6), status=states.FAILED)
    store.add_checkpoint(old, 2, "/ckpt/step-2")
    new_id = resume_run(old, settings=jobs_env)
    new = store.get_run(new_id)
    assert (new.status, new.attempt, new.resumed_from) == (states.QUEUED, 2, old)
    assert new.config == store.get_run(old).config
    assert new.celery_task_id and len(queued_messages(jobs_env)) == 1
    # a third attempt started from the second (which saved nothing) still finds the first's checkpoint
    store.transition(new_id, states.CANCELLED)
    third = store.get_run(resume_run(new_id, settings=jobs_env))
    assert (third.attempt, third.resumed_from) == (3, new_id)


def test_enqueue_run_refuses_a_run_that_is_not_queued(jobs_env, store, experiment_id):
    run_id = _finished_run(store, experiment_id, tiny_config())
    with pytest.raises(ValueError, match="is stopped, not queued"):
        enqueue_run(run_id, settings=jobs_env)


def test_maintenance_marks_stale_runs_lost(jobs_env, store, experiment_id):
    run_id = submit_run(tiny_config(), experiment_id=experiment_id, settings=jobs_env)
    store.transition(run_id, states.STARTING)
    store.transition(run_id, states.RUNNING)
    store.heartbeat(run_id)
    now = datetime.now(UTC)
    assert run_maintenance(jobs_env, store=store, now=now).lost == ()
    later = now + timedelta(seconds=jobs_env.heartbeat_timeout_s + 1)
    report = run_maintenance(jobs_env, store=store, now=later)
    assert report.lost == (run_id,)
    run = store.get_run(run_id)
    assert run.status == states.LOST and "heartbeat" in run.error


def test_stop_enforcer_settles_a_run_that_ignores_its_stop_after_the_grace_period(jobs_env, store, experiment_id):
    run_id = submit_run(tiny_config(), experiment_id=experiment_id, settings=jobs_env)
    store.transition(run_id, states.STARTING)
    store.transition(run_id, states.RUNNING)
    stop_run(run_id, settings=jobs_env)
    enforcer = StopEnforcer()
    now = datetime.now(UTC)
    assert enforcer.enforce(store, None, grace_s=10, now=now) == []
    assert store.get_run(run_id).status == states.STOPPING
    assert enforcer.enforce(store, None, grace_s=10, now=now + timedelta(seconds=11)) == [run_id]
    run = store.get_run(run_id)
    assert run.status == states.STOPPED and "grace period" in run.error


def test_importing_the_client_imports_neither_torch_nor_the_task_module():
    code = ("import sys, jobs.client, jobs.maintenance; "
            "print(sorted(m for m in ('torch', 'transformers', 'jobs.tasks') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
