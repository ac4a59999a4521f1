"""Hostile programs are contained, reported as failed with a reason, and leave the caller healthy."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time

import pytest

from engine.sandbox import SandboxLimits, process, run_python
from engine.sandbox.identity import slot_uid, uid_pids

LIMITS = SandboxLimits(timeout_s=2.0, memory_mb=256, max_processes=8, max_file_mb=1)


def _assert_caller_healthy(threads_before: int) -> None:
    """The caller can still run a sandbox, has no extra threads, and no sandbox process survives."""
    result = run_python("print(6 * 7)", limits=LIMITS)
    assert result.ok and result.stdout.strip() == "42", result
    assert threading.active_count() == threads_before
    if os.geteuid() == 0:  # every sandbox uid of this process is empty again
        assert not any(uid_pids(slot_uid(slot)) for slot in range(4))


def test_normal_program_runs_and_reports_output():
    result = run_python("import math\nprint(math.factorial(5))", limits=LIMITS)
    assert result.status == "ok" and result.returncode == 0
    assert result.stdout.strip() == "120"


def test_infinite_loop_hits_the_wall_clock_limit():
    before = threading.active_count()
    result = run_python("while True:\n    pass\n", limits=LIMITS)
    assert not result.ok
    assert result.status in ("timeout", "killed")
    assert "limit" in result.reason
    assert result.duration_s < LIMITS.timeout_s + 2.0
    _assert_caller_healthy(before)


def test_cpu_time_limit_kills_a_busy_program_before_the_wall_clock():
    result = run_python("while True:\n    pass\n", limits=SandboxLimits(timeout_s=8, cpu_s=1, memory_mb=256))
    assert result.status == "killed"
    assert "CPU-time limit" in result.reason
    assert result.duration_s < 6


def test_fork_bomb_is_contained_and_cleaned_up():
    before = threading.active_count()
    bomb = (
        "import os\n"
        "children = 0\n"
        "while True:\n"
        "    try:\n"
        "        os.fork()\n"
        "        children += 1\n"
        "    except OSError:\n"
        "        pass\n"
    )
    result = run_python(bomb, limits=LIMITS)
    assert not result.ok
    assert result.status in ("timeout", "killed", "error")
    assert result.reason
    _assert_caller_healthy(before)


def test_process_limit_stops_forking_beyond_the_limit():
    probe = (
        "import os, time\n"
        "made = 0\n"
        "for _ in range(50):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(30)\n"
        "        os._exit(0)\n"
        "    made += 1\n"
        "print(made)\n"
        "raise SystemExit(0 if made < 50 else 3)\n"
    )
    result = run_python(probe, limits=SandboxLimits(timeout_s=5, memory_mb=256, max_processes=8))
    assert result.ok, result
    assert int(result.stdout.strip()) < 8


def test_memory_bomb_fails_with_memory_reason():
    before = threading.active_count()
    result = run_python("block = bytearray(2 * 1024 ** 3)\nprint(len(block))", limits=LIMITS)
    assert not result.ok
    assert "memory limit" in result.reason
    _assert_caller_healthy(before)


def test_writing_outside_the_working_directory_is_blocked(tmp_path):
    target = tmp_path / "escaped.txt"
    # the host's folders are not even there: the write fails either way and nothing appears
    for code in (
        f"open({str(target)!r}, 'w').write('x')",
        f"import os\nfd = os.open({str(target)!r}, os.O_WRONLY | os.O_CREAT)\nos.write(fd, b'x')",
    ):
        result = run_python(code, limits=LIMITS)
        assert result.status in ("blocked", "error"), result
    assert not target.exists()
    # inside, the audit hook (defence in depth) refuses writes outside the private /tmp
    for code in (
        "open('/box/escape.txt', 'w').write('x')",
        "import os\nos.chdir('/box')\nopen('escape.txt', 'w').write('x')",
        "import os\nfd = os.open('/usr', os.O_RDONLY)\nos.open('escape.txt', os.O_WRONLY | os.O_CREAT, dir_fd=fd)",
    ):
        result = run_python(code, limits=LIMITS)
        assert result.status == "blocked", result
        assert "outside the working directory" in result.reason
    # and without the hook the read-only root refuses them
    for folder in ("/", "/box", "/usr", "/dev"):
        result = run_python(f"open('{folder}/escape.txt', 'w').write('x')",
                            limits=SandboxLimits(timeout_s=2.0, memory_mb=256, audit_hook=False))
        assert result.status == "error" and "Read-only file system" in result.reason, (folder, result)


def _sandbox_folders(prefix: str) -> set[str]:
    return {name for name in os.listdir(tempfile.gettempdir()) if name.startswith(prefix)}


def test_writing_inside_the_working_directory_is_allowed_and_removed_afterwards(monkeypatch):
    # A prefix of this test's own: other tests' sandboxes come and go in the same temp folder meanwhile.
    prefix = f"{process.TEMP_PREFIX}containment-{os.getpid()}-"
    monkeypatch.setattr(process, "TEMP_PREFIX", prefix)
    made: list[str] = []
    real_mkdtemp = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda *a, **k: made.append(real_mkdtemp(*a, **k)) or made[-1])
    code = "import os\nopen('notes.txt', 'w').write('hello')\nprint(os.getcwd())\nprint(open('notes.txt').read())"
    result = run_python(code, limits=LIMITS, files={"data/input.txt": "given"})
    assert result.ok, result
    workdir, text = result.stdout.split()
    assert (workdir, text) == ("/tmp", "hello")  # the private /tmp inside the sandbox
    assert [m for m in made if os.path.basename(m).startswith(prefix)]  # the run's host folder was made ...
    assert _sandbox_folders(prefix) == set()  # ... and is gone
    result = run_python("print(open('data/input.txt').read())", limits=LIMITS, files={"data/input.txt": "given"})
    assert result.stdout.strip() == "given"


def test_file_size_limit():
    result = run_python("open('big.bin', 'wb').write(b'x' * 3_000_000)", limits=LIMITS)
    assert not result.ok
    assert "file-size limit" in result.reason


def test_environment_secrets_are_not_visible(monkeypatch):
    monkeypatch.setenv("COOPLAB_TEST_SECRET", "hunter2-secret")
    code = (
        "import os\n"
        "print(sorted(os.environ))\n"
        "print(os.environ['COOPLAB_TEST_SECRET'])\n"
    )
    result = run_python(code, limits=LIMITS)
    assert not result.ok
    assert "KeyError" in result.reason
    assert "hunter2-secret" not in result.stdout + result.stderr
    # the caller is outside the sandbox's PID namespace: its "parent" is the sandbox's own first
    # process, and even that one is hidden (an empty /proc/1)
    code = ("import os\nprint(os.getppid())\ntry:\n    print(open(f'/proc/{os.getppid()}/environ').read())\n"
            "except OSError as exc:\n    print('hidden', exc.errno)\n")
    result = run_python(code, limits=LIMITS)
    assert result.stdout.split() == ["1", "hidden", "2"], result
    assert "hunter2-secret" not in result.stdout + result.stderr


def test_opening_a_socket_is_blocked():
    # a real listening socket in the caller, so a sandbox with network access could reach it
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        before = threading.active_count()
        code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\nprint('connected')"
        result = run_python(code, limits=LIMITS)
        assert not result.ok
        assert result.status == "blocked"
        assert "network access" in result.reason
        assert "connected" not in result.stdout
        server.settimeout(0.2)
        with pytest.raises(TimeoutError):
            server.accept()
        _assert_caller_healthy(before)
    finally:
        server.close()


def test_starting_programs_and_foreign_calls_are_blocked():
    for code, words in (
        ("import os\nos.system('echo hi')", "starting programs"),
        ("import subprocess\nsubprocess.run(['true'])", "starting programs"),
        ("import ctypes", "ctypes"),
    ):
        result = run_python(code, limits=LIMITS)
        assert result.status == "blocked", result
        assert words in result.reason


def test_sandbox_runs_as_nobody_inside_and_a_dedicated_uid_outside():
    code = "import os, time\nprint(os.getuid(), os.getgid(), os.getpid(), flush=True)\ntime.sleep(1.5)\n"
    outside: list[int] = []

    def watch():  # while it runs, find the program's process on the host
        deadline = time.monotonic() + 1.4
        while time.monotonic() < deadline and not outside:
            for pid in os.listdir("/proc"):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as fh:
                        if b"/box/bootstrap.py" in fh.read():
                            outside.append(os.stat(f"/proc/{pid}").st_uid)
                except OSError:
                    continue
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    result = run_python(code, limits=LIMITS)
    watcher.join()
    uid, gid, pid = result.stdout.split()
    assert (int(uid), int(gid)) == (65534, 65534)
    assert int(pid) <= 3  # its own PID namespace
    assert outside, "the sandboxed process was not seen on the host"
    if os.geteuid() == 0:
        assert all(u >= 1_500_000_000 for u in outside)  # never root outside
    else:
        assert all(u == os.getuid() for u in outside)
