"""The vLLM server's torch.distributed store, listening on the loopback interface only.

vLLM's engine joins a one-process torch.distributed group through ``tcp://<VLLM_HOST_IP>:<port>``.
torch's ``tcp://`` rendezvous starts a ``TCPStore`` server that listens on every address of the
machine whatever host the URL names, so any host that reaches the worker could talk to the store
while the engine runs. The server process calls :func:`install_loopback_store` before vLLM starts:
for a loopback host (the client sets ``VLLM_HOST_IP=127.0.0.1``) rank 0's store is then started on a
socket bound to that address alone; other URLs go to torch's own handler. Runs in the vLLM venv
(torch comes from there); imports torch only when called.
"""

from __future__ import annotations

import importlib
import ipaddress
import socket
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlparse

LOOPBACK_HOST = "127.0.0.1"


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_listener(host: str, port: int) -> socket.socket:
    """A listening TCP socket bound to ``host``:``port`` only (``OSError`` when the port is taken)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=128)


def install_loopback_store() -> bool:
    """Route this process's ``tcp://`` rendezvous on a loopback host through a store bound to that host;
    returns whether it was installed (False where this torch keeps its handlers elsewhere)."""
    rdzv = importlib.import_module("torch.distributed.rendezvous")  # the module (torch.distributed.rendezvous
    # is also the name of its function)
    handlers = getattr(rdzv, "_rendezvous_handlers", None)
    if not isinstance(handlers, dict) or "tcp" not in handlers:
        return False
    original = handlers["tcp"]
    if getattr(original, "cooplab_loopback", False):
        return True

    def handler(url: str, timeout: timedelta = rdzv.default_pg_timeout, **kwargs: Any) -> Iterator[Any]:
        parsed = urlparse(url)
        query = parse_qs(parsed.query)
        rank = int(query.get("rank", ["-1"])[0])
        world_size = int(query.get("world_size", ["-1"])[0])
        if rank != 0 or world_size < 1 or not parsed.port or not is_loopback(parsed.hostname):
            yield from original(url, timeout, **kwargs)
            return
        from torch.distributed import TCPStore

        listener = loopback_listener(str(parsed.hostname), parsed.port)
        store = TCPStore(str(parsed.hostname), parsed.port, world_size, True, timeout=timeout,
                         master_listen_fd=listener.detach(), use_libuv=True)  # the store owns the socket now
        yield store, rank, world_size
        raise RuntimeError("Unable to perform re-rendezvous using tcp:// method")

    handler.cooplab_loopback = True  # type: ignore[attr-defined]
    handlers["tcp"] = handler
    return True


__all__ = ["LOOPBACK_HOST", "install_loopback_store", "is_loopback", "loopback_listener"]
