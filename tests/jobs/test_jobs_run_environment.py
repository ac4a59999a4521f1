"""What a run's job records besides its training metrics: its environment (git commit and dirty diff,
package versions, host, command line; jobs.run_environment) and its resource use over time
(``resources/...`` metrics; jobs.resource_metrics). A real tiny run through the executor in this
process, a real git repository, a real busy child process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import psutil
import pytest

from db import states
from db.errors import NotFoundError
from jobs import run_environment
from jobs.executor import execute_run
from jobs.resource_metrics import ResourceSampler, tree_sample, visible_gpus
from jobs.run_environment import git_state
from tests.jobs.helpers import ROOT, tiny_config


def test_a_run_records_its_environment_and_its_resource_use(jobs_env, store, experiment_id):
    settings = jobs_env.model_copy(update={"resource_interval_s": 0.05})
    run = store.create_run(experiment_id, tiny_config(max_steps=3), "cpu")
    assert store.run_environment(run.id) is None
    assert execute_run(run.id, settings=settings, store=store, worker="w1") == states.SUCCEEDED

    from cooplab import api

    env = api.environment(run.id)
    assert env == store.run_environment(run.id)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert env["git"]["commit"] == head and isinstance(env["git"]["dirty"], bool)
    assert {"cooplab", "torch", "transformers"} <= set(env["packages"])
    assert env["host"] == socket.gethostname() and env["worker"] == "w1" and env["device"] == "cpu"
    assert env["python"]["version"] == sys.version.split()[0] and env["command"]

    keys = store.metric_keys(run.id)
    assert {"resources/cpu_percent", "resources/rss_mib"} <= set(keys)
    assert not any(k.startswith("resources/gpu") for k in keys)  # a CPU run has no GPU values
    series = store.series(run.id, "resources/rss_mib")
    assert series.ys and min(series.ys) > 50  # the job process holds torch and two models
    assert set(series.xs) <= {1, 2, 3} and max(series.xs) == 3  # none before the first step; the last at the end


def test_the_environment_is_replaced_when_a_job_starts_again_and_goes_with_its_run(store, experiment_id):
    run = store.create_run(experiment_id, tiny_config(), "cpu")
    store.record_run_environment(run.id, {"host": "a"})
    store.record_run_environment(run.id, {"host": "b"})
    assert store.run_environment(run.id) == {"host": "b"}
    store.delete_run(run.id, force=True)
    assert store.run_environment(run.id) is None
    with pytest.raises(NotFoundError):
        store.record_run_environment(run.id, {"host": "c"})


def test_git_state_names_the_commit_and_caps_the_dirty_diff(tmp_path, monkeypatch):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@example.org")
    git("config", "user.name", "t")
    (tmp_path / "a.txt").write_text("one\n")
    git("add", "a.txt")
    git("commit", "-q", "-m", "first")
    clean = git_state(tmp_path)
    assert len(clean["commit"]) == 40 and clean["dirty"] is False and clean["diff"] == ""

    (tmp_path / "a.txt").write_text("one\n" + "two\n" * 100)
    (tmp_path / "new.txt").write_text("x")
    monkeypatch.setattr(run_environment, "MAX_DIFF_CHARS", 120)
    dirty = git_state(tmp_path)
    assert dirty["dirty"] is True and dirty["untracked"] == ["new.txt"] and dirty["commit"] == clean["commit"]
    assert len(dirty["diff"]) == 120 and dirty["diff_truncated"] and dirty["diff_chars"] > 400
    assert dirty["diff"].startswith("diff --git a/a.txt b/a.txt")

    elsewhere = tmp_path / "plain"
    elsewhere.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert "is not a git checkout" in git_state(elsewhere)["error"]


def test_the_sampler_counts_the_children_of_the_job(tmp_path):
    """A busy child shows in the tree's CPU (100 = one core); samples go to ``write``, the last on stop."""
    busy = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 20\nwhile time.time() < end: pass"])
    samples: list[dict[str, float]] = []
    sampler = ResourceSampler(samples.append, interval_s=0.4)
    try:
        sampler.start()
        time.sleep(1.0)
    finally:
        sampler.stop()
        busy.kill()
        busy.wait()
    assert len(samples) >= 2 and set(samples[-1]) == {"resources/cpu_percent", "resources/rss_mib"}
    # the child spins (this process sleeps): even on a machine loaded 15 deep on 2 cores it gets over 10%
    assert max(s["resources/cpu_percent"] for s in samples) > 5
    assert tree_sample([psutil.Process(os.getpid())])["resources/rss_mib"] > 10


def test_visible_gpus_follow_cuda_visible_devices():
    assert visible_gpus(None, 2) == [0, 1]
    assert visible_gpus("1", 2) == [1]
    assert visible_gpus("0,7,1", 2) == [0]  # CUDA stops at the first invalid index
    assert visible_gpus("GPU-abc", 1) == ["GPU-abc"] and visible_gpus("", 4) == []


def test_a_sampler_with_interval_zero_records_nothing():
    samples: list[dict[str, float]] = []
    sampler = ResourceSampler(samples.append, interval_s=0, pid=os.getpid())
    sampler.start()
    sampler.stop()
    assert samples == []
