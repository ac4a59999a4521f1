"""A real HTTP listener on 127.0.0.1 that records every connection and request: the place a run config
must not be able to send the operator's key to (nothing leaves the machine)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Listener:
    """A real HTTP server on 127.0.0.1 that records every connection and request (method, path, headers,
    body) and answers a generic completion, or ``redirect_status`` to ``redirect_to``."""

    def __init__(self, redirect_to: str | None = None, redirect_status: int = 307) -> None:
        self.requests: list[dict[str, Any]] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                listener.requests.append({"method": self.command, "path": self.path,
                                          "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
                if redirect_to:
                    self.send_response(redirect_status)
                    self.send_header("Location", redirect_to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                n = json.loads(body or b"{}").get("num_return_sequences", 1)
                data = json.dumps({"completions": ["12"] * n}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_GET = _record  # noqa: N815 (http.server's names)

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def verify_request(self, request: Any, client_address: Any) -> bool:
                listener.connections += 1  # every TCP connection, even one that never speaks HTTP
                return True

        self.connections = 0
        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1/generate"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def authorizations(self) -> list[str]:
        return [r["headers"]["authorization"] for r in self.requests if "authorization" in r["headers"]]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
