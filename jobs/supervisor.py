"""``cooplab up``: the dashboard and one embedded worker as child processes, stopped together.

The embedded worker gets a name of its own (``cooplab-up-<device>-<pid>@host``), so shutting down asks
only its runs to stop, never those of another worker on the same host. The children run in their own
sessions, so a Ctrl-C in the terminal reaches only this supervisor,
which then shuts them down in order: the dashboard first, then the worker after asking its current
run to stop (it checkpoints and ends ``stopped``); a worker that does not exit within the stop grace
period is killed and its run settled by the maintenance pass. While running, the supervisor also does
the app-side maintenance (lost runs, overdue stops) every ``maintenance_interval_s``. A worker that
dies while the dashboard runs is started again (after 1 s, doubling up to 60 s while it keeps dying),
so one bad message or one crash does not take the dashboard down with it.
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


def dashboard_command(port: int = 8501, address: str = "127.0.0.1") -> list[str]:
    """The Streamlit command line for the dashboard (headless, no telemetry, no file watcher)."""
    return [sys.executable, "-m", "streamlit", "run", str(dashboard_script()),
            "--server.headless", "true", "--server.address", address, "--server.port", str(port),
            "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
            "--client.toolbarMode", "minimal"]


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
        env = child_environment(self.settings)
        if self.with_worker:
            self.children["worker"] = subprocess.Popen(worker_command(self.device, self.worker_name), env=env,
                                                       start_new_session=True)
        if self.with_ui:
            self.children["dashboard"] = subprocess.Popen(dashboard_command(self.port, self.host), env=env,
                                                          start_new_session=True)
            log.info("dashboard on http://%s:%s", self.host, self.port)

    def _on_signal(self, signum: int, frame: object) -> None:
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
        from jobs.maintenance import StopEnforcer, run_maintenance

        enforcer = StopEnforcer()
        restarts = WorkerRestarts()
        while not self.stop_event.wait(self.settings.maintenance_interval_s):
            dashboard = self.children.get("dashboard")
            if dashboard is not None and dashboard.poll() is not None:
                log.error("dashboard exited with code %s; shutting down", dashboard.returncode)
                return dashboard.returncode or 1
            worker = self.children.get("worker")
            if worker is not None and worker.poll() is not None:
                if not self.with_ui:
                    log.error("worker exited with code %s; shutting down", worker.returncode)
                    return worker.returncode or 1
                self._restart_worker(worker, restarts)
            try:
                run_maintenance(self.settings, enforcer=enforcer)
            except Exception:
                log.warning("maintenance pass failed", exc_info=True)
        return 0

    def _restart_worker(self, worker: subprocess.Popen[bytes], restarts: WorkerRestarts) -> None:
        """The worker died under a running dashboard: settle its runs and start it again after a delay
        that doubles while it keeps dying (1 s up to 60 s), so the dashboard stays up."""
        now = time.monotonic()
        if restarts.due_at is None:
            _signal_group(worker, signal.SIGKILL)  # a job process left behind by the dead worker
            restarts.due_at = now + restarts.delay(now)
            log.error("worker exited with code %s; restarting it in %.0f s (the dashboard stays up)",
                      worker.returncode, restarts.due_at - now)
            return
        if now < restarts.due_at:
            return
        restarts.due_at = None
        restarts.started_at = now
        self.children["worker"] = subprocess.Popen(worker_command(self.device, self.worker_name),
                                                   env=child_environment(self.settings), start_new_session=True)
        log.info("worker started again (pid %s)", self.children["worker"].pid)

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
        from db.store import Store

        name = self.worker_name
        try:
            with Store(self.settings.resolved_database_url) as store:
                for run in store.list_runs(statuses=states.LIVE_STATUSES, limit=1000):
                    if run.worker == name:
                        store.request_stop(run.id)
        except Exception:
            log.warning("could not ask the worker's runs to stop", exc_info=True)


class WorkerRestarts:
    """When to start a dead worker again: after 1 s, doubling up to 60 s while it keeps dying within a
    minute of its start; back to 1 s once it has run a minute."""

    FIRST_S = 1.0
    MAX_S = 60.0
    STABLE_S = 60.0

    def __init__(self) -> None:
        self.started_at: float | None = None
        self.due_at: float | None = None
        self.current = self.FIRST_S

    def delay(self, now: float) -> float:
        if self.started_at is None or now - self.started_at >= self.STABLE_S:
            self.current = self.FIRST_S
        else:
            self.current = min(self.current * 2, self.MAX_S)
        return self.current


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
