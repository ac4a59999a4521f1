"""A run config names folders the worker writes (``policy_checkpoint_dir``, ``preference_replay_dir``):
each must stay inside the run's folder or the data directory once symlinks are resolved. Pre-flight
refuses an escape before the run is stored, and the worker refuses it again before writing (a config
stored before, or checked on another machine), leaving nothing outside."""

from __future__ import annotations

from pathlib import Path

import pytest

from db import states
from engine.schema.run_config import ConfigError
from jobs.executor import execute_run
from jobs.preflight import check_run_config
from jobs.settings import Settings


def iterative(**trainer: object) -> dict:
    """madpo_iter on two tiny agents: one iteration of one epoch, a few tokens (its first step writes
    the files)."""
    return {
        "name": "paths",
        "agents": [{"name": "first"}, {"name": "second"}],
        "task": {"name": "quickstart", "params": {"num_items": 4, "eval_items": 0}},
        "trainer": {"algorithm": "madpo_iter", "num_iterations": 1, "preference_num_candidates": 2,
                    "preference_pairs_per_sample": 1, "max_new_tokens": 4, "eval_interval": 0,
                    "num_train_epochs": 1, "comparator_policy": "history", **trainer},
    }


def written(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def refused(config: dict, settings: Settings) -> str:
    with pytest.raises(ConfigError) as caught:
        check_run_config(config, settings=settings)
    return str(caught.value)


def test_preflight_refuses_an_absolute_folder_outside_the_data_directory(jobs_env: Settings, tmp_path: Path):
    outside = tmp_path / "outside" / "policies"  # /tmp/...: next to the data directory, not in it
    message = refused(iterative(policy_checkpoint_dir=str(outside)), jobs_env)
    assert message.startswith("trainer.policy_checkpoint_dir:")
    assert str(outside) in message and str(jobs_env.data_dir) in message
    assert "relative" in message  # the fix: a folder under the run folder


def test_preflight_refuses_a_relative_folder_that_climbs_out(jobs_env: Settings):
    message = refused(iterative(preference_replay_dir="../../../../tmp/cooplab-escape"), jobs_env)
    assert message.startswith("trainer.preference_replay_dir:") and "outside" in message
    message = refused(iterative(preference_replay_dir="../../../outside-rel/replay"), jobs_env)
    assert message.startswith("trainer.preference_replay_dir:")


def test_preflight_refuses_a_symlink_in_the_data_directory_that_points_out(jobs_env: Settings, tmp_path: Path):
    target = tmp_path / "outside-link"
    target.mkdir()
    (jobs_env.data_dir / "shared").symlink_to(target)
    message = refused(iterative(policy_checkpoint_dir=str(jobs_env.data_dir / "shared" / "policies")), jobs_env)
    assert message.startswith("trainer.policy_checkpoint_dir:") and str(target) in message
    message = refused(iterative(preference_replay_dir="../../shared/replay"), jobs_env)  # from runs/run-N
    assert message.startswith("trainer.preference_replay_dir:")


def test_preflight_accepts_a_relative_folder_and_one_inside_the_data_directory(jobs_env: Settings):
    check_run_config(iterative(policy_checkpoint_dir="policies", preference_replay_dir="pairs/replay"),
                     settings=jobs_env)
    check_run_config(iterative(policy_checkpoint_dir=str(jobs_env.data_dir / "policies" / "team-a")),
                     settings=jobs_env)


def test_the_worker_refuses_escapes_of_a_stored_config_and_writes_nothing_outside(jobs_env, store, experiment_id,
                                                                                 tmp_path: Path):
    outside = tmp_path / "outside"
    link_target = tmp_path / "outside-link"
    link_target.mkdir()
    (jobs_env.data_dir / "shared").symlink_to(link_target)
    configs = [iterative(policy_checkpoint_dir=str(outside / "policies"),
                         preference_replay_dir="../../../outside/replay"),
               iterative(policy_checkpoint_dir=str(jobs_env.data_dir / "shared" / "policies"))]
    for config in configs:  # stored as they are: pre-flight never saw them (another machine, an older version)
        run = store.create_run(experiment_id, config, "cpu")
        assert execute_run(run.id, settings=jobs_env, store=store) == states.FAILED
        error = store.get_run(run.id).error
        assert "policy_checkpoint_dir" in error and "outside" in error, error
    assert written(outside) == [] and written(link_target) == []


def test_a_same_named_folder_outside_the_run_folder_is_not_replaced(jobs_env, store, experiment_id):
    shared = jobs_env.data_dir / "shared-policies"
    (shared / "iteration_001").mkdir(parents=True)
    (shared / "iteration_001" / "keep.txt").write_text("an earlier run's snapshot")
    run = store.create_run(experiment_id, iterative(policy_checkpoint_dir=str(shared)), "cpu")
    assert execute_run(run.id, settings=jobs_env, store=store) == states.FAILED
    error = store.get_run(run.id).error
    assert "iteration_001" in error and "exists" in error, error
    assert written(shared) == ["iteration_001", "iteration_001/keep.txt"]
    assert (shared / "iteration_001" / "keep.txt").read_text() == "an earlier run's snapshot"


def test_folders_inside_the_run_folder_and_the_data_directory_are_written(jobs_env, store, experiment_id):
    shared = jobs_env.data_dir / "shared" / "pairs"
    run = store.create_run(experiment_id, iterative(policy_checkpoint_dir="policies",
                                                    preference_replay_dir=str(shared)), "cpu")
    assert execute_run(run.id, settings=jobs_env, store=store) == states.SUCCEEDED, store.get_run(run.id).error
    folder = Path(store.get_run(run.id).output_dir)
    assert (folder / "policies" / "iteration_001" / "meta.json").is_file()
    assert written(shared) == ["iteration_001.jsonl"]
