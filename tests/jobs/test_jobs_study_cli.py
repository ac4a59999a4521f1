"""``cooplab study``, run in-process against a real SQLite file and the filesystem broker (no worker:
children are queued, inspected, stopped and resumed; results come from metrics the test stores)."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from cooplab.cli import app
from db import states
from db.study_store import StudyStore
from tests.jobs.helpers import tiny_config

runner = CliRunner()
LR = "trainer.agent_learning_rate"


def _write(tmp_path, **extra):
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(tiny_config(max_steps=4)))
    study = {"name": "cli-study", "base": "base.yaml", "space": {LR: [0.001, 0.01]}, "seeds": 2,
             "max_concurrent": 2, **extra}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


def test_create_watch_stop_resume_and_export_a_study(jobs_env, store, tmp_path):
    created = runner.invoke(app, ["study", str(_write(tmp_path))])
    assert created.exit_code == 0, created.output
    studies = StudyStore(store)
    (study,) = studies.list_studies()
    assert f"study {study.id} 'cli-study' created" in created.output
    assert "4 children, at most 2 at once on cpu" in created.output
    assert created.output.count(" queued ") == 2 and created.output.count(" pending ") == 2
    first = next(t for t in studies.trials(study.id) if t.status == states.QUEUED)
    for state in (states.STARTING, states.RUNNING):
        store.transition(first.run_id, state)
    store.log_step(first.run_id, 1, 1, {"train/reward_mean": 0.25})
    store.transition(first.run_id, states.SUCCEEDED)

    csv_path = tmp_path / "results.csv"
    status = runner.invoke(app, ["study", "status", "cli-study", "--csv", str(csv_path)])
    assert status.exit_code == 0, status.output
    assert f"point 0 ({LR}=0.001): final 0.25 ± 0, best 0.25 ± 0, n=1" in status.output
    assert status.output.count(" queued ") == 2  # the finished child's slot went to a waiting one
    assert csv_path.read_text().splitlines()[1].startswith("0,0.001,\"1 queued, 1 succeeded\",0.25")

    stopped = runner.invoke(app, ["study", "stop", str(study.id)])
    assert stopped.exit_code == 0, stopped.output
    assert "study 'cli-study' stopped: 2 runs asked to stop" in stopped.output and "cli-study': stopped" in stopped.output
    resumed = runner.invoke(app, ["study", "resume", "cli-study"])
    assert resumed.exit_code == 0, resumed.output
    assert "study 'cli-study' resumed: 2 children queued again" in resumed.output
    assert sorted(t.status for t in studies.trials(study.id)) == ["pending", "queued", "queued", "succeeded"]
    listed = runner.invoke(app, ["study", "list"])
    assert "cli-study" in listed.output and "active" in listed.output


def test_bad_studies_are_refused_naming_the_field(jobs_env, store, tmp_path):
    bad = runner.invoke(app, ["study", str(_write(tmp_path, space={LR: [0.001, 0]}))])
    assert bad.exit_code == 2
    assert f"point 1 ({LR}=0) gives an invalid run config" in bad.output
    assert f"{LR}: Input should be greater than 0" in bad.output
    assert StudyStore(store).list_studies() == []
    missing = runner.invoke(app, ["study", "status", "nope"])
    assert missing.exit_code == 2 and "no study named or numbered 'nope'" in missing.output
    bare = runner.invoke(app, ["study", "stop"])
    assert bare.exit_code == 2 and "needs the study's name or id" in bare.output
