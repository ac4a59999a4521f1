"""A real HTTP server on 127.0.0.1 for the API comparator's tests (nothing leaves the machine)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ApiServer:
    """A real HTTP server on 127.0.0.1 answering every POST with ``answer(body) -> JSON``."""

    def __init__(self, answer) -> None:
        self.requests: list[tuple[dict, dict]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                api.requests.append((dict(self.headers), body))
                data = json.dumps(answer(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/generate"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
