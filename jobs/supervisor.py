"""``cooplab up``: the dashboard and one embedded worker as child processes, stopped together.

The embedded worker gets a name of its own (``cooplab-up-<device>-<pid>@host``), so shutting down asks
only its runs to stop, never those of another worker on the same host. The children run in their own
sessions, so a Ctrl-C in the terminal reaches only this supervisor,
which then shuts them down in order: the dashboard first, then the worker after asking its current
run to stop (it checkpoints and ends ``stopped``); a worker that does not exit within the stop grace
period is killed and its run settled by the maintenance pass. The runs it asks to stop keep why in
their notes: ``stopped: cooplab up shut down: <cause>`` (SIGTERM, SIGINT (Ctrl-C), a child that kept
failing). While running, the supervisor also does the app-side maintenance (lost runs, overdue stops)
every ``maintenance_interval_s``. A child that dies is started again (after 1 s, doubling up to 60 s
while it keeps dying): a dead worker so one bad message or one crash does not take the dashboard down
with it, a dead dashboard (killed for memory, a crash) so training goes on untouched. A dashboard that
dies within a minute of its start :attr:`Restarts.GIVE_UP_AFTER` times in a row is given up on, and
``cooplab up`` shuts down saying so.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from db import states
from jobs.settings import Settings, get_settings

log = logging.getLogger(__name__)

_REPO_ROOT = Path(__file__).resolve().parent.parent


def dashboard_script() -> Path:
    """The dashboard's server script ``app/server.py`` (the pages of ``app/main.py`` plus the download
    route), found without importing the app; ``app/main.py`` when an older tree has no server script."""
    spec = importlib.util.find_spec("app")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for name in ("server.py", "main.py"):
        for folder in folders:
            script = Path(folder) / name
            if script.is_file():
                return script
    raise FileNotFoundError("the dashboard entry point app/server.py was not found; run from the CoopLab "
                            "source tree or install the cooplab package")


SERVED_OPTIONS: dict[str, bool | str] = {
    "browser.gatherUsageStats": False,
    "server.fileWatcherType": "none",
    "runner.postScriptGC": False,
    "client.toolbarMode": "minimal",
}
"""Streamlit options the dashboard is served with (the dashboard tests run their pages with them too):
no telemetry, no file watcher, and no full garbage collection after every script run: Streamlit's
default ``runner.postScriptGC`` walks the whole heap after each run, a live region's refresh included,
which was about half of a live run page's server CPU; Python's own collector still runs as the heap
grows."""


def dashboard_command(port: int = 8501, address: str = "127.0.0.1") -> list[str]:
    """The Streamlit command line for the dashboard: headless, with :data:`SERVED_OPTIONS`."""
    options = [part for name, value in SERVED_OPTIONS.items()
               for part in (f"--{name}", str(value).lower() if isinstance(value, bool) else value)]
    return [sys.executable, "-m", "streamlit", "run", str(dashboard_script()),
            "--server.headless", "true", "--server.address", address, "--server.port", str(port), *options]


def worker_command(device: str = "cpu", name: str | None = None) -> list[str]:
    command = [sys.executable, "-m", "cooplab", "worker", "--device", device]
    return command + ["--name", name] if name else command


def child_environment(settings: Settings) -> dict[str, str]:
    """The environment for children: the same data directory (as an absolute path) and import path."""
    env = dict(os.environ)
    env["COOPLAB_HOME"] = str(settings.data_dir)
    paths = [str(_REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    # the dashboard's server (uvicorn) believes X-Forwarded-For only from the configured proxies, not
    # from every loopback peer (its default): a client cannot pick its own address for the sign-in limits
    env["FORWARDED_ALLOW_IPS"] = settings.ui_trusted_proxies
    return env


class Supervisor:
    """Starts, watches and stops the dashboard and the embedded worker."""

    def __init__(self, settings: Settings | None = None, *, port: int = 8501, host: str = "127.0.0.1",
                 device: str = "cpu", with_ui: bool = True, with_worker: bool = True) -> None:
        """``host`` is the address the dashboard listens on: ``127.0.0.1`` (this machine only) or
        ``0.0.0.0`` (every interface, e.g. inside a container)."""
        self.settings = settings or get_settings()
        self.port = port
        self.host = host
        self.device = device
        self.with_ui = with_ui
        self.with_worker = with_worker
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.stop_event = threading.Event()
        self.cause = "it was asked to"  # why it shut down, for the notes of the runs it stops
        from jobs.worker import node_name

        # the embedded worker's own name: shutting down stops only its runs, never another worker's
        self.worker_name = node_name(device, pid=os.getpid()).replace("cooplab-", "cooplab-up-", 1)

    def start(self) -> None:
        self.settings.ensure_dirs()
        from db.migrate import upgrade

        upgrade(self.settings.resolved_database_url)
        from db.store import Store
        from jobs.datadir import claim_data_dir

        with Store(self.settings.resolved_database_url) as store:
            claim_data_dir(self.settings, store)  # refuses a data directory of another database
        if self.with_worker:
            self._start_child("worker")
        if self.with_ui:
            self._start_child("dashboard")
            log.info("dashboard on http://%s:%s", self.host, self.port)

    def _command(self, name: str) -> list[str]:
        if name == "dashboard":
            return dashboard_command(self.port, self.host)
        return worker_command(self.device, self.worker_name)

    def _start_child(self, name: str) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(self._command(name), env=child_environment(self.settings), start_new_session=True)
        self.children[name] = child
        return child

    def _on_signal(self, signum: int, frame: object) -> None:
        self.cause = _SIGNAL_CAUSES.get(signum, signal.Signals(signum).name)
        self.stop_event.set()

    def run(self) -> int:
        """Start the children and supervise until a signal or a child exits; returns an exit code."""
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        code = 0
        try:
            self.start()
            code = self._watch()
        finally:
            self.shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return code

    def _watch(self) -> int:
        """Check the children every second (at most) and do a maintenance pass every
        ``maintenance_interval_s``, until a signal or a child that cannot be kept up."""
        from jobs.maintenance import StopEnforcer, run_maintenance

        enforcer = StopEnforcer()
        restarts = {"worker": Restarts(give_up=False), "dashboard": Restarts(give_up=True)}
        interval = self.settings.maintenance_interval_s
        maintenance_due = time.monotonic() + interval
        while not self.stop_event.wait(min(1.0, interval)):
            for name in ("dashboard", "worker"):
                child = self.children.get(name)
                if child is None or child.poll() is None:
                    continue
                if name == "worker" and not self.with_ui:
                    self.cause = f"the worker exited with code {child.returncode}"
                    log.error("worker exited with code %s; shutting down", child.returncode)
                    return child.returncode or 1
                if not self._restart(name, child, restarts[name]):
                    return child.returncode or 1
            if time.monotonic() >= maintenance_due:
                maintenance_due = time.monotonic() + interval
                try:
                    run_maintenance(self.settings, enforcer=enforcer)
                except Exception:
                    log.warning("maintenance pass failed", exc_info=True)
        return 0

    def _restart(self, name: str, child: subprocess.Popen[bytes], restarts: Restarts) -> bool:
        """Child ``name`` died while the other runs: start it again after a delay that doubles while it
        keeps dying (1 s up to 60 s), leaving the other (and the worker's runs) as they are. False when
        it is given up on (it died within a minute of its start too many times in a row)."""
        now = time.monotonic()
        if restarts.due_at is None:
            _signal_group(child, signal.SIGKILL)  # whatever it left behind (a worker's job process)
            if restarts.failed(now):
                self.cause = (f"the {name} kept failing (exited with code {child.returncode}, "
                              f"{restarts.failures} times in a row within {restarts.STABLE_S:.0f} s of its start)")
                log.error("%s; shutting down", self.cause)
                return False
            restarts.due_at = now + restarts.current
            others = "training goes on" if name == "dashboard" else "the dashboard stays up"
            log.error("%s exited with code %s; restarting it in %.0f s (%s)", name, child.returncode,
                      restarts.due_at - now, others)
            return True
        if now >= restarts.due_at:
            restarts.due_at = None
            restarts.started_at = now
            log.info("%s started again (pid %s)", name, self._start_child(name).pid)
        return True

    def shutdown(self) -> None:
        """Stop the dashboard, then the worker (its run asked to stop first); idempotent."""
        dashboard = self.children.pop("dashboard", None)
        if dashboard is not None:
            _terminate(dashboard, timeout=10)
        worker = self.children.pop("worker", None)
        if worker is not None:
            self._stop_worker_runs()
            _terminate(worker, timeout=self.settings.stop_grace_s + 15)
            try:
                from jobs.maintenance import run_maintenance

                run_maintenance(self.settings)
            except Exception:
                log.warning("final maintenance pass failed", exc_info=True)

    def _stop_worker_runs(self) -> None:
        """Ask the embedded worker's runs to stop, noting why as the first line of each run's notes (the
        user's own follow), so a stop by the shutdown is not taken for a user's Stop."""
        from db.store import Store

        name = self.worker_name
        reason = f"stopped: cooplab up shut down: {self.cause}"
        try:
            with Store(self.settings.resolved_database_url) as store:
                for run in store.list_runs(statuses=states.LIVE_STATUSES, limit=1000):
                    if run.worker != name:
                        continue
                    asked = store.request_stop(run.id)
                    if asked.status in (states.STOPPING, states.CANCELLED):
                        store.set_run_notes(run.id, notes="\n".join(filter(None, (reason, asked.notes))))
                        log.info("run %s asked to stop (%s)", run.id, reason)
        except Exception:
            log.warning("could not ask the worker's runs to stop", exc_info=True)


_SIGNAL_CAUSES = {signal.SIGINT: "SIGINT (Ctrl-C)", signal.SIGTERM: "SIGTERM"}


class Restarts:
    """When to start a dead child again: after 1 s, doubling up to 60 s while it keeps dying within a
    minute of its start; back to 1 s once it has run a minute. With ``give_up``, the
    :attr:`GIVE_UP_AFTER`-th such death in a row is final."""

    FIRST_S = 1.0
    MAX_S = 60.0
    STABLE_S = 60.0
    GIVE_UP_AFTER = 5

    def __init__(self, *, give_up: bool = False) -> None:
        self.give_up = give_up
        self.started_at: float | None = None
        self.due_at: float | None = None
        self.current = self.FIRST_S
        self.failures = 0

    def failed(self, now: float) -> bool:
        """Count a death at ``now`` and set the next delay; True when the child is given up on."""
        if self.started_at is None or now - self.started_at >= self.STABLE_S:
            self.current = self.FIRST_S
            self.failures = 1
        else:
            self.current = min(self.current * 2, self.MAX_S)
            self.failures += 1
        return self.give_up and self.failures >= self.GIVE_UP_AFTER


def _terminate(proc: subprocess.Popen[bytes], *, timeout: float) -> None:
    """SIGTERM the child (only its main process: a worker then asks its job to stop and waits for it),
    wait, then SIGKILL its whole process group."""
    if proc.poll() is not None:
        _signal_group(proc, signal.SIGKILL)
        return
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if proc.poll() is None:
        log.warning("process %s did not exit in %g s; killing it", proc.pid, timeout)
        _signal_group(proc, signal.SIGKILL)
        proc.wait(timeout=10)
    else:
        # the worker's job process may outlive its parent for a moment; make sure nothing is left
        _signal_group(proc, signal.SIGKILL)


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
