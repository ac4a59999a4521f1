"""How a launch's watch (:mod:`jobs.torchrun`) tells a frozen rank from a slow or finished one, on the files
the ranks write: their step boundaries and their pulse; and which rank torchrun's report blames."""

from __future__ import annotations

import os
import time
from pathlib import Path

from jobs.torchrun import _Watch, behind, read_progress, write_progress


def test_the_ranks_behind_the_furthest_one_are_named():
    assert behind({0: 3, 1: 3}, 2) == []
    assert behind({0: 3, 1: 2}, 2) == [1]
    assert behind({0: 1}, 3) == [1, 2]  # a rank that wrote nothing reached no boundary
    assert behind({}, 2) == []


def test_progress_round_trips(tmp_path):
    write_progress(tmp_path / "p", 0, 4)
    write_progress(tmp_path / "p", 1, 3)
    (tmp_path / "p" / "rank2").write_text("half-written")
    assert read_progress(tmp_path / "p") == {0: 4, 1: 3}


def _watch(folder, nproc, after_s=0.6):
    killed = []
    return _Watch(folder, nproc, after_s, lambda: killed.append(True), interval_s=0.05), killed


def _pulse(folder, rank, pid):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"pulse{rank}").write_text(str(pid))


def test_a_rank_behind_for_the_timeout_is_named_and_the_launch_killed(tmp_path):
    folder = tmp_path / "p"
    write_progress(folder, 0, 2)
    write_progress(folder, 1, 1)
    watch, killed = _watch(folder, 2)
    deadline = time.monotonic() + 10
    while not killed and time.monotonic() < deadline:
        time.sleep(0.05)
    watch.close()
    assert killed and watch.frozen == [1] and watch.silent == []


def test_a_rank_that_catches_up_is_not_named(tmp_path):
    folder = tmp_path / "p"
    write_progress(folder, 0, 2)
    write_progress(folder, 1, 1)
    watch, killed = _watch(folder, 2, after_s=1.0)
    time.sleep(0.3)
    write_progress(folder, 1, 2)
    time.sleep(1.2)
    watch.close()
    assert not killed and watch.frozen == []


def test_a_live_rank_whose_pulse_stopped_is_named_but_not_one_that_ended(tmp_path):
    folder = tmp_path / "p"
    no_such_pid = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # above every pid: no process has it
    _pulse(folder, 0, os.getpid())  # alive (this process), pulse stale: frozen
    _pulse(folder, 1, no_such_pid)  # its process ended: not frozen
    watch, killed = _watch(folder, 2)
    deadline = time.monotonic() + 10
    while not killed and time.monotonic() < deadline:
        time.sleep(0.05)
    watch.close()
    assert killed and watch.frozen == [0] and watch.silent == [0]


KILLED_REPORT = """\
Failures:
[1]:
  time      : 2026-12-07_02:04:51
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 5210)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 5210
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-07_02:04:50
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 5206)
  error_file: /tmp/torchelastic_x/error.json
  traceback : Traceback (most recent call last):
    File "/work/main/engine/distributed/sink.py", line 48, in should_stop
      dist.broadcast_object_list(answer, src=0)
  RuntimeError: [gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:2991: Connection reset by peer.

============================================================"""


def test_a_rank_killed_is_the_cause_though_its_peer_reported_first():
    """torchrun's report as a worker's job saw it (tests/jobs/test_jobs_fsdp.py): rank 1 was killed, rank 0's
    broadcast broke on the closed socket and its error was recorded first, as the root cause."""
    from jobs.torchrun import failure_of

    rank, cause = failure_of(KILLED_REPORT.splitlines())
    assert rank == 1
    assert cause == "exit code -9 (Signal 9 (SIGKILL) received by PID 5210); then rank 0 exit code -15"


def test_the_ranks_split_the_launchers_threads():
    from jobs.torchrun import rank_threads

    assert rank_threads(2, {"OMP_NUM_THREADS": "8"}) == "4"
    assert rank_threads(3, {"OMP_NUM_THREADS": "2"}) == "1"  # at least one each
    assert rank_threads(2, {}) is None and rank_threads(2, {"OMP_NUM_THREADS": "many"}) is None


def test_a_rank_whose_torchrun_is_already_gone_exits_before_anything_else(tmp_path):
    """A rank checks that its parent is still the torchrun that started it (COOPLAB_TORCHRUN_AGENT): one
    whose torchrun died before it asked to die with it exits at once, without reading its environment."""
    import subprocess
    import sys

    from jobs.torchrun import AGENT_ENV

    def rank(agent: int) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
        return subprocess.run([sys.executable, "-m", "cooplab.fsdp_rank", "run.yaml", str(tmp_path)],
                              env={**env, AGENT_ENV: str(agent)}, capture_output=True, text=True, timeout=60)

    orphan = rank(agent=2 ** 22 + 1)  # no process is this rank's parent under that pid
    assert orphan.returncode == 1 and orphan.stderr == ""
    adopted = rank(agent=os.getpid())  # its parent is the named one: it goes on, to the missing RANK
    assert adopted.returncode == 1 and "KeyError: 'RANK'" in adopted.stderr
