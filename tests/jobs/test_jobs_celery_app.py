"""The Celery app's broker choice and worker policy, and the worker's device pinning."""

from __future__ import annotations

import os

import pytest

from jobs.celery_app import TASK_NAME, create_app, device_queue, validate_device
from jobs.settings import Settings
from jobs.worker import check_slots, node_name, pin_device, worker_argv


def test_the_default_broker_is_the_filesystem_transport_under_the_data_dir(jobs_env):
    app = create_app(jobs_env)
    assert app.conf.broker_url == "filesystem://localhost//"
    options = app.conf.broker_transport_options
    for key in ("data_folder_in", "data_folder_out", "control_folder"):
        assert options[key].startswith(str(jobs_env.data_dir / "broker"))
    assert (jobs_env.broker_dir / "in").is_dir() and (jobs_env.broker_dir / "control").is_dir()


def test_one_run_per_device_in_a_fresh_child_with_late_acks(jobs_env):
    conf = create_app(jobs_env, devices=("cuda:1",)).conf
    assert (conf.worker_pool, conf.worker_concurrency, conf.worker_prefetch_multiplier) == ("prefork", 1, 1)
    assert conf.worker_max_tasks_per_child == 1
    assert conf.task_acks_late is True and conf.task_reject_on_worker_lost is False
    assert {q.name for q in conf.task_queues} == {"cpu", "cuda:1"}
    assert conf.task_routes[TASK_NAME] == {"queue": "cpu"}


def test_redis_urls_use_redis_for_broker_and_results(tmp_path):
    settings = Settings(home=tmp_path, broker_url="redis://127.0.0.1:6379/12")
    app = create_app(settings)
    assert app.conf.broker_url == "redis://127.0.0.1:6379/12"
    assert app.conf.result_backend == "redis://127.0.0.1:6379/12"
    assert "data_folder_in" not in app.conf.broker_transport_options


def test_the_sqlalchemy_transport_is_refused_because_it_cannot_deliver_stop(tmp_path):
    settings = Settings(home=tmp_path, broker_url="sqla+sqlite:///broker.db")
    with pytest.raises(ValueError, match="no broadcast"):
        create_app(settings)


def test_devices_name_queues_on_one_exchange():
    assert validate_device("cuda:12") == "cuda:12"
    for bad in ("gpu", "cuda", "cuda:x", "CPU", "cuda:0 "):
        with pytest.raises(ValueError, match="cuda:N"):
            validate_device(bad)
    queue = device_queue("cuda:0")
    assert (queue.name, queue.routing_key, queue.exchange.name) == ("cuda:0", "cuda:0", "cooplab")


def test_a_gpu_worker_sees_only_its_gpu_and_a_cpu_worker_none():
    env: dict[str, str] = {}
    pin_device("cuda:3", env)
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
    pin_device("cpu", env)
    assert env["CUDA_VISIBLE_DEVICES"] == ""


def test_worker_arguments_consume_one_queue_with_one_child():
    argv = worker_argv("cuda:1", loglevel="INFO", name=node_name("cuda:1", host="box"))
    assert argv[argv.index("--queues") + 1] == "cuda:1"
    assert argv[argv.index("--hostname") + 1] == f"cooplab-cuda1-{os.getpid()}@box"
    assert argv[argv.index("--concurrency") + 1] == "1"
    assert argv[argv.index("--max-tasks-per-child") + 1] == "1"
    assert argv[argv.index("--pool") + 1] == "prefork"


def test_slots_pack_several_jobs_on_one_device_within_bounds():
    argv = worker_argv("cuda:0", loglevel="INFO", name="w@box", slots=3)
    assert argv[argv.index("--concurrency") + 1] == "3" and argv[argv.index("--max-tasks-per-child") + 1] == "1"
    for bad in (0, 9, True, 1.5):
        with pytest.raises(ValueError, match="--slots must be a whole number from 1 to 8"):
            check_slots(bad)


def test_the_redis_visibility_timeout_is_a_setting(tmp_path):
    """It was hard-coded to 24 h: a message of a worker that died unseen waited that long for redelivery."""
    from jobs.celery_app import broker_options
    from jobs.settings import Settings

    base = {"home": tmp_path, "broker_url": "redis://127.0.0.1:6379/0"}
    assert broker_options(Settings(**base))["broker_transport_options"]["visibility_timeout"] == 24 * 3600
    assert broker_options(Settings(**base, visibility_timeout_s=7200))["broker_transport_options"] == {
        "visibility_timeout": 7200}
    with pytest.raises(ValueError, match="visibility_timeout_s"):
        Settings(**base, visibility_timeout_s=10)
