"""Runs under faults, with real processes: every failure ends in a true state, fast, with its real cause.

Each test makes one fault happen as an operator would (kill -9, a full disk, a restarted broker,
parallel clients, two workers on one machine, a broker that is down, two databases on one data
directory) and checks the final state, its reason, how long it took, and that no run or metric row
was lost or duplicated. Measured times are printed (run with ``-s`` to see them).

The heartbeat timeout is raised to 60 s where detection is timed, so a fast answer cannot come from
the heartbeat: it comes from the job file (the kernel releases a dead job's lock at once).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from db import states
from db.migrate import upgrade
from db.store import Store
from jobs import jobfile
from jobs.client import BrokerUnavailable, resend_run, stop_run, submit_run
from jobs.executor import execute_run
from jobs.maintenance import run_maintenance
from jobs.settings import Settings
from tests.jobs.fault_helpers import PrivateRedis, assert_each_step_once, cli, free_port, small_filesystem
from tests.jobs.helpers import (
    ROOT,
    START_TIMEOUT_S,
    WorkerProcess,
    jobs_environment,
    tiny_config,
    wait_for,
    wait_until_final,
    wait_until_step,
)


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start ``cooplab worker ARGS`` (or any ``python ARGS`` with ``module=False``) with the test's
    environment, wait until it is ready; everything started is killed at the end, pass or fail."""
    started: list[WorkerProcess] = []

    def start(*args: str, module: bool = True, ready: str = " ready.") -> WorkerProcess:
        log_path = tmp_path / f"proc-{len(started)}.log"
        command = [sys.executable, "-m", "cooplab", "worker", *args] if module else [sys.executable, *args]
        with log_path.open("wb") as out:
            proc = subprocess.Popen(command, cwd=ROOT, env=_child_env(), stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        process = WorkerProcess(proc, log_path)
        started.append(process)
        wait_for(lambda: ready in process.log() or proc.poll() is not None, 90, "the worker to be ready")
        if proc.poll() is not None:
            raise AssertionError(f"exited with {proc.returncode}:\n{process.log()}")
        return process

    yield start
    for process in started:
        process.kill()


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    """A redis-server of this test's own, without persistence (the shared one is left alone)."""
    server = PrivateRedis.started(tmp_path / "redis")
    try:
        yield server
    finally:
        server.stop()


def _slow_heartbeat(monkeypatch: pytest.MonkeyPatch) -> Settings:
    """A 60 s heartbeat timeout (so fast detection cannot come from it), for this process and children."""
    monkeypatch.setenv("COOPLAB_HEARTBEAT_TIMEOUT_S", "60")
    return Settings()


def _busy_config(plugin: str) -> dict:
    """A run that keeps its worker busy for as long as a test needs without computing all the while: the
    quick start whose reward sleeps 0.5 s a step (``tests.jobs.plugin_tasks:slow_quickstart``). A run of
    plain tiny steps kept a core busy until the test stopped it."""
    config = tiny_config(max_steps=500)
    config["task"] = {"name": f"{plugin}:slow_quickstart", "params": {"sleep_s": 0.5}}
    return config


def _runs_line(output: str, run_id: int) -> str:
    for line in output.splitlines():
        if line.split() and line.split()[0] == str(run_id):
            return line
    raise AssertionError(f"run {run_id} not listed:\n{output}")


# ------------------------------------------------------------------------------ dead workers


@pytest.mark.integration
@pytest.mark.slow
def test_kill_9_of_the_only_worker_then_cooplab_runs_shows_it_lost(jobs_env, store, experiment_id, spawn,
                                                                    monkeypatch):
    settings = _slow_heartbeat(monkeypatch)
    worker = spawn()
    run_id = submit_run(tiny_config(max_steps=500), experiment_id=experiment_id, settings=settings)
    wait_until_step(store, run_id, 2)
    worker.kill()  # kill -9 of the worker and its job process: no worker is left alive
    t0 = time.monotonic()
    result, _ = cli("runs", "--limit", "5")
    seconds = time.monotonic() - t0
    print(f"\nkill -9 of the only worker -> `cooplab runs` shows it lost after {seconds:.2f} s")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].split()[-2:] == ["beat", "worker"]
    assert _runs_line(result.stdout, run_id).split()[3] == states.LOST
    assert seconds < 10  # the CLI's own start-up included; the heartbeat timeout is 60 s
    run = store.get_run(run_id)
    assert run.status == states.LOST
    assert run.error.startswith("its job process (pid ") and "died without ending the run" in run.error
    assert_each_step_once(store, run_id)
    assert [r.id for r in store.list_runs()] == [run_id]


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.serial  # the pool's replacement job process must start in time; see scripts/test.sh
def test_kill_of_the_job_process_is_lost_within_seconds_and_the_worker_goes_on(jobs_env, store, experiment_id,
                                                                              spawn, monkeypatch):
    settings = _slow_heartbeat(monkeypatch)
    worker = spawn()
    run_id = submit_run(tiny_config(max_steps=500), experiment_id=experiment_id, settings=settings)
    wait_until_step(store, run_id, 2)
    (job_pid,) = worker.job_pids()
    os.kill(job_pid, signal.SIGKILL)
    t0 = time.monotonic()
    wait_until_final(store, run_id, 30)
    seconds = time.monotonic() - t0
    print(f"\nkill -9 of the job process -> lost after {seconds:.2f} s (the worker noticed)")
    run = store.get_run(run_id)
    assert run.status == states.LOST and f"its job process (pid {job_pid} on " in run.error, run.error
    assert seconds < 5
    assert_each_step_once(store, run_id)
    # the worker settles the run in the database first, then removes the job file (its last words)
    wait_for(lambda: not jobfile.job_file_path(jobs_env.data_dir, run_id).exists(), 5,
             "the lost run's job file to be removed")

    # the worker serves the next run; a second message for it (sent while it waits) is harmless
    second = submit_run(tiny_config(max_steps=2), experiment_id=experiment_id, settings=settings)
    assert resend_run(second, settings=settings)
    wait_until_final(store, second, START_TIMEOUT_S)
    done = store.get_run(second)
    assert done.status == states.SUCCEEDED, done.error
    assert assert_each_step_once(store, second) == [1, 2]
    wait_for(lambda: f"run {second} is succeeded, not queued: not running it again" in worker.log(), 60,
             "the duplicate message to be delivered and ignored")
    assert worker.log().count(f"run {second} (experiment") == 1  # trained once
    assert worker.proc.poll() is None
    assert [r.id for r in store.list_runs()] == [second, run_id]


# ------------------------------------------------------------------------------- a full disk


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("full", ["data directory", "outputs only"])
def test_a_disk_that_fills_during_a_checkpoint_fails_the_run_with_the_reason_and_frees_it(
        tmp_path, monkeypatch, spawn, full):
    home = tmp_path / "home"
    small = home if full == "data directory" else home / "runs"
    with small_filesystem(small, "5m"):
        for key, value in jobs_environment(home).items():
            monkeypatch.setenv(key, value)
        settings = Settings()
        settings.ensure_dirs()
        upgrade(settings.resolved_database_url)
        with Store(settings.resolved_database_url) as store:
            experiment_id = store.create_experiment("full").id
            worker = spawn()
            for attempt in (1, 2):  # the second run finds the disk as free as the first did
                run_id = submit_run(tiny_config(max_steps=2), experiment_id=experiment_id, settings=settings)
                # running, or already past it: the run may fail within one poll of starting to train
                wait_for(lambda run_id=run_id: store.get_run(run_id).status not in (states.QUEUED, states.STARTING),
                         START_TIMEOUT_S, "the run to start")
                t0 = time.monotonic()
                wait_until_final(store, run_id, 60)
                seconds = time.monotonic() - t0
                run = store.get_run(run_id)
                reason = run.error.splitlines()[0]
                print(f"\n{full} full, run {attempt}: {run.status} {seconds:.2f} s after it started: {reason}")
                assert run.status == states.FAILED
                checkpoint = settings.runs_dir / f"run-{run_id}" / "checkpoints" / "checkpoint-1"
                assert reason.startswith(f"no space left on device writing checkpoint {checkpoint} (")
                assert reason.endswith(" free of 5.0 MiB when the write failed)")
                assert seconds < 30
                assert list(home.rglob(".tmp-*")) == []  # the partial checkpoint is gone ...
                assert os.statvfs(small).f_bavail * os.statvfs(small).f_frsize > 2 << 20  # ... with its space
                assert assert_each_step_once(store, run_id) == [1]
                assert store.list_checkpoints(run_id) == []
            assert worker.proc.poll() is None
            assert len(store.list_runs()) == 2
            worker.kill()


def test_a_final_state_the_database_cannot_take_is_left_for_whoever_looks_next(tmp_path, monkeypatch):
    """The job fills the disk that also holds the database: its final state cannot be written, so it goes
    into the job file; once space is back, `cooplab runs` settles the run with the real reason."""
    home = tmp_path / "home"
    with small_filesystem(home, "3m"):
        for key, value in jobs_environment(home, heartbeat_timeout_s=60).items():
            monkeypatch.setenv(key, value)
        monkeypatch.setattr("jobs.executor.FINISH_RETRY_DELAYS_S", (0.1, 0.2))
        settings = Settings()
        settings.ensure_dirs()
        upgrade(settings.resolved_database_url)
        filler = home / "runs" / "run-1" / "filler.bin"

        def fill_the_disk(config, *, output_dir, sink, resume_from):
            sink.start(3, {})
            sink.log_step(1, 4, {"train/reward_mean": 0.5}, [])
            assert Path(output_dir) == filler.parent
            with filler.open("wb") as out:
                while True:
                    out.write(b"\0" * (64 << 10))  # until ENOSPC
                    out.flush()

        with Store(settings.resolved_database_url) as store:
            run_id = store.create_run(store.create_experiment("full").id, tiny_config(), "cpu").id
            assert execute_run(run_id, settings=settings, store=store, train_fn=fill_the_disk) == states.FAILED
            assert store.get_run(run_id).status == states.RUNNING  # the database could not take the end
            state = jobfile.probe(settings.data_dir, run_id)
            assert state is not None and not state.held and state.status == states.FAILED
            filler.unlink()  # the operator frees space
            t0 = time.monotonic()
            result, _ = cli("runs")
            seconds = time.monotonic() - t0
            assert _runs_line(result.stdout, run_id).split()[3] == states.FAILED, result.stdout + result.stderr
            run = store.get_run(run_id)
            first = run.error.splitlines()[0]
            print(f"\nfinal state left in the job file -> `cooplab runs` settles it in {seconds:.2f} s: {first}")
            assert first.startswith(f"no space left on device writing {filler.parent} (")
            assert assert_each_step_once(store, run_id) == [1]
            assert not jobfile.job_file_path(settings.data_dir, run_id).exists()


@pytest.mark.parametrize("error", ["disk full", "a bug"])
def test_a_failed_run_leaves_no_partial_writes_and_names_a_full_disk(jobs_env, store, experiment_id, error):
    """Temporary checkpoint folders always go; a half-written export goes when a filesystem fault cut it short."""
    def train(config, *, output_dir, sink, resume_from):
        sink.start(2, {})
        sink.log_step(1, 4, {"train/reward_mean": 0.5}, [])
        (Path(output_dir) / "checkpoints" / ".tmp-checkpoint-2-123").mkdir(parents=True)
        (Path(output_dir) / "model" / "agent_0").mkdir(parents=True)
        if error == "a bug":
            raise ValueError("a bug in the reward")
        raise OSError(28, "No space left on device", str(Path(output_dir) / "model" / "agent_0" / "model.safetensors"))

    run_id = store.create_run(experiment_id, tiny_config(), "cpu").id
    assert execute_run(run_id, settings=jobs_env, store=store, train_fn=train) == states.FAILED
    output = jobs_env.runs_dir / f"run-{run_id}"
    first = store.get_run(run_id).error.splitlines()[0]
    assert not (output / "checkpoints" / ".tmp-checkpoint-2-123").exists()
    if error == "a bug":
        assert first == "ValueError: a bug in the reward"
        assert (output / "model").is_dir()  # an export not cut short by the disk is left alone
    else:
        assert first.startswith(f"no space left on device writing {output / 'model' / 'agent_0'}/model.safetensors (")
        assert " free of " in first and "\n" not in first
        assert not (output / "model").exists()
    assert assert_each_step_once(store, run_id) == [1]


# ------------------------------------------------------------------------ a broker that forgets


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.serial  # a job ending while the worker reconnects must be replaced in time; see scripts/test.sh
def test_queued_runs_lost_by_a_redis_restart_are_sent_again_and_run_once(jobs_env, store, experiment_id, spawn,
                                                                          private_redis, monkeypatch, tmp_path,
                                                                          allow_plugin_tasks):
    """Runs queued before Redis restarted without persistence, and a run submitted (`cooplab submit`)
    while it was down: all stay queued, are sent again by the reconciler and run once."""
    monkeypatch.setenv("COOPLAB_BROKER_URL", private_redis.url)
    monkeypatch.setenv("COOPLAB_RESEND_AFTER_S", "2")  # the default 10 s is tested without a worker below
    settings = Settings()  # with the plugin task module allowed
    worker = spawn()
    busy = submit_run(_busy_config(allow_plugin_tasks), experiment_id=experiment_id, settings=settings)
    waiting = [submit_run(tiny_config(max_steps=1), experiment_id=experiment_id, settings=settings)
               for _ in range(2)]
    wait_until_step(store, busy, 1)
    private_redis.stop()  # without persistence: the waiting messages are gone
    config_path = tmp_path / "run.yaml"
    config_path.write_text(yaml.safe_dump({**tiny_config(max_steps=1), "name": "while-down"}))
    result, seconds = cli("submit", str(config_path))
    assert result.returncode == 0, result.stderr
    (while_down,) = [r.id for r in store.list_runs(limit=10) if r.id not in (busy, *waiting)]
    said = result.stdout.strip()
    print(f"\n`cooplab submit` with Redis down: {seconds:.2f} s: {said}")
    assert said.startswith(f"run {while_down} queued on cpu (experiment 'while-down'); the broker "
                           f"{private_redis.url} is unreachable (Error 111 connecting to 127.0.0.1:{private_redis.port}")
    assert said.endswith("): it will be sent when it answers")
    assert store.get_run(while_down).status == states.QUEUED  # was: failed, "could not send run N to the broker"
    waiting.append(while_down)
    sent_ids = {i: store.get_run(i).celery_task_id for i in waiting}
    private_redis.start()
    restarted = time.monotonic()
    stop_run(busy, settings=settings)  # frees the worker; nothing is left in the queue for it
    wait_until_final(store, busy, 60)

    def resent() -> bool:
        return all(store.get_run(i).celery_task_id != sent_ids[i] for i in waiting)

    wait_for(resent, 60, "the reconciler to send the lost runs again")
    detect = time.monotonic() - restarted
    for run_id in waiting:
        wait_until_final(store, run_id, START_TIMEOUT_S, worker)
    total = time.monotonic() - restarted
    print(f"\nRedis restarted without persistence: lost messages sent again after {detect:.1f} s, "
          f"all {len(waiting)} runs done {total:.1f} s after the restart")
    for run_id in waiting:
        run = store.get_run(run_id)
        assert run.status == states.SUCCEEDED, run.error
        assert assert_each_step_once(store, run_id) == [1]
        assert worker.log().count(f"run {run_id} (experiment") == 1  # trained once
        assert f"run {run_id} was queued but missing from the broker: sent again" in worker.log()
    assert store.get_run(busy).status == states.STOPPED
    assert detect < 30  # queued at least 2 s, missing at two looks
    assert len(store.list_runs()) == 4


def test_a_maintenance_pass_sends_a_missing_run_again_once_queued_resend_after_s(jobs_env, store, experiment_id,
                                                                                 monkeypatch):
    """A queued run whose message the broker lost is sent again by the timer's passes only once it has been
    queued ``COOPLAB_RESEND_AFTER_S`` (default 10 s; its message may still be on its way before)."""
    monkeypatch.setenv("COOPLAB_HEARTBEAT_TIMEOUT_S", "2")  # looks 1 s apart confirm it missing (at least 1 s)
    run_id = submit_run(tiny_config(), experiment_id=experiment_id, settings=jobs_env)
    task = store.get_run(run_id).celery_task_id
    (message,) = [p for p in (jobs_env.broker_dir / "in").iterdir() if task in p.read_text()]
    message.unlink()  # the broker forgot it

    def two_passes(settings: Settings) -> tuple[int, ...]:
        run_maintenance(settings, store=store)  # the first look
        time.sleep(1.1)  # the second look is at least a second later
        return run_maintenance(settings, store=store).requeued

    assert Settings().resend_after_s == 10.0
    assert two_passes(Settings()) == ()  # queued for about a second: not yet
    assert store.get_run(run_id).celery_task_id == task
    monkeypatch.setenv("COOPLAB_RESEND_AFTER_S", "0.5")
    assert two_passes(Settings()) == (run_id,)
    assert store.get_run(run_id).celery_task_id != task


def test_cooplab_requeue_sends_again_the_queued_runs_missing_from_the_broker(jobs_env, store, experiment_id):
    kept = submit_run(tiny_config(), experiment_id=experiment_id, settings=jobs_env)
    lost = submit_run(tiny_config(), experiment_id=experiment_id, settings=jobs_env)
    inbox = jobs_env.broker_dir / "in"
    lost_task = store.get_run(lost).celery_task_id
    (message,) = [p for p in inbox.iterdir() if lost_task in p.read_text()]
    message.unlink()  # the broker forgot it

    result, seconds = cli("requeue")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"run {lost} was missing from the broker: sent again"
    new_task = store.get_run(lost).celery_task_id
    assert new_task != lost_task and any(new_task in p.read_text() for p in inbox.iterdir())
    assert store.get_run(kept).celery_task_id is not None and len(list(inbox.iterdir())) == 2
    again, _ = cli("requeue")
    assert again.stdout.strip() == "every queued run is in the broker; nothing to send"
    store.request_stop(kept)  # cancelled: only queued runs can be sent again
    refused, _ = cli("requeue", str(kept))
    assert refused.returncode == 2 and f"run {kept} is cancelled, not queued" in refused.stderr
    print(f"\n`cooplab requeue` took {seconds:.2f} s")


# ------------------------------------------------------------------- two workers on one host


@pytest.mark.integration
@pytest.mark.slow
def test_two_workers_on_one_host_are_two_and_up_stops_only_its_own(jobs_env, store, experiment_id, spawn,
                                                                   allow_plugin_tasks):
    settings = Settings()  # with the plugin task module allowed
    plain = spawn()
    up = spawn("-c", "from jobs.supervisor import Supervisor; raise SystemExit(Supervisor(with_ui=False).run())",
               module=False, ready=" ready.")
    wait_for(lambda: len(store.list_workers(online_only=True)) == 2, 30, "both workers to register")
    names = {w.name for w in store.list_workers(online_only=True)}
    assert len(names) == 2 and any(n.startswith("cooplab-up-cpu-") for n in names), names
    assert {w.pid for w in store.list_workers()} == {plain.pid, *up.job_pids()}  # the supervisor's child

    runs = [submit_run(_busy_config(allow_plugin_tasks), experiment_id=experiment_id, settings=settings)
            for _ in range(2)]
    for run_id in runs:
        wait_until_step(store, run_id, 1)
    on_up = next(r for r in runs if store.get_run(r).worker.startswith("cooplab-up-"))
    other = next(r for r in runs if r != on_up)
    assert store.get_run(other).worker != store.get_run(on_up).worker

    up.proc.send_signal(signal.SIGTERM)  # Ctrl-C of `cooplab up`
    t0 = time.monotonic()
    assert up.proc.wait(timeout=90) == 0, up.log()
    print(f"\n`cooplab up` stopped its own run and exited in {time.monotonic() - t0:.2f} s")
    assert store.get_run(on_up).status == states.STOPPED and store.get_run(on_up).error is None
    step = store.get_run(other).step
    wait_for(lambda: store.get_run(other).step > step, 60, "the other worker's run to go on")
    assert store.get_run(other).status == states.RUNNING and plain.proc.poll() is None
    stop_run(other, settings=settings)
    wait_until_final(store, other, 60)
    for run_id in runs:
        assert_each_step_once(store, run_id)
    assert len(store.list_runs()) == 2


def test_a_worker_name_in_use_is_refused_in_one_line(jobs_env, store):
    store.upsert_worker("gpu-a@" + os.uname().nodename, host=os.uname().nodename, pid=os.getpid())
    result, _ = cli("worker", "--name", "gpu-a")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: a worker named 'gpu-a@{os.uname().nodename}' is already running (pid {os.getpid()} on "
        f"{os.uname().nodename}); give this one another --name, or leave --name out for a unique one"]


# ---------------------------------------------------------------------------------- clients


def _submit_in_child(go, config_path: str, results) -> None:  # runs in a forked process
    import jobs.celery_app
    import jobs.client

    jobs.client._STORES.clear()  # nothing of the parent's connections is used after the fork
    jobs.celery_app._SENDERS.clear()
    from typer.testing import CliRunner

    from cooplab.cli import app

    go.wait()
    outcome = CliRunner().invoke(app, ["submit", config_path, "-e", "fresh"])
    results.put((outcome.exit_code, outcome.output.strip()))


def test_twenty_parallel_submits_into_a_new_experiment_all_land_in_it(jobs_env, store, tmp_path):
    config_path = tmp_path / "run.yaml"
    config_path.write_text(yaml.safe_dump(tiny_config()))
    context = multiprocessing.get_context("fork")
    go, results = context.Event(), context.Queue()
    children = [context.Process(target=_submit_in_child, args=(go, str(config_path), results)) for _ in range(20)]
    for child in children:
        child.start()
    t0 = time.monotonic()
    go.set()
    outcomes = [results.get(timeout=120) for _ in children]
    seconds = time.monotonic() - t0
    for child in children:
        child.join(timeout=30)
    print(f"\n20 parallel submits into a new experiment: {seconds:.2f} s")
    assert [code for code, _ in outcomes] == [0] * 20, outcomes
    (experiment,) = store.list_experiments()
    assert experiment.name == "fresh"
    runs = store.list_runs(limit=100)
    assert len(runs) == 20 and {r.experiment_id for r in runs} == {experiment.id}
    assert all(r.status == states.QUEUED for r in runs)
    messages = [p.read_text() for p in (jobs_env.broker_dir / "in").iterdir()]
    assert len(messages) == 20
    assert all(sum(r.celery_task_id in m for m in messages) == 1 for r in runs)  # one message per run


def test_submit_with_the_broker_down_queues_the_run_fast_naming_the_broker(jobs_env, store, experiment_id,
                                                                            monkeypatch):
    """The run stays queued (the reconciler sends it when the broker answers: see the Redis restart test
    above); the submit says so, naming the broker without its password. Re-sending raises."""
    port = free_port()  # nothing listens there
    monkeypatch.setenv("COOPLAB_BROKER_URL", f"redis://:sekret@127.0.0.1:{port}/0")
    t0 = time.monotonic()
    run_id = submit_run(tiny_config(), experiment_id=experiment_id, settings=Settings())
    seconds = time.monotonic() - t0
    print(f"\nsubmit with the broker down: {seconds:.2f} s: {run_id.unsent}")
    assert run_id.unsent == (f"the broker redis://:***@127.0.0.1:{port}/0 is unreachable (Error 111 connecting to "
                             f"127.0.0.1:{port}. Connection refused): it will be sent when it answers")
    assert seconds < 6
    run = store.get_run(run_id)
    assert run.status == states.QUEUED and run.error is None and run.celery_task_id
    with pytest.raises(BrokerUnavailable) as raised:
        resend_run(run_id, settings=Settings())
    message = str(raised.value)
    assert message.startswith(f"could not send run {run_id} to the broker redis://:***@127.0.0.1:{port}/0 "
                              "(queue 'cpu'): ") and "sekret" not in message
    assert message.endswith("Is the broker running and is COOPLAB_BROKER_URL right?")
    assert store.get_run(run_id).status == states.QUEUED


# ------------------------------------------------------------ checkpoints and data directories


def test_two_databases_on_one_data_directory_are_refused(jobs_env, store, experiment_id, tmp_path, monkeypatch):
    def train(config, *, output_dir, sink, resume_from):
        sink.start(1, {})
        sink.log_step(1, 4, {"train/reward_mean": 0.5}, [])
        Path(output_dir, "checkpoints", "checkpoint-1").mkdir(parents=True)
        sink.log_checkpoint(1, str(Path(output_dir, "checkpoints", "checkpoint-1")))
        return type("Result", (), {"status": "completed", "step": 1})()

    first = store.create_run(experiment_id, tiny_config(), "cpu").id
    assert execute_run(first, settings=jobs_env, store=store, train_fn=train) == states.SUCCEEDED
    (checkpoint,) = store.list_checkpoints(first)

    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    monkeypatch.setenv("COOPLAB_DATABASE_URL", other_url)
    upgrade(other_url)
    other_settings = Settings()
    with Store(other_url) as other:
        clash = other.create_run(other.create_experiment("other").id, tiny_config(), "cpu").id
        assert clash == first  # the same run id: the same run folder
        assert execute_run(clash, settings=other_settings, store=other, train_fn=train) == states.FAILED
        error = other.get_run(clash).error
    with Store(other_url) as other:  # both ids are named, so two databases at one URL are told apart
        assert error.startswith(f"data directory {jobs_env.data_dir} belongs to another database (database id "
                                f"{store.database_id()} at sqlite:///")
        assert f"not this one (database id {other.database_id()} at sqlite:///" in error
    assert "Point COOPLAB_HOME at a data directory of this database's own" in error
    assert Path(checkpoint.path).is_dir()  # the first database's run folder is untouched
    result, _ = cli("worker")
    assert result.returncode == 1 and result.stderr.strip().startswith(
        f"error: data directory {jobs_env.data_dir} belongs to another database")


@pytest.mark.slow
def test_checkpoint_rows_follow_pruning(jobs_env, store, experiment_id):
    run_id = store.create_run(experiment_id, tiny_config(max_steps=3, checkpoint_total_limit=2), "cpu").id
    assert execute_run(run_id, settings=jobs_env, store=store) == states.SUCCEEDED
    folders = sorted(p.name for p in (jobs_env.runs_dir / f"run-{run_id}" / "checkpoints").iterdir())
    assert folders == ["checkpoint-2", "checkpoint-3"]
    assert [(c.step, Path(c.path).name) for c in store.list_checkpoints(run_id)] == [
        (2, "checkpoint-2"), (3, "checkpoint-3")]
    assert assert_each_step_once(store, run_id) == [1, 2, 3]
