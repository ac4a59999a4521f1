"""The experiment form's hints, by hand: checkpoints the limit deletes, no best checkpoint kept, and a
learning rate far above what a pretrained model stands (the tiny random models exempt)."""

from __future__ import annotations

from app.form_hints import checkpoint_hints, checkpoints_written, learning_rate_warnings


def test_checkpoints_written_and_the_limit_that_deletes_some() -> None:
    assert checkpoints_written({"max_steps": 60, "checkpoint_interval": 0}) == 1  # only at the end
    assert checkpoints_written({"max_steps": 60, "checkpoint_interval": 10}) == 6
    assert checkpoints_written({"max_steps": 65, "checkpoint_interval": 10}) == 7  # and one at the end
    assert checkpoints_written({"max_steps": None, "checkpoint_interval": 10}) is None
    [deleted, no_best] = checkpoint_hints({"max_steps": 60, "checkpoint_interval": 10, "checkpoint_total_limit": 3})
    assert "writes 6 checkpoints" in deleted and "the 3 older ones are deleted" in deleted
    assert "No best checkpoint is kept" in no_best and "best_checkpoint_metric" in no_best
    assert checkpoint_hints({"max_steps": 60, "checkpoint_interval": 20, "checkpoint_total_limit": 3,
                             "best_checkpoint_metric": "eval/reward_mean"}) == []
    assert len(checkpoint_hints({"max_steps": 60, "checkpoint_interval": 10, "checkpoint_total_limit": None})) == 1


def test_a_learning_rate_far_above_a_pretrained_models_range_is_warned() -> None:
    config = {"trainer": {"agent_learning_rate": 1e-3},
              "agents": [{"name": "helper", "model": "builtin:smollm2-135m"},
                         {"name": "main", "model": "builtin:tiny-llama"},
                         {"name": "own", "model": "HuggingFaceTB/SmolLM2-135M-Instruct", "learning_rate": 5e-6}]}
    [warning] = learning_rate_warnings(config)  # the tiny model learns at 1e-3; "own" has its own sane rate
    assert "1e-3" not in warning.split("**")[1] and "0.001 for agent 'helper'" in warning
    assert "`trainer.agent_learning_rate`" in warning and "Try 5e-06" in warning
    config["trainer"]["agent_learning_rate"] = 5e-6
    assert learning_rate_warnings(config) == []
    config["agents"][2]["learning_rate"] = 2e-3
    [warning] = learning_rate_warnings(config)
    assert "`agents.2.learning_rate`" in warning
