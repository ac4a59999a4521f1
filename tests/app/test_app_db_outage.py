"""While the database is unreachable every page says so in one line and retries, instead of Streamlit's
exception box with the driver's traceback (before: psycopg2's ``OperationalError`` on every page, and a
server that accepts but never answers held the page for the system's TCP timeout)."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

from app.db_outage import CONNECT_TIMEOUT_S, RETRY_S
from db.store import Store

PAGES = ("experiments", "studies", "runs", "run_detail", "transcripts", "compare", "workers")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def _silent_server() -> Iterator[int]:
    """A port whose connections the kernel accepts but no server ever answers (a hung database host)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


def test_every_page_says_in_one_line_that_the_database_is_unreachable(app, store: Store, monkeypatch) -> None:
    port = _free_port()  # nothing listens: connection refused
    monkeypatch.setenv("COOPLAB_DATABASE_URL", f"postgresql://lab:s3cret@127.0.0.1:{port}/cooplab")
    at = app()
    for page in PAGES:
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, (page, at.exception[0].message if at.exception else None)
        (warning,) = at.warning
        assert warning.value.startswith(f"The database at postgresql://lab:***@127.0.0.1:{port}/cooplab is "
                                        f'unreachable (connection to server at "127.0.0.1", port {port} failed: '
                                        "Connection refused"), (page, warning.value)
        assert warning.value.endswith(f"); retrying every {RETRY_S} s") and "\n" not in warning.value
        assert not at.title and not at.error, page  # the line instead of the page

    with _silent_server() as silent:
        monkeypatch.setenv("COOPLAB_DATABASE_URL", f"postgresql://lab@127.0.0.1:{silent}/cooplab")
        t0 = time.monotonic()
        at.run()
        took = time.monotonic() - t0
    print(f"\na hung database server: the page said so after {took:.1f} s")
    (warning,) = at.warning
    assert "timeout expired" in warning.value and not at.exception, warning.value
    assert took < CONNECT_TIMEOUT_S + 10  # the connect timeout, not the system's TCP timeout (minutes)

    monkeypatch.delenv("COOPLAB_DATABASE_URL")  # the database answers again: the page is back
    at.run()
    assert not at.warning and not at.exception and at.title[0].value == "Workers"


def test_the_database_is_probed_once_per_script_run(app, store: Store, experiment: int, seed, monkeypatch) -> None:
    """The page frame and every ``context.store()`` of a run share one probe (before: one each, two on
    the run page); the next run probes again, so an outage is still seen at once."""
    from app import db_outage

    probes: list[str] = []
    real = db_outage.unreachable
    monkeypatch.setattr(db_outage, "unreachable", lambda url: probes.append(url) or real(url))
    run_id = seed(experiment, status="succeeded", steps=2)
    at = app("run_detail", run=run_id, tab="Evaluations")
    assert not at.exception and len(probes) == 1
    at.run()
    assert len(probes) == 2
    at = app("studies")  # a page that asks for the store twice
    assert not at.exception and len(probes) == 3
