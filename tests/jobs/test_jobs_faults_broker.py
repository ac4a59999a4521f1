"""The filesystem broker under faults: unreadable message files, a missing folder, a full disk at
submit, and ``cooplab up`` whose worker dies. Real files, real processes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from db import states
from jobs.client import BrokerUnavailable, resend_run, submit_run
from jobs.settings import Settings
from tests.jobs.fault_helpers import free_port, small_filesystem
from tests.jobs.helpers import ROOT, START_TIMEOUT_S, tiny_config, wait_for, wait_until_final


def _healthy(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
            return response.read().strip() == b"ok"
    except OSError:
        return False


def _bad_message(folder: Path, name: str, content: bytes) -> Path:
    """A message file as kombu names them (``<ms>_<uuid>.<queue>.msg``), sorted before any real one."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"0000000000001_{name}.cpu.msg"
    path.write_bytes(content)
    return path


def _channel(settings: Settings):
    from jobs.celery_app import create_app

    app = create_app(settings)
    conn = app.connection_for_read()
    return conn, conn.default_channel


def test_unreadable_messages_are_quarantined_and_the_next_one_is_delivered(jobs_env):
    """An empty file, a file that is not JSON and a missing ``in`` folder: each read answers "empty"
    (or the next good message), never an exception that would stop the worker."""
    from queue import Empty

    inbox = jobs_env.broker_dir / "in"
    empty = _bad_message(inbox, "empty", b"")
    garbage = _bad_message(inbox, "garbage", b"{not json")
    conn, channel = _channel(jobs_env)
    try:
        with pytest.raises(Empty):
            channel._get("cpu")
        quarantine = jobs_env.broker_dir / "quarantine"
        assert sorted(p.name for p in quarantine.iterdir()) == sorted([empty.name, garbage.name])
        assert not empty.exists() and not garbage.exists()

        channel._put("cpu", {"body": "x"})  # a good message after bad ones is delivered
        _bad_message(inbox, "again", b"")
        assert channel._get("cpu") == {"body": "x"}

        for path in inbox.iterdir():
            path.unlink()
        inbox.rmdir()
        with pytest.raises(Empty):  # the folder is made again
            channel._get("cpu")
        assert inbox.is_dir()
    finally:
        conn.release()


def test_a_submit_on_a_full_disk_leaves_no_partial_message_and_says_the_disk_is_full(jobs_env, store, experiment_id,
                                                                                       tmp_path):
    """kombu's ``_put`` on a full disk left a 0-byte ``.msg`` (which then killed the worker) and the
    stored error asked whether the broker was running. The run stays queued (the reconciler sends it
    once there is space); re-sending it says the disk is full."""
    from jobs import celery_app

    inbox = jobs_env.broker_dir / "in"
    with small_filesystem(inbox, size="64k"):
        (inbox / "filler").write_bytes(b"\0" * (64 * 1024 - 1))
        with contextlib.suppress(OSError), (inbox / "filler2").open("wb") as f:
            f.write(b"\0" * 65536)
        celery_app._SENDERS.clear()
        run_id = submit_run(tiny_config(), experiment_id=experiment_id, settings=jobs_env)
        left = [p.name for p in inbox.iterdir() if p.name.endswith(".msg")]
        assert left == [], left
        assert run_id.unsent.startswith(f"the broker {jobs_env.resolved_broker_url} could not take it: the disk is "
                                        "full: no space left on device"), run_id.unsent
        assert run_id.unsent.endswith(f"in the data directory {jobs_env.data_dir}: it will be sent then")
        assert store.get_run(run_id).status == states.QUEUED
        with pytest.raises(BrokerUnavailable) as raised:
            resend_run(run_id, settings=jobs_env)
        message = str(raised.value)
        assert "disk is full" in message and "no space left on device" in message, message
        assert "Is the broker running" not in message, message


@pytest.mark.integration
@pytest.mark.slow
def test_an_empty_broker_file_under_cooplab_up_is_quarantined_and_a_dead_worker_restarted(jobs_env, store,
                                                                                         experiment_id, tmp_path):
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    log_path = tmp_path / "up.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cooplab", "up", "--port", str(port)], cwd=ROOT, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: store.list_workers(online_only=True) or proc.poll() is not None, 90,
                 "the embedded worker to register")
        empty = _bad_message(jobs_env.broker_dir / "in", "empty", b"")
        run_id = submit_run(tiny_config(max_steps=2), experiment_id=experiment_id, settings=jobs_env)
        wait_until_final(store, run_id, START_TIMEOUT_S)
        run = store.get_run(run_id)
        assert run.status == states.SUCCEEDED, (run.status, run.error, log_path.read_text()[-3000:])
        assert proc.poll() is None, log_path.read_text()[-3000:]
        assert (jobs_env.broker_dir / "quarantine" / empty.name).exists()
        assert "quarantined" in log_path.read_text()

        # the worker dies anyway (kill -9): the dashboard stays up and the worker is started again
        wait_for(lambda: _healthy(port), 90, "the dashboard to answer")
        (worker,) = [p for p in psutil.Process(proc.pid).children() if "worker" in " ".join(p.cmdline())]
        t0 = time.monotonic()
        os.killpg(worker.pid, signal.SIGKILL)
        wait_for(lambda: "restarting it" in log_path.read_text(), 30, "the supervisor to restart the worker")
        again = submit_run(tiny_config(max_steps=1), experiment_id=experiment_id, settings=jobs_env)
        wait_until_final(store, again, START_TIMEOUT_S)
        print(f"\nworker killed under `cooplab up` -> next run done after {time.monotonic() - t0:.1f} s")
        assert store.get_run(again).status == states.SUCCEEDED, store.get_run(again).error
        assert proc.poll() is None and _healthy(port)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log_path.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        for child in psutil.process_iter(["environ"]):
            with contextlib.suppress(psutil.Error):
                if (child.info["environ"] or {}).get("COOPLAB_HOME") == str(jobs_env.data_dir):
                    child.kill()


def test_a_message_being_written_is_never_taken_by_a_reader(jobs_env, monkeypatch):
    """A reader that looks while the sender has created the message file but not yet written it finds
    nothing to take (the file is not named as a message until it is whole), and the message arrives
    whole afterwards; nothing is quarantined."""
    from queue import Empty

    from jobs import broker_fs_write

    conn, channel = _channel(jobs_env)
    real_open = open
    seen = {}

    def open_then_look(path, *args, **kwargs):
        f = real_open(path, *args, **kwargs)
        if str(path).startswith(str(jobs_env.broker_dir)) and "wb" in args:
            try:  # the file exists now, empty: another consumer reads the inbox at this moment
                seen["read"] = channel._get("cpu")
            except Empty:
                seen["read"] = None
        return f

    monkeypatch.setattr(broker_fs_write, "open", open_then_look, raising=False)  # what broker_fs writes with
    try:
        channel._put("cpu", {"body": "whole"})
        monkeypatch.undo()
        assert seen == {"read": None}
        assert channel._get("cpu") == {"body": "whole"}
        quarantine = jobs_env.broker_dir / "quarantine"
        assert not quarantine.exists() or list(quarantine.iterdir()) == []
    finally:
        conn.release()
