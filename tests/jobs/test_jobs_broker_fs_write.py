"""A submit's message on the filesystem broker, written without Celery or kombu
(:mod:`jobs.broker_fs_write`), is the file Celery's sending app writes for the same task: the same
JSON, field by field and in order, except the two values that are new for every message or sender
(``delivery_tag``, a random id; ``reply_to``, an id of the sending app), under the same kind of name,
and a real Celery worker runs it (every worker test's runs are sent this way; here one is consumed by
kombu's consumer as the worker's is). No worker process: cheap."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import uuid

import pytest

from jobs import broker_fs_write, celery_app, client
from jobs.broker_fs_write import make_folders, send_task_file
from tests.jobs.helpers import ROOT

_NAME = re.compile(r"^\d+_[0-9a-f-]{36}\.(?P<queue>[^.]+(?:\.[^.]+)*)\.msg$")


def _messages(folder) -> dict:  # type: ignore[no-untyped-def]
    return {p.name: json.loads(p.read_text()) for p in folder.iterdir() if p.name.endswith(".msg")}


@pytest.mark.parametrize("device", ["cpu", "cuda:0"])
def test_the_file_is_the_one_celery_writes(jobs_env, device) -> None:  # type: ignore[no-untyped-def]
    inbox = jobs_env.broker_dir / "in"
    task_id = str(uuid.uuid4())
    celery_app._SENDERS.clear()
    celery_app.get_sender_app(jobs_env).send_task(
        celery_app.TASK_NAME, args=[7], task_id=task_id, queue=celery_app.device_queue(device), ignore_result=True,
        retry=True, retry_policy=client.SEND_RETRY_POLICY)
    ((celery_name, by_celery),) = _messages(inbox).items()
    (inbox / celery_name).unlink()
    make_folders(jobs_env)
    written = send_task_file(jobs_env, client.TASK_NAME, [7], task_id, queue=device)
    ((name, by_hand),) = _messages(inbox).items()
    assert written.name == name and _NAME.match(name)["queue"] == _NAME.match(celery_name)["queue"] == device
    assert list(by_hand) == list(by_celery)
    for part in ("headers", "properties"):
        assert list(by_hand[part]) == list(by_celery[part])
    for key in ("delivery_tag", "reply_to"):  # new for every message / every sending app
        uuid.UUID(by_hand["properties"][key])
        by_hand["properties"][key] = by_celery["properties"][key]
    assert by_hand == by_celery
    assert json.loads(base64.b64decode(by_hand["body"])) == [[7], {}, {"callbacks": None, "errbacks": None,
                                                                       "chain": None, "chord": None}]
    assert client.TASK_NAME == celery_app.TASK_NAME


def test_a_worker_consumer_takes_it_and_reads_the_task(jobs_env) -> None:  # type: ignore[no-untyped-def]
    """Celery's own consumer machinery (kombu's filesystem channel, as ``jobs.broker_fs`` configures it
    for a worker) takes the message and decodes the task name, id and arguments from it."""
    task_id = str(uuid.uuid4())
    make_folders(jobs_env)
    send_task_file(jobs_env, client.TASK_NAME, [11], task_id, queue="cpu")
    app = celery_app.create_app(jobs_env)
    with app.connection_for_read() as conn:
        queue = celery_app.device_queue("cpu")(conn.default_channel)
        message = queue.get(accept=["json"])
        assert message is not None
        args, kwargs, _ = message.decode()
        assert (message.headers["task"], message.headers["id"], args, kwargs) == (celery_app.TASK_NAME, task_id,
                                                                                  [11], {})
        message.ack()


def test_a_submit_on_the_filesystem_broker_imports_no_celery(jobs_env, tmp_path) -> None:  # type: ignore[no-untyped-def]
    code = ("import sys; from jobs.broker_fs_write import send_task_file; from jobs.settings import get_settings; "
            "send_task_file(get_settings(), 'jobs.run_training', [1], 'x', queue='cpu'); "
            "print(sorted(m for m in ('celery', 'kombu') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    assert broker_fs_write.PARTIAL_SUFFIX == ".part"
