"""Folders a run config names for writing stay in the run's folder or the data directory, symlinks
resolved (:mod:`engine.permissions.write_paths`), and the iteration files check their target again right before
each write (:class:`engine.preference.iteration_files.IterationFiles`)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from engine.permissions.write_paths import WriteArea, WritePathError, check_write_paths, write_path_problems
from engine.preference.iteration_files import IterationFiles


@pytest.fixture
def area(tmp_path: Path) -> WriteArea:
    data = tmp_path / "data"
    (data / "runs" / "run-1").mkdir(parents=True)
    return WriteArea.of(data / "runs" / "run-1", [data])


def test_relative_folders_go_under_the_base_and_absolute_ones_may_be_in_the_data_directory(area, tmp_path):
    run = area.run_dir
    assert area.resolve("f", "policies") == run.resolve() / "policies"
    assert area.resolve("f", "a/../b", base=run / "trainers" / "t") == run.resolve() / "trainers" / "t" / "b"
    assert area.resolve("f", "../run-2/x") == (tmp_path / "data" / "runs" / "run-2" / "x").resolve()
    assert area.resolve("f", str(tmp_path / "data" / "shared")) == (tmp_path / "data" / "shared").resolve()


@pytest.mark.parametrize("value", ["/tmp/cooplab-escape", "../../../../tmp/cooplab-escape", "../../../outside",
                                   "/", "~/x"])
def test_escapes_are_refused_naming_the_field_the_path_and_the_fix(area, value):
    with pytest.raises(WritePathError) as caught:
        area.resolve("trainer.policy_checkpoint_dir", value)
    message = str(caught.value)
    assert message.startswith(f"trainer.policy_checkpoint_dir: {value!r}") and "outside the run folder" in message
    assert "relative folder" in message


def test_a_symlink_that_points_out_is_refused(area, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "data" / "link").symlink_to(outside)
    with pytest.raises(WritePathError, match=f"resolves to {outside}"):
        area.resolve("f", str(tmp_path / "data" / "link" / "x"))
    (area.run_dir / "inner").symlink_to(outside)
    with pytest.raises(WritePathError):
        area.resolve("f", "inner/x")


def test_write_path_problems_list_each_refused_setting(area):
    trainer = SimpleNamespace(policy_checkpoint_dir="/etc/x", preference_replay_dir="ok")
    problems = write_path_problems(trainer, area)
    assert [field for field, _ in problems] == ["trainer.policy_checkpoint_dir"]
    with pytest.raises(WritePathError, match="^trainer.policy_checkpoint_dir: '/etc/x'"):
        check_write_paths([("trainer", trainer, None)], area)


def _files(area: WriteArea, **folders: str) -> IterationFiles:
    config = SimpleNamespace(**{"log_reward_distribution": False, "policy_checkpoint_dir": None,
                                "preference_replay_dir": None, **folders})
    return IterationFiles.for_config(config, area.run_dir, area)


def test_a_symlink_planted_after_the_check_is_refused_before_the_write(area, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    files = _files(area, preference_replay_dir="pairs", policy_checkpoint_dir="policies")
    (area.run_dir / "pairs").symlink_to(outside)  # appears after the folders were checked
    with pytest.raises(WritePathError, match="preference_replay_dir"):
        files.write_pairs(0, [])
    (area.run_dir / "policies").symlink_to(outside)
    with pytest.raises(WritePathError, match="policy_checkpoint_dir"):
        files.write_policy(0, [{"w": torch.zeros(2)}], [0])
    assert list(outside.iterdir()) == []


def test_outside_the_run_folder_nothing_is_replaced_inside_it_an_older_file_is(area, tmp_path):
    shared = tmp_path / "data" / "shared"
    (shared / "iteration_001").mkdir(parents=True)
    files = _files(area, policy_checkpoint_dir=str(shared), preference_replay_dir=str(shared))
    with pytest.raises(WritePathError, match="iteration_001 already exists"):
        files.write_policy(0, [{"w": torch.zeros(2)}], [0])
    (shared / "iteration_002.jsonl").write_text("older")
    with pytest.raises(WritePathError, match="iteration_002.jsonl already exists"):
        files.write_pairs(1, [])
    assert (shared / "iteration_002.jsonl").read_text() == "older"
    files.write_pairs(2, [])  # a new file outside the run folder is fine
    inside = _files(area, policy_checkpoint_dir="policies")
    (area.run_dir / "policies" / "iteration_001").mkdir(parents=True)
    inside.write_policy(0, [{"w": torch.zeros(2)}], [0])  # the run's own folder: replaced
    assert (area.run_dir / "policies" / "iteration_001" / "meta.json").is_file()


def test_without_an_area_paths_are_taken_as_given(tmp_path):
    config = SimpleNamespace(log_reward_distribution=False, policy_checkpoint_dir=str(tmp_path / "anywhere"),
                             preference_replay_dir=None)
    files = IterationFiles.for_config(config, None)
    files.write_policy(0, [{"w": torch.zeros(2)}], [0])
    assert (tmp_path / "anywhere" / "iteration_001" / "meta.json").is_file()
