"""A real MLflow tracking server for the export tests: ``mlflow server`` with a SQLite backend and a
local artifact folder it serves itself, on a free loopback port, stopped when the module ends."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

QUIET_MLFLOW = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
}


@dataclass(frozen=True)
class MlflowServer:
    uri: str
    folder: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as answer:  # noqa: S310 - loopback test server
            return answer.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    binary = Path(sys.executable).parent / "mlflow"
    if not binary.is_file():
        pytest.skip("the mlflow server is not installed: pip install -e '.[dev]' (make test installs it)")
    folder = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
    uri = f"http://127.0.0.1:{port}"
    env = {**os.environ, **QUIET_MLFLOW}
    with (folder / "server.log").open("wb") as log:
        proc = subprocess.Popen(
            [
                str(binary),
                "server",
                "--backend-store-uri",
                f"sqlite:///{folder / 'mlflow.db'}",
                "--artifacts-destination",
                str(folder / "artifacts"),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "1",
            ],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 240  # the server imports for a while on a busy machine
        while not _answers(uri):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"mlflow server did not start:\n{(folder / 'server.log').read_text()[-4000:]}"
                )
            time.sleep(0.5)
        yield MlflowServer(uri, folder)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=20)
