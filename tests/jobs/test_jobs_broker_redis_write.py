"""A submit's message on the Redis broker, pushed without Celery, kombu or redis-py
(:mod:`jobs.broker_redis_write`), leaves Redis holding what Celery's sending app leaves for the same
task: the same keys (the queue's list, the exchange's two binding sets), the same members, and the same
message, byte for byte, except the two values that are new for every message or sender
(``delivery_tag``, ``reply_to``); kombu's consumer, as a worker's, takes it and reads the task; a
submit on Redis sends it this way (no sending app made); the constants are kombu's and Celery's. The
Redis worker tests (``test_jobs_redis_worker.py``, ``test_jobs_study_workers.py``) run runs sent this
way with real workers. No worker process here: cheap."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import uuid

import pytest
import redis

from jobs import broker_redis_write, celery_app, client
from jobs.broker_redis_write import (
    BrokerNotReached,
    BrokerRefused,
    RedisAddress,
    redis_address,
    send_task_redis,
)
from jobs.settings import Settings
from tests.jobs.fault_helpers import free_port
from tests.jobs.helpers import ROOT, tiny_config


def _held(url: str) -> dict:
    """Every key of the Redis database: its type and value (sets sorted, lists as raw bytes)."""
    r = redis.Redis.from_url(url)
    try:
        held = {}
        for key in sorted(r.keys()):
            kind = r.type(key).decode()
            value = sorted(r.smembers(key)) if kind == "set" else r.lrange(key, 0, -1) if kind == "list" else None
            held[key.decode()] = (kind, value)
        r.flushdb()
        return held
    finally:
        r.close()


@pytest.mark.parametrize("device", ["cpu", "cuda:0"])
def test_redis_holds_what_celery_leaves(redis_env, device) -> None:  # type: ignore[no-untyped-def]
    url = redis_env.resolved_broker_url
    task_id = str(uuid.uuid4())
    celery_app._SENDERS.clear()
    celery_app.get_sender_app(redis_env).send_task(
        celery_app.TASK_NAME, args=[7], task_id=task_id, queue=celery_app.device_queue(device), ignore_result=True,
        retry=True, retry_policy=client.SEND_RETRY_POLICY)
    by_celery = _held(url)
    send_task_redis(redis_address(url), client.TASK_NAME, [7], task_id, queue=device)
    by_hand = _held(url)
    member = f"{device}\x06\x16\x06\x16{device}".encode()
    assert by_celery == {**by_hand, device: by_celery[device]}
    assert by_hand["_kombu.binding.cooplab"] == by_hand["_kombu.binding_permanent.cooplab"] == ("set", [member])
    ((_, [celery_raw]), (_, [hand_raw])) = by_celery[device], by_hand[device]
    celery_message, hand_message = json.loads(celery_raw), json.loads(hand_raw)
    assert list(hand_message) == list(celery_message)
    for part in ("headers", "properties"):
        assert list(hand_message[part]) == list(celery_message[part])
    for key in ("delivery_tag", "reply_to"):  # new for every message / every sending app
        uuid.UUID(hand_message["properties"][key])
        hand_raw = hand_raw.replace(hand_message["properties"][key].encode(),
                                    celery_message["properties"][key].encode())
    assert hand_raw == celery_raw
    assert json.loads(base64.b64decode(hand_message["body"]))[0] == [7]
    assert hand_message["properties"]["delivery_info"] == {"exchange": "", "routing_key": device}


def test_a_worker_consumer_takes_it_and_reads_the_task(redis_env) -> None:  # type: ignore[no-untyped-def]
    """Celery's own consumer machinery (kombu's Redis channel, as a worker's app configures it) takes
    the message and decodes the task name, id and arguments from it."""
    task_id = str(uuid.uuid4())
    send_task_redis(redis_address(redis_env.resolved_broker_url), client.TASK_NAME, [11], task_id, queue="cpu")
    app = celery_app.create_app(redis_env)
    with app.connection_for_read() as conn:
        queue = celery_app.device_queue("cpu")(conn.default_channel)
        message = queue.get(accept=["json"])
        assert message is not None
        args, kwargs, _ = message.decode()
        assert (message.headers["task"], message.headers["id"], args, kwargs) == (celery_app.TASK_NAME, task_id,
                                                                                  [11], {})
        message.ack()
        assert queue.get(accept=["json"]) is None


def test_a_submit_on_redis_sends_this_way(redis_env, store, experiment_id) -> None:  # type: ignore[no-untyped-def]
    celery_app._SENDERS.clear()
    run_id = client.submit_run(tiny_config(), experiment_id=experiment_id, settings=redis_env)
    assert run_id.unsent is None and not celery_app._SENDERS  # no sending app was made
    (raw,) = _held(redis_env.resolved_broker_url)["cpu"][1]
    assert json.loads(raw)["headers"]["id"] == store.get_run(run_id).celery_task_id


def test_sending_imports_no_celery_kombu_or_redis_py(redis_env) -> None:  # type: ignore[no-untyped-def]
    code = ("import sys; from jobs.broker_redis_write import redis_address, send_task_redis; "
            f"send_task_redis(redis_address({redis_env.resolved_broker_url!r}), 'jobs.run_training', [1], 'x', "
            "queue='cpu'); print(sorted(m for m in ('celery', 'kombu', 'redis') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    assert len(_held(redis_env.resolved_broker_url)["cpu"][1]) == 1


def test_a_refused_password_writes_nothing(redis_env) -> None:  # type: ignore[no-untyped-def]
    """The test server has no password: ``AUTH`` is refused, and nothing is written after it."""
    address = redis_address(redis_env.resolved_broker_url)
    with_password = RedisAddress(address.host, address.port, address.db, None, "sekret")
    with pytest.raises(BrokerRefused, match="AUTH"):
        send_task_redis(with_password, client.TASK_NAME, [1], "x", queue="cpu")
    assert _held(redis_env.resolved_broker_url) == {}


def test_an_empty_password_is_none_and_a_user_is_authenticated_as_itself(redis_env) -> None:  # type: ignore[no-untyped-def]
    """As kombu and redis-py: ``redis://:@host`` sends no ``AUTH``; ``redis://user:pw@host`` and
    ``redis://user@host`` (a user without a password) authenticate as that user (an ACL user of the
    test server, removed after)."""
    url = redis_env.resolved_broker_url
    address = redis_address(url)
    db = f"/{address.db}" if address.db else ""
    send_task_redis(redis_address(f"redis://:@{address.host}:{address.port}{db}"), client.TASK_NAME, [1], "x",
                    queue="cpu")
    assert len(_held(url)["cpu"][1]) == 1
    user = f"cooplab-test-{uuid.uuid4().hex[:8]}"
    r = redis.Redis.from_url(url)
    try:
        r.acl_setuser(user, enabled=True, passwords=["+pw"], keys=["*"], channels=["*"], commands=["+@all"])
        send_task_redis(redis_address(f"redis://{user}:pw@{address.host}:{address.port}{db}"), client.TASK_NAME,
                        [2], "y", queue="cpu")
        assert len(_held(url)["cpu"][1]) == 1
        r.acl_setuser(user, enabled=False, nopass=True, reset=True)  # AUTH as it is refused: it was sent
        with pytest.raises(BrokerRefused, match="WRONGPASS"):
            send_task_redis(redis_address(f"redis://{user}@{address.host}:{address.port}{db}"), client.TASK_NAME,
                            [3], "z", queue="cpu")
        assert _held(url) == {}
    finally:
        r.acl_deluser(user)
        r.close()


def test_an_unreachable_server_is_named_in_redis_pys_words() -> None:
    port = free_port()
    with pytest.raises(BrokerNotReached) as raised:
        send_task_redis(RedisAddress("127.0.0.1", port, 0, None, None), client.TASK_NAME, [1], "x", queue="cpu")
    assert str(raised.value) == f"Error 111 connecting to 127.0.0.1:{port}. Connection refused."
    assert isinstance(raised.value.__cause__, ConnectionRefusedError)


@pytest.mark.parametrize(("url", "address"), [
    ("redis://127.0.0.1:6379/12", RedisAddress("127.0.0.1", 6379, 12, None, None)),
    ("redis://redis", RedisAddress("redis", 6379, 0, None, None)),
    ("redis://:p%40ss@h:7000/", RedisAddress("h", 7000, 0, None, "p@ss")),
    ("redis://user:pw@[::1]/3", RedisAddress("::1", 6379, 3, "user", "pw")),
    ("redis://", RedisAddress("127.0.0.1", 6379, 0, None, None)),
    ("redis://:@h/2", RedisAddress("h", 6379, 2, None, None)), ("redis://u@h", RedisAddress("h", 6379, 0, "u", None)),
    ("redis://h/\u00b3", None),
    ("rediss://h/0", None), ("unix:///tmp/redis.sock", None), ("redis://h/0?socket_timeout=3", None),
    ("redis://h/x", None), ("redis://h:port/0", None), ("filesystem://", None)])
def test_only_a_plain_redis_url_is_sent_to_without_celery(url: str, address: RedisAddress | None) -> None:
    assert redis_address(url) == address


def test_the_constants_are_kombus_and_celerys() -> None:
    from kombu.transport.redis import Channel

    assert celery_app.EXCHANGE.name == broker_redis_write.EXCHANGE
    assert (Channel.keyprefix_queue, Channel.keyprefix_binding_permanent) == broker_redis_write.BINDING_KEYS
    assert Channel.sep == broker_redis_write.BINDING_SEPARATOR
    celery_app._SENDERS.clear()
    sender = celery_app.create_sender_app(Settings(broker_url="redis://127.0.0.1:6379/0"))
    transport = sender.conf.broker_transport_options  # the sending app's bounds are this push's
    assert (transport["socket_connect_timeout"], transport["socket_timeout"]) == (
        broker_redis_write.CONNECT_TIMEOUT_S, broker_redis_write.SOCKET_TIMEOUT_S)
    assert client.SEND_RETRY_POLICY["max_retries"] + 1 == broker_redis_write.CONNECT_TRIES
    assert Channel.priority_steps[0] == 0  # priority 0: the queue's own key
