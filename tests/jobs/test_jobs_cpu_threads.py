"""Torch threads per job and per agent (jobs.cpu_threads.thread_plan, engine.trainer.threads.agent_thread_share):
hand-computed cases, pure."""

from __future__ import annotations

import pytest

from engine.trainer.threads import agent_thread_share
from jobs.cpu_threads import cgroup_cpu_limit, parse_thread_count, thread_plan


@pytest.mark.parametrize(("cores", "slots", "threads"), [(2, 1, 2), (2, 2, 1), (16, 3, 5), (8, 2, 4), (1, 1, 1)])
def test_a_job_gets_its_share_of_the_cores_and_waiting_threads_sleep(cores, slots, threads):
    plan = thread_plan(cores=cores, slots=slots, environ={})
    assert plan.threads == threads
    assert plan.source == f"{cores} core(s) / {slots} slot(s)"
    assert plan.env == {"OMP_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "PASSIVE"}
    assert plan.wait_policy == "PASSIVE"
    assert not plan.oversubscribed


def test_more_slots_than_cores_still_give_each_job_one_thread_and_say_so():
    plan = thread_plan(cores=2, slots=4, environ={})
    assert (plan.threads, plan.oversubscribed) == (1, True)


def test_the_operators_variables_are_kept_and_the_setting_wins():
    plan = thread_plan(cores=2, slots=1, environ={"OMP_NUM_THREADS": "3", "OMP_WAIT_POLICY": "active"})
    assert (plan.threads, plan.source, plan.wait_policy, plan.env) == (3, "OMP_NUM_THREADS", "active", {})
    assert plan.oversubscribed  # 3 threads on 2 cores: the operator's choice, warned about
    assert thread_plan(cores=8, slots=2, environ={"OMP_NUM_THREADS": "4,2"}).threads == 4  # nested: the outer level
    plan = thread_plan(cores=8, slots=2, job_threads=2, environ={"OMP_NUM_THREADS": "8"})
    assert (plan.threads, plan.source, plan.env) == (2, "COOPLAB_JOB_THREADS",
                                                     {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"})
    assert thread_plan(cores=4, slots=1, environ={"OMP_NUM_THREADS": " "}).threads == 4  # empty: unset


@pytest.mark.parametrize("value", ["0", "two", "-1", "2.5"])
def test_an_omp_num_threads_that_is_no_count_is_refused_naming_the_variable_and_the_fix(value):
    with pytest.raises(ValueError, match=r"OMP_NUM_THREADS=.* is not a whole number of threads.*unset it"):
        thread_plan(cores=2, environ={"OMP_NUM_THREADS": value})
    assert parse_thread_count("12") == 12 and parse_thread_count("") is None


@pytest.mark.parametrize(("threads", "agents", "share"), [(2, 1, 2), (2, 2, 1), (8, 3, 2), (5, 2, 2), (1, 2, 1)])
def test_agents_computing_at_once_split_the_jobs_threads(threads, agents, share):
    assert agent_thread_share(threads, agents) == share


def test_the_threads_of_all_slots_and_agents_add_up_to_the_cores():
    # 8 cores, 2 slots, 2 agents in threads per job: 4 threads a job, 2 an agent, 2 x 2 x 2 = 8
    job = thread_plan(cores=8, slots=2, environ={}).threads
    assert (job, agent_thread_share(job, 2), 2 * 2 * agent_thread_share(job, 2)) == (4, 2, 8)


def test_a_cgroup_cpu_quota_is_read_in_cores(tmp_path):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cgroup_cpu_limit(tmp_path) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_limit(tmp_path) is None
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpu_limit(tmp_path) is None
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("200000\n")
    assert cgroup_cpu_limit(tmp_path) == 2.0
    assert cgroup_cpu_limit(tmp_path / "none") is None
