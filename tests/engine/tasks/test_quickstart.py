"""The quick-start task: its reward by hand, and (slow) that two tiny models visibly learn it."""

from __future__ import annotations

import math

import pytest

from engine.tasks import TaskError, build_task
from engine.tasks.quickstart import letter_fraction, team_fit


def test_letter_fraction_and_team_fit_by_hand():
    assert letter_fraction("abcz", "abcdefghijklm") == 0.75
    assert letter_fraction("", "abc") == 0.0
    # first part 3/4 on role, second part 2/4: sqrt(0.75 * 0.5)
    assert team_fit("abcz", "noab", "abcdefghijklm", "nopqrstuvwxyz") == pytest.approx(math.sqrt(0.375))
    # either part off-role -> the team scores nothing
    assert team_fit("abc", "abc", "abcdefghijklm", "nopqrstuvwxyz") == 0.0


def test_reward_depends_on_both_agents():
    task = build_task("quickstart", {}, 2)
    item = task.train_dataset[0]
    totals, terms = task.reward_func.score([["abc", "abc", "xyz"], ["xyz", "abc", "xyz"]], [item] * 3, None)
    assert totals == [1.0, 0.0, 0.0]
    assert terms["first_part"] == [1.0, 1.0, 0.0] and terms["second_part"] == [1.0, 0.0, 1.0]
    assert task.check(item, ["abc", "nop"]) and not task.check(item, ["abc", "abc"])


def test_formatters_name_each_agents_half():
    task = build_task("quickstart", {"num_items": 3, "eval_items": 2}, 2)
    item = task.train_dataset[0]
    assert task.formatters[0](item).endswith("Write letters from a to m:\n")
    assert task.formatters[1](item).endswith("Write letters from n to z:\n")
    assert len(task.train_dataset) == 3 and len(task.eval_dataset) == 2


def test_overlapping_halves_are_rejected():
    with pytest.raises(TaskError, match="must not share characters"):
        build_task("quickstart", {"first_letters": "abc", "second_letters": "cde"}, 2)


@pytest.mark.slow
def test_two_tiny_models_learn_the_quickstart(tmp_path):
    """Averaged over two seeds, the team reward rises from about chance to clearly above it."""
    from engine.build.run import run_training
    from engine.schema.presets import preset_config
    from engine.schema.run_config import parse_run_config
    from engine.sinks import MemorySink

    starts, ends = [], []
    for seed in (0, 1):
        config = preset_config("quickstart")
        config["trainer"].update({"seed": seed, "max_steps": 40, "eval_interval": 0})
        sink = MemorySink()
        result = run_training(parse_run_config(config), output_dir=tmp_path / f"seed{seed}", sink=sink)
        assert result.status == "completed"
        rewards = [report.metrics["train/reward_mean"] for report in sink.steps]
        assert len(rewards) == 40
        assert {"reward/team", "reward/first_part", "reward/second_part"} <= set(sink.steps[0].metrics)
        starts.append(sum(rewards[:5]) / 5)
        ends.append(sum(rewards[-8:]) / 8)
    start, end = sum(starts) / 2, sum(ends) / 2
    assert start < 0.45, f"random tiny models should start near chance (~0.3), got {start:.3f}"
    assert end > start + 0.15 and end > 0.5, f"team reward should rise clearly: {start:.3f} -> {end:.3f}"
