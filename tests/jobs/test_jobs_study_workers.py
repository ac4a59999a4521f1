"""A study on two real workers through the real Redis broker: a grid of two learning rates x 2 seeds of
the quick start (two tiny steps each) under a cap of two at once, with one child forced to fail, ends 3
succeeded + 1 failed, with its results computed from the stored metrics. (Grids of several axes, the cap
and its top-ups, failed children and the spreads are tested without workers in test_jobs_studies.py and
test_jobs_study_space.py; a 2 x 2 grid here cost four more tiny runs.) Then one worker with two slots runs
two children of another study side by side (packing), and stop-all stops both the queued and the
running children.

Needs ``COOPLAB_TEST_REDIS_URL`` (``make test`` sets it).
"""

from __future__ import annotations

import time

import pytest

from db import states
from db.study_records import FINISHED, STOPPED
from db.study_store import StudyStore
from jobs.settings import Settings
from jobs.studies import create_study, stop_study
from jobs.study_results import point_results
from jobs.study_rules import spread
from tests.jobs.helpers import tiny_config, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LR = "trainer.agent_learning_rate"
REWARD = "train/reward_mean"


def test_a_grid_study_on_two_workers_then_stop_all(redis_env, store, start_worker, tmp_path, allow_plugin_tasks):
    settings = Settings()  # with the plugin task module allowed
    workers = [start_worker(), start_worker()]
    fail_file = tmp_path / "fail-once"
    fail_file.touch()
    base = tiny_config(max_steps=2, checkpoint_interval=0, transcripts_per_step=0)
    base["task"] = {"name": f"{allow_plugin_tasks}:fail_once_quickstart", "params": {"fail_file": str(fail_file)}}
    t0 = time.monotonic()
    study = create_study({"name": "grid", "base": base, "seeds": 2, "max_concurrent": 2,
                          "space": {LR: [0.001, 0.01]}}, settings=settings)
    studies = StudyStore(store)
    peak = 0

    def finished() -> bool:
        nonlocal peak
        trials = studies.trials(study.id)
        peak = max(peak, sum(t.status in states.ACTIVE_STATUSES for t in trials))
        return studies.get_study(study.id).status == FINISHED

    wait_for(finished, 150, "the study to finish", interval=0.2)
    wall = time.monotonic() - t0
    trials = studies.trials(study.id)
    statuses = [t.status for t in trials]
    assert (statuses.count(states.SUCCEEDED), statuses.count(states.FAILED)) == (3, 1), statuses
    failed = next(t for t in trials if t.status == states.FAILED)
    assert "forced failure of this study child" in failed.error
    assert peak <= 2  # never more than the cap in flight
    assert {store.get_run(t.run_id).worker for t in trials} and len({store.get_run(t.run_id).worker
                                                                     for t in trials}) == 2  # both workers ran children
    results = point_results(studies, study.id, keys=[REWARD])
    for result in results:  # the aggregates agree with the runs' own last logged values
        ran = [t for t in trials if t.point == result.point and t.status == states.SUCCEEDED]
        finals = [store.latest_metrics(t.run_id, [REWARD])[REWARD].value for t in ran]
        assert result.final[REWARD].n == len(ran) and result.final[REWARD].mean == pytest.approx(spread(finals).mean)
        assert store.get_run(ran[0].run_id).config["trainer"]["agent_learning_rate"] == result.params[LR]
    assert sorted(r.final[REWARD].n for r in results) == [1, 2]
    print(f"\nstudy of 4 children on 2 workers: {wall:.1f} s")

    # packing: one worker allowed two jobs at once on its device runs two children side by side
    for worker in workers:
        worker.kill()
    packed = start_worker("cpu", "--slots", "2")
    slow = tiny_config(max_steps=200, checkpoint_interval=0, transcripts_per_step=0)
    slow["task"] = {"name": f"{allow_plugin_tasks}:slow_quickstart", "params": {"sleep_s": 0.3}}
    stopper = create_study({"name": "stopper", "base": slow, "seeds": 3, "max_concurrent": 3,
                            "space": {LR: [0.001]}}, settings=settings)
    wait_for(lambda: sum(t.status == states.RUNNING and t.step >= 1 for t in studies.trials(stopper.id)) == 2, 120,
             "two children running side by side on the packed worker", interval=0.2)
    running = [t for t in studies.trials(stopper.id) if t.status == states.RUNNING]
    assert {store.get_run(t.run_id).worker for t in running} == {store.get_run(running[0].run_id).worker}
    assert len(packed.job_pids()) == 2  # two job processes of one worker
    assert [t.status for t in studies.trials(stopper.id)].count(states.QUEUED) == 1
    assert stop_study(stopper.id, settings=settings) == 3
    wait_for(lambda: all(t.status not in states.ACTIVE_STATUSES for t in studies.trials(stopper.id)), 60,
             "every child of the stopped study to end", interval=0.2)
    final = sorted(t.status for t in studies.trials(stopper.id))
    assert final == [states.CANCELLED, states.STOPPED, states.STOPPED]
    assert studies.get_study(stopper.id).status == STOPPED
    assert all(t.step < 200 for t in studies.trials(stopper.id))
