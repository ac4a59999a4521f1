"""A job the kernel's OOM killer ended is reported as "out of memory": its memory cgroup's ``oom_kill``
counter, recorded in its job file at the start, has risen when the dead job is settled (:mod:`jobs.oom`).
Parsing on hand-made file contents; then a real job process in a memory-limited cgroup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from db import states
from jobs import jobfile, oom
from jobs.liveness import settle_local_dead_jobs
from tests.jobs.helpers import ROOT

V2_EVENTS = "low 0\nhigh 0\nmax 12\noom 3\noom_kill {n}\noom_group_kill 0\n"
V1_OOM_CONTROL = "oom_kill_disable 0\nunder_oom 0\noom_kill {n}\n"


def test_the_memory_cgroup_is_read_from_proc_pid_cgroup() -> None:
    v1 = "9:name=systemd:/\n4:memory:/process_api/8092\n3:cpuset:/\n0::/\n"
    assert oom.memory_cgroup(v1) == (1, "/process_api/8092")
    assert oom.memory_cgroup("5:cpu,memory:/a\n") == (1, "/a")
    assert oom.memory_cgroup("0::/user.slice/user-0.slice/session-3.scope\n") == (
        2, "/user.slice/user-0.slice/session-3.scope")
    assert oom.memory_cgroup("3:cpuset:/\n1:name=systemd:/\n") is None
    assert oom.memory_cgroup("") is None


def test_the_oom_kill_counter_is_read_from_v1_and_v2_files() -> None:
    assert oom.oom_kill_count(V2_EVENTS.format(n=4)) == 4
    assert oom.oom_kill_count(V1_OOM_CONTROL.format(n=0)) == 0
    assert oom.oom_kill_count("oom_kill_disable 0\nunder_oom 0\n") is None  # a kernel before 4.13
    root = Path("/cg")
    assert oom.counter_candidates(1, "/a/b", root) == [Path("/cg/memory/a/b/memory.oom_control")]
    assert oom.counter_candidates(2, "/", root) == [Path("/cg/memory.events"), Path("/cg/unified/memory.events")]


def test_the_reason_says_out_of_memory_only_when_the_counter_rose() -> None:
    assert oom.oom_reason("/jobs", "/sys/fs/cgroup/jobs/memory.events", 2, 2) is None
    assert oom.oom_reason("/jobs", "/sys/fs/cgroup/jobs/memory.events", 2, None) is None
    assert oom.oom_reason("/jobs", "/sys/fs/cgroup/jobs/memory.events", 2, 3) == (
        "out of memory (the kernel's OOM killer ended the job; cgroup /jobs memory.events oom_kill 3, "
        "2 when the job started)")


def test_a_job_file_records_its_cgroup_s_counter(tmp_path: Path) -> None:
    """What the job records at its start is this process's counter, as :func:`jobs.oom.read_counter` reads it."""
    job = jobfile.JobFile.acquire(tmp_path, 5)
    try:
        state = jobfile.probe(tmp_path, 5)
        now = oom.read_counter()
        assert (state.oom_cgroup, state.oom_file, state.oom_kills) == (
            (now.cgroup, now.file, now.kills) if now else (None, None, None))
        assert state.oom_cause() is None
    finally:
        job.release(remove=True)


def test_read_counter_finds_the_file_of_this_process_s_cgroup(tmp_path: Path) -> None:
    version, path = oom.memory_cgroup(Path("/proc/self/cgroup").read_text()) or (2, "/")
    for file in oom.counter_candidates(version, path, tmp_path):
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text((V1_OOM_CONTROL if version == 1 else V2_EVENTS).format(n=7))
    found = oom.read_counter(root=tmp_path)
    assert found is not None and (found.cgroup, found.kills) == (path, 7)


def test_a_dead_job_whose_cgroup_counted_an_oom_kill_is_lost_out_of_memory(jobs_env, store, experiment_id,
                                                                            tmp_path) -> None:
    """Before: "its job process (pid …) is gone: it died without ending the run (killed, out of memory, or
    its worker was killed)", whatever the kernel recorded."""
    oomed, killed = (store.create_run(experiment_id, {}, "cpu").id for _ in range(2))
    events = {}
    for run_id in (oomed, killed):
        store.transition(run_id, states.STARTING)
        store.transition(run_id, states.RUNNING)
        events[run_id] = tmp_path / f"cgroup-{run_id}" / "memory.events"
        events[run_id].parent.mkdir()
        events[run_id].write_text(V2_EVENTS.format(n=1))
        record = {"run_id": run_id, "host": os.uname().nodename, "pid": 4242,
                  "oom": {"cgroup": f"/jobs/{run_id}", "file": str(events[run_id]), "kills": 1}}
        jobfile.job_file_path(jobs_env.data_dir, run_id).parent.mkdir(parents=True, exist_ok=True)
        jobfile.job_file_path(jobs_env.data_dir, run_id).write_text(json.dumps(record).ljust(jobfile.JOB_FILE_BYTES))
    events[oomed].write_text(V2_EVENTS.format(n=2))  # the kernel killed in that cgroup since the job started
    assert sorted(settle_local_dead_jobs(store, jobs_env)) == sorted([oomed, killed])
    lost = store.get_run(oomed)
    assert lost.status == states.LOST
    assert lost.error == (f"out of memory (the kernel's OOM killer ended the job; cgroup /jobs/{oomed} "
                          "memory.events oom_kill 2, 1 when the job started)")
    assert store.get_run(killed).error.startswith("its job process (pid 4242 on ")


# --------------------------------------------------------------------------- a real OOM kill

LIMIT_BYTES = 128 * 1024 * 1024


def _limited_cgroup(name: str) -> Path:
    """A new child of this process's memory cgroup limited to :data:`LIMIT_BYTES` (no swap); skips when
    this machine does not let us make one."""
    found = oom.memory_cgroup(Path("/proc/self/cgroup").read_text())
    if found is None:
        pytest.skip("no cgroup memory controller: /proc/self/cgroup lists neither a v1 memory hierarchy nor v2")
    version, path = found
    parent = (oom.CGROUP_ROOT / "memory" if version == 1 else oom.CGROUP_ROOT) / path.strip("/")
    if version == 2 and "memory" not in (parent / "cgroup.subtree_control").read_text(errors="replace").split():
        pytest.skip(f"no cgroup memory controller for child cgroups of {parent} (cgroup.subtree_control)")
    child = parent / name
    try:
        child.mkdir()
        if version == 1:
            (child / "memory.limit_in_bytes").write_text(str(LIMIT_BYTES))
            if (child / "memory.memsw.limit_in_bytes").exists():
                (child / "memory.memsw.limit_in_bytes").write_text(str(LIMIT_BYTES))
        else:
            (child / "memory.max").write_text(str(LIMIT_BYTES))
            if (child / "memory.swap.max").exists():
                (child / "memory.swap.max").write_text("0")
    except OSError as exc:
        if child.is_dir():
            child.rmdir()
        pytest.skip(f"no writable cgroup memory controller at {parent}: {exc}")
    return child


JOB = """
import sys
from pathlib import Path
from jobs import jobfile
Path(sys.argv[1], "cgroup.procs").write_text(str(__import__("os").getpid()))
job = jobfile.JobFile.acquire(Path(sys.argv[2]), int(sys.argv[3]))
print("started", flush=True)
hog = b"x" * (1 << 30)  # far over the cgroup's limit
print("survived", len(hog), flush=True)
"""


def test_a_job_over_its_cgroup_s_memory_limit_is_lost_out_of_memory(jobs_env, store, experiment_id) -> None:
    run_id = store.create_run(experiment_id, {}, "cpu").id
    store.transition(run_id, states.STARTING)
    store.transition(run_id, states.RUNNING)
    cgroup = _limited_cgroup(f"cooplab-oom-test-{os.getpid()}")
    try:
        done = subprocess.run([sys.executable, "-c", JOB, str(cgroup), str(jobs_env.data_dir), str(run_id)],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert "started" in done.stdout and "survived" not in done.stdout, (done.stdout, done.stderr)
        assert done.returncode == -9, done.stderr
        assert settle_local_dead_jobs(store, jobs_env) == [run_id]  # while its cgroup (and counter) exists
    finally:
        cgroup.rmdir()
    run = store.get_run(run_id)
    assert run.status == states.LOST
    assert run.error.startswith("out of memory (the kernel's OOM killer ended the job; cgroup "), run.error
    assert f"/{cgroup.name} " in run.error, run.error
