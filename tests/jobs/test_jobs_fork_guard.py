"""The worker parent forks job processes between its bookkeeping passes (jobs/fork_guard.py).

Each case runs in a fresh interpreter (the fork hooks are process-wide): a thread imports a slow module
inside ``bookkeeping()`` while the main thread forks, and the child imports the same module, as a job
process forked during a maintenance pass imports what that pass was importing.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCENARIO = textwrap.dedent("""
    import logging, os, signal, sys, threading, time
    sys.path.insert(0, sys.argv[1])
    from jobs import fork_guard

    mode, hold_s, alarm_s = sys.argv[2], float(sys.argv[3]), int(sys.argv[5])
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(message)s")
    if mode != "unguarded":
        fork_guard.install(wait_s=float(sys.argv[4]))
    started = threading.Event()

    def pass_that_imports():
        with fork_guard.bookkeeping():
            started.set()
            import slow_module  # noqa: F401  (sleeps hold_s at import)

    thread = threading.Thread(target=pass_that_imports, daemon=True)
    thread.start()
    started.wait()
    time.sleep(0.3)  # the import is under way
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        signal.alarm(alarm_s)  # a child stuck on the inherited lock dies of SIGALRM
        import slow_module  # noqa: F401,F811
        with fork_guard.bookkeeping():  # the child's own guard is free
            pass
        os._exit(0)
    waited = time.monotonic() - t0
    _, status = os.waitpid(pid, 0)
    print(f"waited={waited:.2f} signal={os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0} "
          f"exit={os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1}")
""")


def _alarm_s(mode: str) -> int:
    """How long a child may take before SIGALRM ends it: a guarded child has nothing to wait for (3 s is
    a margin for a loaded machine); an unguarded one is stuck for good, so 1 s shows it as well as 3 s."""
    return 3 if mode == "guarded" else 1


def _fork_during_import(tmp_path: Path, mode: str, *, hold_s: float, wait_s: float = 30.0,
                        alarm_s: int | None = None) -> str:
    (tmp_path / "slow_module.py").write_text(f"import time\ntime.sleep({hold_s})\n")
    script = tmp_path / "scenario.py"
    script.write_text(SCENARIO)
    alarm = _alarm_s(mode) if alarm_s is None else alarm_s
    result = subprocess.run([sys.executable, str(script), str(ROOT), mode, str(hold_s), str(wait_s), str(alarm)],
                            cwd=tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _field(output: str, name: str) -> float:
    line = output.strip().splitlines()[-1]
    return float(dict(part.split("=") for part in line.split())[name])


def test_a_fork_waits_for_the_pass_and_the_child_imports_what_the_pass_was_importing(tmp_path):
    output = _fork_during_import(tmp_path, "guarded", hold_s=1.5)
    assert _field(output, "exit") == 0, output
    assert _field(output, "signal") == 0, output
    assert 0.8 < _field(output, "waited") < 5, output  # it waited for the rest of the import


def test_without_the_guard_such_a_child_hangs_on_the_inherited_import_lock(tmp_path):
    """The hazard the guard exists for, shown on this Python: the child never gets the module."""
    output = _fork_during_import(tmp_path, "unguarded", hold_s=1.5)
    assert _field(output, "signal") == 14, output  # SIGALRM: stuck until the alarm
    assert _field(output, "waited") < 0.5, output


def test_a_pass_longer_than_the_wait_does_not_hold_the_fork_and_says_so(tmp_path):
    # the child is forked while the import is still under way, so it is stuck on the inherited lock
    # (as if unguarded) until its alarm
    output = _fork_during_import(tmp_path, "guarded", hold_s=3.0, wait_s=0.5, alarm_s=1)
    assert "forking while a bookkeeping pass has run for over 0.5 s" in output, output
    assert 0.4 < _field(output, "waited") < 2.0, output


LOG_SCENARIO = textwrap.dedent("""
    import logging, os, signal, sys, threading, time
    sys.path.insert(0, sys.argv[1])
    from jobs import fork_guard

    mode, alarm_s = sys.argv[2], int(sys.argv[3])
    if mode != "unguarded":
        fork_guard.install()
    reader, writer = os.pipe()
    handler = logging.StreamHandler(os.fdopen(writer, "w", buffering=1))  # a worker's log over a pipe
    worker_log = logging.getLogger("celery.worker")
    worker_log.addHandler(handler)
    worker_log.propagate = False

    def consumer_thread_logs():  # a line longer than the pipe holds: blocked inside the stream write
        worker_log.warning("x" * 200_000)

    def reader_drains_later():
        time.sleep(1.0)
        while os.read(reader, 65536):
            pass

    threading.Thread(target=consumer_thread_logs, daemon=True).start()
    time.sleep(0.3)  # the write is under way
    threading.Thread(target=reader_drains_later, daemon=True).start()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        signal.alarm(alarm_s)  # a child stuck on the inherited stream lock dies of SIGALRM
        worker_log.warning("job process started")
        os._exit(0)
    waited = time.monotonic() - t0
    _, status = os.waitpid(pid, 0)
    print(f"waited={waited:.2f} signal={os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0} "
          f"exit={os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1}", file=sys.stderr)
""")


def _fork_during_log_write(tmp_path: Path, mode: str) -> str:
    script = tmp_path / "log_scenario.py"
    script.write_text(LOG_SCENARIO)
    result = subprocess.run([sys.executable, str(script), str(ROOT), mode, str(_alarm_s(mode))], cwd=tmp_path,
                            env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stderr


def test_a_fork_waits_for_a_log_write_and_the_child_can_log(tmp_path):
    output = _fork_during_log_write(tmp_path, "guarded")
    assert _field(output, "signal") == 0, output
    assert _field(output, "exit") == 0, output
    assert 0.4 < _field(output, "waited") < 5, output  # it waited for the pipe to drain


def test_without_the_guard_a_child_forked_during_a_log_write_hangs_on_the_stream(tmp_path):
    """The hazard (CPython issue 91776), shown on this Python: the child inherits the stream's lock held."""
    output = _fork_during_log_write(tmp_path, "unguarded")
    assert _field(output, "signal") == 14, output  # SIGALRM: stuck until the alarm
    assert _field(output, "waited") < 0.4, output
