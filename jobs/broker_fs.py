"""The filesystem broker, made safe against bad files: kombu's filesystem transport with two changes.

- **Reading.** kombu raises whatever parsing a message file raises (``JSONDecodeError`` for an empty
  or cut file, ``FileNotFoundError`` when ``broker/in`` is gone). Celery takes those for unrecoverable
  errors and the worker exits. Here a message that cannot be read or parsed is moved to
  ``broker/quarantine/`` (kept for a person to look at, logged as ``quarantined``) and the next one is
  read; a missing folder is made again.
- **Writing.** kombu's ``_put`` creates the ``.msg`` file, then locks and fills it: a reader can take
  it while it is still empty, and it leaves the file behind when the write fails (on a full disk, a
  0-byte ``.msg`` that the worker then chokes on). Here a message is written under a name no reader
  takes (``.msg.part``), synced, then renamed into place, so readers see whole messages only; a
  failed write removes its partial file and the error keeps the ``OSError`` (errno, path) as its
  cause, so the sender can say that the disk is full.

Selected with Celery's ``broker_transport`` setting (``jobs.broker_fs:Transport``) for
``filesystem://`` brokers (:func:`jobs.celery_app.broker_options`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path
from queue import Empty
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

from jobs.broker_fs_write import PARTIAL_SUFFIX, MessageNotWritten, write_message_file  # noqa: F401 - PARTIAL_SUFFIX: re-exported

log = logging.getLogger(__name__)

QUARANTINE = "quarantine"
"""The folder, beside ``in``, that unreadable message files are moved to."""


def quarantine_folder(data_folder_in: str | Path) -> Path:
    return Path(data_folder_in).parent / QUARANTINE


def parse_message(payload: bytes) -> dict[str, Any]:
    """A message file's content as kombu's payload dict; raises ``ValueError`` naming what is wrong."""
    if not payload.strip():
        raise ValueError("the file is empty")
    try:
        message = loads(bytes_to_str(payload))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not a JSON message: {exc}") from exc
    if not isinstance(message, dict):
        raise ValueError(f"not a message object but {type(message).__name__}")
    return message


class Channel(filesystem.Channel):
    """kombu's filesystem channel that quarantines unreadable messages and leaves no partial ones."""

    def _inbox(self) -> list[str]:
        try:
            return sorted(os.listdir(self.data_folder_in))
        except FileNotFoundError:
            Path(self.data_folder_in).mkdir(parents=True, exist_ok=True)
            log.warning("the broker folder %s was missing; made it again", self.data_folder_in)
            return []

    def _quarantine(self, path: Path, name: str, reason: str) -> None:
        folder = quarantine_folder(self.data_folder_in)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            shutil.move(str(path), str(folder / name))
            where = f"moved to {folder / name}"
        except OSError as exc:
            with contextlib.suppress(OSError):
                path.unlink()
            where = f"deleted (could not move it to {folder}: {exc})"
        log.error("broker message %s quarantined: %s; %s", name, reason, where)

    def _get(self, queue: str) -> dict[str, Any]:
        wanted = f"{queue}.msg"
        processed = self.processed_folder if self.store_processed else tempfile.gettempdir()
        for name in self._inbox():
            if name.partition(".")[2] != wanted:
                continue
            taken = Path(processed) / name
            try:
                shutil.move(os.path.join(self.data_folder_in, name), str(taken))
            except OSError:
                continue  # taken by another consumer meanwhile
            try:
                payload = taken.read_bytes()
                message = parse_message(payload)
            except (OSError, ValueError) as exc:
                self._quarantine(taken, name, str(exc))
                continue
            if not self.store_processed:
                with contextlib.suppress(OSError):
                    taken.unlink()
            return message
        raise Empty()

    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        try:  # the same file a submit writes without kombu (jobs.broker_fs_write)
            write_message_file(self.data_folder_out, queue, str_to_bytes(dumps(payload)))
        except MessageNotWritten as exc:
            raise ChannelError(str(exc)) from exc.__cause__

    def _size(self, queue: str) -> int:
        return sum(1 for name in self._inbox() if name.partition(".")[2] == f"{queue}.msg")

    def _purge(self, queue: str) -> int:
        count = 0
        for name in self._inbox():
            if name.partition(".")[2] == f"{queue}.msg":
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(self.data_folder_in, name))
                    count += 1
        return count


class Transport(filesystem.Transport):
    Channel = Channel
