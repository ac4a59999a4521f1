"""The skewed-clock writer of the clock tests: one Python process per test module whose wall clock reads
a given shift off (``tests/jobs/skewed_clock``), writing through a store of its own. Importing the store
costs about 0.8 s of CPU time, so a test module starts it once (the ``skewed`` fixture of ``tests/db/conftest.py``) rather than once
per write."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterator

from tests.jobs.fault_helpers import skewed_clock_env
from tests.jobs.helpers import ROOT

# The writer: a shift given on start-up makes tests/jobs/skewed_clock/sitecustomize.py replace the
# project's utcnow; each request then sets the shift that replacement adds (sitecustomize's ``_SHIFT``),
# refuses to write unless its utcnow reads that far from the system clock, and runs the request's code
# with a store of its own (closed after it).
_WRITER = """
import contextlib, io, json, sys
from datetime import UTC, datetime, timedelta

import db.tables
import sitecustomize
from db.store import Store

assert db.tables.utcnow is not sitecustomize._true_utcnow, "the skewed clock is not installed"
for line in sys.stdin:
    request = json.loads(line)
    sitecustomize._SHIFT = timedelta(seconds=request["shift_s"])
    seen = (db.tables.utcnow() - datetime.now(UTC)).total_seconds()
    assert abs(seen - request["shift_s"]) < 1, f"the writer's clock reads {seen} s off"
    out = io.StringIO()
    store = Store(request["url"])
    with contextlib.redirect_stdout(out):
        exec(request["code"], {"store": store})
    store.close()
    print(json.dumps(out.getvalue()), flush=True)
"""


@contextlib.contextmanager
def skewed_writer() -> Iterator[Callable[[str, float, str], str]]:
    """``skewed(url, shift_s, code)``: run ``code`` (with ``store``, a Store on ``url``) in the writer
    process, its clock reading ``shift_s`` seconds off; returns what it printed."""
    proc = subprocess.Popen([sys.executable, "-c", _WRITER], cwd=ROOT, env=skewed_clock_env(1.0),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(url: str, shift_s: float, code: str) -> str:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"url": url, "shift_s": shift_s, "code": code}) + "\n")
        proc.stdin.flush()
        answer = proc.stdout.readline()
        if not answer:  # it died: its traceback says why
            proc.wait(timeout=30)
            raise AssertionError(proc.stderr.read() if proc.stderr else "the skewed writer died")
        return json.loads(answer)

    try:
        yield run
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
