"""Whether the dashboard's port is free, checked before anything starts.

Streamlit finds a busy port only once it starts, after the database upgrade and the worker, and the
supervisor has printed the dashboard's URL by then; ``cooplab up`` / ``cooplab ui`` ask first and
print only the error.
"""

from __future__ import annotations

import errno
import socket


def port_problem(host: str, port: int) -> str | None:
    """Why the dashboard cannot listen on ``host``:``port``, or None when it can.

    Binds a socket the way a server does (``SO_REUSEADDR``, so a port left in TIME_WAIT by a dashboard
    that just stopped counts as free) and closes it at once. Only a port in use is answered here."""
    if not 1 <= port <= 65535:
        return f"--port {port} is not a port; use a number from 1 to 65535 (the default is 8501)"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            other = port + 1 if port < 65535 else port - 1
            return (f"Port {port} on {host} is already in use; stop what listens there or choose another port: "
                    f"--port {other} (make run: PORT={other} make run)")
    return None  # any other refusal (a privileged port, an address of another machine) the server reports
