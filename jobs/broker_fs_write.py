"""A task message written into the filesystem broker's folder without Celery or kombu.

A submit sends one message: ``jobs.run_training`` with the run's id, to its device's queue. On the
filesystem broker (the default: ``broker/in`` under the data directory) that is one JSON file, and
loading Celery and kombu to write it is about 0.1-0.2 CPU-seconds of a submit's start-up.
:func:`send_task_file` writes the file Celery's sending app (:func:`jobs.celery_app.create_sender_app`)
writes through :mod:`jobs.broker_fs`: the same message (Celery's task protocol 2: headers, the body as
``[args, kwargs, embed]`` JSON in base64, the properties kombu's virtual transport adds) under the
same name (``<monotonic ms>_<uuid>.<queue>.msg``), written the same way (:func:`write_message_file`,
which :mod:`jobs.broker_fs` uses too: a ``.part`` file synced, then renamed into place; a failed write
leaves nothing and keeps the ``OSError`` as its cause). ``tests/jobs/test_jobs_broker_fs_write.py``
compares the two files field by field, and the worker tests consume these messages with real Celery
workers. Other brokers (Redis) are sent to through Celery.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import threading
import uuid
from pathlib import Path
from time import monotonic
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobs.settings import Settings

PARTIAL_SUFFIX = ".part"
_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


class MessageNotWritten(Exception):
    """A message file could not be written; its cause is the ``OSError`` (errno, path)."""


def message_file_name(queue: str) -> str:
    """A new message file's name in ``queue``: readers take ``*.<queue>.msg`` in name order."""
    return f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"


def write_message_file(folder: str | Path, queue: str, data: bytes) -> Path:
    """Write one message file into ``folder`` whole or not at all (a ``.part`` file no reader takes,
    synced, then renamed); raises :class:`MessageNotWritten` from the ``OSError``, leaving no file."""
    path = os.path.join(folder, message_file_name(queue))
    partial = path + PARTIAL_SUFFIX  # no reader takes it: its name does not end in .<queue>.msg
    try:
        with open(partial, "wb", buffering=0) as f:
            f.write(data)
            os.fsync(f.fileno())
        os.replace(partial, path)  # whole or not at all: a reader never sees a file being written
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise MessageNotWritten(f"cannot write the message {path}: {exc}") from exc
    return Path(path)


def task_message(task_name: str, args: list[Any], task_id: str, *, routing_key: str,
                 ignore_result: bool = True) -> dict[str, Any]:
    """The payload Celery 5's sending app hands the filesystem transport for
    ``send_task(task_name, args=args, task_id=task_id, queue=<routing_key's queue>, ignore_result=...)``:
    protocol 2 headers (``origin`` is this process, as Celery names it), the JSON body in base64, and
    the properties kombu's virtual channel adds (``reply_to`` is an id of this sender; no reply is asked
    for)."""
    body = json.dumps([list(args), {}, _EMBED])
    headers: dict[str, Any] = {
        "lang": "py", "task": task_name, "id": task_id, "shadow": None, "eta": None, "expires": None, "group": None,
        "group_index": None, "retries": 0, "timelimit": [None, None], "root_id": task_id, "parent_id": None,
        "argsrepr": repr(list(args)), "kwargsrepr": "{}", "origin": f"gen{os.getpid()}@{socket.gethostname()}",
        "ignore_result": ignore_result, "replaced_task_nesting": 0, "stamped_headers": None, "stamps": {}}
    sender = uuid.uuid3(uuid.NAMESPACE_OID, f"{uuid.getnode():x}-{os.getpid():x}-{threading.get_ident():x}")
    properties = {"correlation_id": task_id, "reply_to": str(sender), "delivery_mode": 2,
                  "delivery_info": {"exchange": "", "routing_key": routing_key}, "priority": 0,
                  "body_encoding": "base64", "delivery_tag": str(uuid.uuid4())}
    return {"body": base64.b64encode(body.encode("utf-8")).decode("ascii"), "content-encoding": "utf-8",
            "content-type": "application/json", "headers": headers, "properties": properties}


def make_folders(settings: Settings) -> None:
    """Make the filesystem broker's folders, as making Celery's sending app does
    (:func:`jobs.celery_app.broker_options`)."""
    settings.ensure_dirs()
    (settings.broker_dir / "control").mkdir(parents=True, exist_ok=True)


def send_task_file(settings: Settings, task_name: str, args: list[Any], task_id: str, *, queue: str) -> Path:
    """Write ``task_name``'s message for ``args`` into the filesystem broker of ``settings`` (its folders
    made: :func:`make_folders`), to ``queue`` (a device name), as Celery's sending app would; returns
    the file."""
    data = json.dumps(task_message(task_name, args, task_id, routing_key=queue)).encode("utf-8")
    return write_message_file(settings.broker_dir / "in", queue, data)


__all__ = ["MessageNotWritten", "make_folders", "message_file_name", "send_task_file", "task_message", "write_message_file"]
