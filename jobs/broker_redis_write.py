"""A task message pushed to the Redis broker without Celery, kombu or redis-py.

A submit sends one message: ``jobs.run_training`` with the run's id, to its device's queue. On Redis,
Celery's sending app (:func:`jobs.celery_app.create_sender_app`) hands kombu's Redis transport the
same message it hands the filesystem transport (:func:`jobs.broker_fs_write.task_message`: Celery's
task protocol 2, the body as JSON in base64, the properties kombu's virtual channel adds, published to
the queue by name), and kombu writes it with three commands: the queue's binding to the ``cooplab``
exchange added to two sets (``_kombu.binding.cooplab``, which routes, and
``_kombu.binding_permanent.cooplab``, which keeps it from kombu's sweep of expiring bindings; members
``<routing key>\\x06\\x16<pattern>\\x06\\x16<queue>``), then the message's JSON ``LPUSH``-ed onto the
list named after the queue (priority 0: kombu's key for it is the queue's name alone). Workers
``BRPOP`` that list.

Loading Celery, kombu and redis-py for that costs about 0.25 CPU-seconds of a submit's start-up
(redis-py alone about 0.15: it loads its asyncio client and observability modules).
:func:`send_task_redis` sends those three commands itself, in one round trip on one connection (after
``AUTH`` and ``SELECT`` where the URL asks for them), in the Redis protocol (RESP2): the same keys and
the same values. ``tests/jobs/test_jobs_broker_redis_write.py`` compares what Redis holds after
both field by field and consumes the message with kombu's consumer, and the Redis worker tests run runs
sent this way. It waits for the server as the sending app does: a connection may take
:data:`CONNECT_TIMEOUT_S` (twice, half a second apart: :data:`jobs.client.SEND_RETRY_POLICY`), each
answer :data:`SOCKET_TIMEOUT_S`; a server that cannot be reached raises :class:`BrokerNotReached` with
redis-py's words (``Error 111 connecting to HOST:PORT. Connection refused.``).

Only a plain ``redis://[user[:password]@]host[:port][/db]`` URL is sent to this way
(:func:`redis_address`); others (TLS, a Unix socket, URL options) are sent to through Celery.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from jobs.broker_fs_write import task_message

EXCHANGE = "cooplab"
"""As :data:`jobs.celery_app.EXCHANGE`'s name (a test holds the two equal)."""
BINDING_KEYS = ("_kombu.binding.%s", "_kombu.binding_permanent.%s")
"""kombu's Redis channel's ``keyprefix_queue`` and ``keyprefix_binding_permanent``."""
BINDING_SEPARATOR = "\x06\x16"
"""kombu's Redis channel's ``sep``."""
CONNECT_TIMEOUT_S = 2.0
"""How long a sender waits for Redis to accept a connection (per try); Celery's sending app
(:data:`jobs.celery_app.SEND_CONNECT_TIMEOUT_S`) uses this one too."""
SOCKET_TIMEOUT_S = 10.0
"""How long an answer may take; the sending app's ``socket_timeout`` too."""
CONNECT_TRIES = 2
RETRY_AFTER_S = 0.5


class BrokerNotReached(ConnectionError):
    """The Redis server could not be reached, or broke off; its cause is the ``OSError``."""


class BrokerRefused(Exception):
    """The Redis server answered a command with an error (``-ERR ...``, e.g. a wrong password)."""


@dataclass(frozen=True)
class RedisAddress:
    host: str
    port: int
    db: int
    username: str | None
    password: str | None


def redis_address(url: str) -> RedisAddress | None:
    """Where a plain ``redis://`` URL points, as kombu reads it (host 127.0.0.1 and port 6379 by default,
    the path's number the database, user and password unquoted, an empty one as none); None for any
    other URL."""
    if not url.startswith("redis://"):
        return None
    try:
        parts = urlsplit(url)
        port = parts.port or 6379
    except ValueError:
        return None
    path = parts.path.lstrip("/")
    if parts.query or parts.fragment or not (path == "" or (path.isascii() and path.isdigit())):
        return None
    return RedisAddress(host=parts.hostname or "127.0.0.1", port=port, db=int(path or 0),
                        username=unquote(parts.username or "") or None,
                        password=unquote(parts.password or "") or None)


def credentials(address: RedisAddress) -> tuple[str, ...]:
    """``AUTH``'s arguments as redis-py sends them for kombu: ``user password`` (an empty password for a
    user without one), ``password`` alone, or nothing to send."""
    if address.username:
        return address.username, address.password or ""
    return (address.password,) if address.password else ()


def _command(*args: str | bytes) -> bytes:
    """One command in RESP2: an array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg.encode("utf-8") if isinstance(arg, str) else arg
        out += [b"$%d\r\n" % len(data), data, b"\r\n"]
    return b"".join(out)


def _reply(stream: Any) -> Any:
    """One RESP2 reply; an error reply is returned as :class:`BrokerRefused`, not raised."""
    line = stream.readline()
    if not line.endswith(b"\r\n"):
        raise ConnectionResetError("Connection closed by server.")
    kind, rest = line[:1], line[1:-2]
    if kind == b"-":
        return BrokerRefused(rest.decode("utf-8", "replace"))
    if kind in (b"+", b":"):
        return rest
    if kind == b"$":
        size = int(rest)
        if size < 0:
            return None
        data = stream.read(size + 2)
        if len(data) != size + 2:
            raise ConnectionResetError("Connection closed by server.")
        return data[:-2]
    if kind == b"*":
        return [_reply(stream) for _ in range(max(0, int(rest)))]
    raise ConnectionResetError(f"unexpected reply from the server: {line[:40]!r}")


def _connect(address: RedisAddress) -> socket.socket:
    """A connection, tried :data:`CONNECT_TRIES` times; raises :class:`BrokerNotReached` in redis-py's words."""
    where = f"{address.host}:{address.port}"
    for attempt in range(CONNECT_TRIES):
        try:
            sock = socket.create_connection((address.host, address.port), timeout=CONNECT_TIMEOUT_S)
            sock.settimeout(SOCKET_TIMEOUT_S)
            return sock
        except TimeoutError as exc:
            error: BrokerNotReached = BrokerNotReached("Timeout connecting to server")
            error.__cause__ = exc
        except OSError as exc:
            words = (f"Error {exc.args[0]} connecting to {where}. {exc.args[1]}." if len(exc.args) > 1
                     else f"Error {exc.args[0] if exc.args else ''} connecting to {where}.")
            error = BrokerNotReached(words)
            error.__cause__ = exc
        if attempt + 1 < CONNECT_TRIES:
            time.sleep(RETRY_AFTER_S)
    raise error


def push_message(address: RedisAddress, queue: str, message: dict[str, Any]) -> None:
    """Bind ``queue`` to the exchange and push ``message`` onto it, as kombu's Redis channel does, on one
    connection (``AUTH`` and ``SELECT`` first, in a round trip of their own, so a refused password writes
    nothing); raises :class:`BrokerNotReached` or :class:`BrokerRefused`."""
    member = BINDING_SEPARATOR.join([queue, "", queue])  # routing key = queue name, no pattern
    prelude = []
    if auth := credentials(address):
        prelude.append(_command("AUTH", *auth))
    if address.db:
        prelude.append(_command("SELECT", str(address.db)))
    writes = [_command("SADD", key % EXCHANGE, member) for key in BINDING_KEYS]
    writes.append(_command("LPUSH", queue, json.dumps(message)))
    sock = _connect(address)
    try:
        with sock.makefile("rb") as stream:
            for commands in (prelude, writes):
                if not commands:
                    continue
                sock.sendall(b"".join(commands))
                replies = [_reply(stream) for _ in commands]
                refused = [reply for reply in replies if isinstance(reply, BrokerRefused)]
                if refused:
                    raise refused[0]
    except OSError as exc:
        raise BrokerNotReached(f"Error while talking to {address.host}:{address.port}: {exc}") from exc
    finally:
        sock.close()


def send_task_redis(address: RedisAddress, task_name: str, args: list[Any], task_id: str, *, queue: str) -> None:
    """Push ``task_name``'s message for ``args`` onto ``queue`` (a device name) of the Redis broker at
    ``address``, as Celery's sending app would."""
    push_message(address, queue, task_message(task_name, args, task_id, routing_key=queue))


__all__ = ["BrokerNotReached", "BrokerRefused", "RedisAddress", "credentials", "push_message", "redis_address",
           "send_task_redis"]
