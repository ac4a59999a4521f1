"""Evaluation of record (engine.evaluation.evaluate): the same numbers as the in-training evaluation, repeatable,
on held-out items only, and a one-line refusal for each bad input."""

from __future__ import annotations

import json

import pytest

from engine.build.run import run_training
from engine.evaluation.evaluate import EvalError, evaluate_run, find_checkpoint, run_checkpoints
from engine.schema.run_config import parse_run_config
from engine.sinks import MemorySink
from engine.tasks import TaskError, build_task
from engine.tasks.datasets import shared_items


def quickstart_config(**trainer) -> dict:
    return {
        "name": "eval-test",
        "agents": [{"name": "first", "model": "builtin:tiny-llama"}, {"name": "second", "model": "builtin:tiny-qwen2"}],
        "task": {"name": "quickstart", "params": {"num_items": 4, "eval_items": 3}},
        "trainer": {"algorithm": "magrpo", "max_steps": 2, "num_generations": 4, "max_new_tokens": 6,
                    "agent_learning_rate": 1e-3, "rollout_buffer_size": 1, "eval_interval": 1,
                    "eval_num_samples": 3, "eval_greedy": True, "checkpoint_interval": 1,
                    "checkpoint_total_limit": None, "seed": 3, **trainer},
    }


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    config = parse_run_config(quickstart_config())
    sink = MemorySink()
    result = run_training(config, output_dir=out, sink=sink)
    assert result.status == "completed"
    return config, out, sink


def test_greedy_evaluation_of_a_checkpoint_equals_the_in_training_evaluation_at_that_step(trained) -> None:
    config, out, sink = trained
    in_training = {step: m for step, _, m in sink.metrics if "eval/reward_mean" in m}
    assert sorted(in_training) == [0, 1, 2]  # before steps 1 and 2, and on the final weights
    for step in (1, 2):
        report = evaluate_run(config, checkpoint=find_checkpoint(out, step), greedy=True, items=3)
        assert report.checkpoint_step == step
        for key, value in report.metrics.items():
            assert in_training[step][key] == value, key
        assert report.standard_errors["eval/reward_mean"] == in_training[step]["eval/reward_mean_se"]


def test_evaluation_reproduces_bit_for_bit(trained) -> None:
    config, out, _ = trained
    greedy = [evaluate_run(config, checkpoint=find_checkpoint(out, "last"), greedy=True).to_json() for _ in range(2)]
    assert json.dumps(greedy[0], sort_keys=True) == json.dumps(greedy[1], sort_keys=True)
    sampled = [evaluate_run(config, checkpoint=find_checkpoint(out, "last"), samples=4, seed=7).to_json()
               for _ in range(2)]
    assert json.dumps(sampled[0], sort_keys=True) == json.dumps(sampled[1], sort_keys=True)
    assert sampled[0]["samples"] == 4 and len(sampled[0]["per_item"]) == 3
    # the quick start's check gives pass@k for every k up to the samples, and avg@4 = pass@1
    metrics = sampled[0]["metrics"]
    assert {f"eval/pass@{k}" for k in range(1, 5)} | {"eval/avg@4"} <= set(metrics)
    assert metrics["eval/avg@4"] == pytest.approx(metrics["eval/pass@1"])
    rows = sampled[0]["per_item"]
    assert metrics["eval/avg@4"] == pytest.approx(sum(r["correct"] / 4 for r in rows) / 3)


def test_the_exported_models_evaluate_like_the_last_checkpoint(trained) -> None:
    config, out, _ = trained
    folders = [out / "model" / f"agent_{i}" for i in range(2)]
    from_models = evaluate_run(config, models=folders, greedy=True)
    from_checkpoint = evaluate_run(config, checkpoint=find_checkpoint(out, "last"), greedy=True)
    assert from_models.metrics == from_checkpoint.metrics
    assert from_models.models == [str(f) for f in folders]


@pytest.mark.parametrize("kwargs, message", [
    ({"samples": 0}, "--samples 0: give at least 1"),
    ({"split": "test"}, "--split 'test': choose one of eval, train"),
    ({"items": 0}, "--items 0"),
])
def test_bad_settings_are_refused_naming_them(trained, kwargs, message) -> None:
    config, _, _ = trained
    with pytest.raises(EvalError, match=message):
        evaluate_run(config, **kwargs)


def test_unknown_checkpoints_other_teams_and_mismatched_folders_are_refused(trained, tmp_path) -> None:
    config, out, _ = trained
    assert sorted(run_checkpoints(out)) == [1, 2]
    with pytest.raises(EvalError, match="no checkpoint at that step; it has steps 1, 2"):
        find_checkpoint(out, 9)
    with pytest.raises(EvalError, match="has no checkpoints"):
        find_checkpoint(tmp_path, "last")
    with pytest.raises(EvalError, match="1 folder\\(s\\) for a team of 2 agents"):
        evaluate_run(config, models=[out / "model" / "agent_0"])
    with pytest.raises(EvalError, match="is not a model folder"):
        evaluate_run(config, models=[tmp_path, tmp_path])
    solo = parse_run_config({**quickstart_config(), "agents": [{"name": "writer", "model": "builtin:tiny-llama"}],
                             "task": {"name": "self_refine", "params": {"max_items": 4, "eval_items": 2}}})
    with pytest.raises(EvalError, match="holds a team of 2 agents, the run config 1"):
        evaluate_run(solo, checkpoint=find_checkpoint(out, "last"))


def test_a_task_without_an_eval_split_is_refused(trained) -> None:
    config, _, _ = trained
    data = config.model_dump(mode="json")
    data["task"]["params"]["eval_items"] = 0
    with pytest.raises(EvalError, match="has no eval split"):
        evaluate_run(parse_run_config(data))


@pytest.mark.parametrize("name, params, agents", [
    ("quickstart", {}, 2), ("writing", {}, 2), ("self_refine", {}, 1), ("role_switch", {}, 1),
])
def test_every_built_in_split_is_held_out(name, params, agents) -> None:
    task = build_task(name, params, agents)
    assert task.eval_dataset is not None and len(task.eval_dataset) > 0
    assert shared_items(task.train_dataset, task.eval_dataset) == []


def test_splits_that_share_items_are_refused() -> None:
    with pytest.raises(TaskError, match="holds out every one of the dataset's 4 items"):
        build_task("writing", {"max_items": 4, "eval_items": 4}, 2)


def test_humaneval_slices_that_overlap_are_refused() -> None:
    with pytest.raises(TaskError, match="1 of its 1 evaluation items are also training items"):
        build_task("humaneval", {"train_slice": "0:4", "eval_slice": "3:4", "workers": 1}, 1)
    task = build_task("humaneval", {"workers": 1}, 2)  # the defaults: 133 for training, the last 31 held out
    assert (len(task.train_dataset), len(task.eval_dataset)) == (133, 31)
    assert shared_items(task.train_dataset, task.eval_dataset) == []


def test_model_folders_drop_a_tiny_built_in_model_s_builder_arguments(tmp_path) -> None:
    """``size`` and ``seed`` build a tiny model; ``from_pretrained`` of its exported folder takes neither."""
    from engine.schema.run_config import agents_from_folders

    data = quickstart_config()
    data["agents"][0]["model_kwargs"] = {"seed": 5, "size": "s"}
    data["agents"][1] = {"name": "second", "model": str(tmp_path), "model_kwargs": {"attn_implementation": "eager"}}
    out = agents_from_folders(data, [tmp_path / "a", tmp_path / "b"])
    assert "model_kwargs" not in out["agents"][0] and out["agents"][0]["model"] == str(tmp_path / "a")
    assert out["agents"][1]["model_kwargs"] == {"attn_implementation": "eager"}  # a real model's own arguments stay
