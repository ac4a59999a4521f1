"""A small in-process MLflow tracking server for the export's security tests: the REST calls
``cooplab export mlflow`` makes, answered from memory on a loopback port, with every request recorded.

Unlike the real ``mlflow server`` of ``conftest.py`` (which takes seconds to start), it starts at once
and can lie: ``artifact_uri`` is what the run's create-run answer says its artifact location is,
``get_artifact_uri`` what a later get-run says (an honest server says the same twice), and
``experiment_location`` the artifact location of its experiment.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

API = "/api/2.0/mlflow"
ARTIFACTS = "/api/2.0/mlflow-artifacts/artifacts"
RUN_ID = "0123456789abcdef0123456789abcdef"


@dataclass
class FakeMlflow:
    """What the fake answers, and what it was asked (``requests``: method, path, basic-auth user:password)."""

    artifact_uri: str = f"mlflow-artifacts:/1/{RUN_ID}/artifacts"
    get_artifact_uri: str | None = None
    experiment_location: str = "mlflow-artifacts:/1"
    experiment_exists: bool = False
    port: int = 0
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    uploads: dict[str, bytes] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"127.0.0.1:{self.port}"

    def paths(self, method: str) -> list[str]:
        return [path for m, path, _ in self.requests if m == method]

    def _experiment(self, name: str) -> dict[str, Any]:
        return {"experiment_id": "1", "name": name, "artifact_location": self.experiment_location,
                "lifecycle_stage": "active"}

    def _run(self, artifact_uri: str, status: str = "RUNNING") -> dict[str, Any]:
        info = {"run_id": RUN_ID, "run_uuid": RUN_ID, "experiment_id": "1", "user_id": "u", "status": status,
                "start_time": 0, "artifact_uri": artifact_uri, "lifecycle_stage": "active", "run_name": "r"}
        return {"info": info, "data": {}}

    def answer(
        self, method: str, path: str, query: dict[str, list[str]], body: dict[str, Any]
    ) -> tuple[int, Any]:
        """The status and JSON body for one request."""
        if method == "GET" and path == f"{API}/experiments/get-by-name":
            if not self.experiment_exists:
                return 404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no such experiment"}
            return 200, {"experiment": self._experiment(query["experiment_name"][0])}
        if method == "POST" and path == f"{API}/experiments/create":
            self.experiment_exists = True
            return 200, {"experiment_id": "1"}
        if method == "GET" and path == f"{API}/experiments/get":
            return 200, {"experiment": self._experiment("coop")}
        if method == "POST" and path == f"{API}/runs/search":
            return 200, {"runs": []}
        if method == "POST" and path == f"{API}/runs/create":
            return 200, {"run": self._run(self.artifact_uri)}
        if method == "GET" and path == f"{API}/runs/get":
            return 200, {"run": self._run(self.get_artifact_uri or self.artifact_uri)}
        if method == "POST" and path == f"{API}/runs/log-batch":
            return 200, {}
        if method == "POST" and path == f"{API}/runs/update":
            return 200, {"run_info": self._run(self.artifact_uri, body.get("status", "FINISHED"))["info"]}
        if method == "POST" and path == f"{API}/runs/delete":
            self.deleted.append(body.get("run_id", ""))
            return 200, {}
        return 404, {"error_code": "ENDPOINT_NOT_FOUND", "message": f"{method} {path}"}


def _handler(fake: FakeMlflow) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass

        def _auth(self) -> str:
            header = self.headers.get("Authorization", "")
            return base64.b64decode(header[6:]).decode() if header.startswith("Basic ") else ""

        def _reply(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            path = unquote(parts.path)
            fake.requests.append((self.command, path, self._auth()))
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.command == "PUT" and path.startswith(ARTIFACTS + "/"):
                fake.uploads[path[len(ARTIFACTS) + 1 :]] = data
                self._reply(200, {})
                return
            body = json.loads(data) if data and self.command == "POST" else {}
            self._reply(*fake.answer(self.command, path, parse_qs(parts.query), body))

        do_GET = do_POST = do_PUT = _serve  # noqa: N815 - http.server's names

    return Handler


@contextmanager
def serving(fake: FakeMlflow) -> Iterator[FakeMlflow]:
    """Serve ``fake`` on a free loopback port (``fake.port``) until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
