"""The best checkpoint by an evaluation metric: chosen by hand-checked comparisons, kept apart from the
rolling checkpoints (never pruned), carried over by a resume, selected by ``--checkpoint best``."""

from __future__ import annotations

import json
import math

import pytest

from engine.build.run import run_training
from engine.evaluation.evaluate import evaluate_run, find_checkpoint, run_checkpoints
from engine.schema.run_config import parse_run_config
from engine.sinks import MemorySink
from engine.trainer.checkpoint import BestMetricMissing, improves


def test_improves_by_direction() -> None:
    assert improves(0.5, None, "max") and improves(0.5, None, "min")
    assert improves(0.6, 0.5, "max") and not improves(0.5, 0.5, "max") and not improves(0.4, 0.5, "max")
    assert improves(0.4, 0.5, "min") and not improves(0.5, 0.5, "min") and not improves(0.6, 0.5, "min")
    assert not improves(math.nan, None, "max") and not improves(math.nan, 0.1, "min")
    with pytest.raises(ValueError, match="best_checkpoint_mode"):
        improves(0.1, None, "up")


def config(**trainer) -> dict:
    return {
        "name": "best",
        "agents": [{"name": "first", "model": "builtin:tiny-llama"}, {"name": "second", "model": "builtin:tiny-llama"}],
        "task": {"name": "quickstart", "params": {"num_items": 4, "eval_items": 2}},
        "trainer": {"algorithm": "magrpo", "max_steps": 6, "num_generations": 4, "max_new_tokens": 8,
                    "agent_learning_rate": 3e-3, "rollout_buffer_size": 1, "eval_interval": 1, "eval_num_samples": 2,
                    "eval_greedy": True, "checkpoint_interval": 1, "checkpoint_total_limit": 1, "seed": 0,
                    "best_checkpoint_metric": "eval/reward_mean", **trainer},
    }


def evaluations(sink: MemorySink, key: str) -> dict[int, float]:
    return {step: m[key] for step, _, m in sink.metrics if key in m}


@pytest.mark.parametrize("mode", ["max", "min"])
def test_the_best_evaluation_is_kept_apart_and_never_pruned(tmp_path, mode) -> None:
    sink = MemorySink()
    run = parse_run_config(config(best_checkpoint_mode=mode))
    assert run_training(run, output_dir=tmp_path, sink=sink).status == "completed"
    values = evaluations(sink, "eval/reward_mean")
    assert sorted(values) == list(range(7))  # steps 0..5 before each step, and 6 on the final weights
    pick = max if mode == "max" else min
    best_value = pick(values.values())
    first_best_step = min(s for s, v in values.items() if v == best_value)  # ties keep the earlier one
    record = json.loads((tmp_path / "checkpoints" / "best.json").read_text())
    assert record == {"step": first_best_step, "metric": "eval/reward_mean", "value": best_value, "mode": mode}
    assert sorted(run_checkpoints(tmp_path)) == [6]  # the rolling ones were pruned to one; best stays
    report = evaluate_run(run, checkpoint=find_checkpoint(tmp_path, "best"), greedy=True, items=2)
    assert report.checkpoint_step == first_best_step and report.metrics["eval/reward_mean"] == best_value


def test_a_resumed_run_keeps_the_earlier_attempts_best(tmp_path) -> None:
    first, second = tmp_path / "attempt-1", tmp_path / "attempt-2"
    run = parse_run_config(config(max_steps=3, checkpoint_total_limit=None))
    assert run_training(run, output_dir=first, sink=MemorySink()).status == "completed"
    earlier = json.loads((first / "checkpoints" / "best.json").read_text())
    longer = parse_run_config(config(max_steps=5, checkpoint_total_limit=None))
    sink = MemorySink()
    result = run_training(longer, output_dir=second, sink=sink, resume_from=first / "checkpoints" / "checkpoint-3")
    assert result.status == "completed"
    record = json.loads((second / "checkpoints" / "best.json").read_text())
    later = evaluations(sink, "eval/reward_mean")  # steps 3, 4 and the final 5
    if max(later.values()) > earlier["value"]:
        assert record["value"] == max(later.values()) and record["step"] in later
    else:
        assert record == earlier  # carried over from the first attempt
    assert (second / "checkpoints" / "best" / "meta.json").is_file()


def test_a_metric_the_task_does_not_report_fails_the_run_naming_the_ones_it_does(tmp_path) -> None:
    run = parse_run_config(config(best_checkpoint_metric="eval/solved"))
    with pytest.raises(BestMetricMissing, match="'eval/solved' is not among this task's evaluation metrics "
                                                 r"\(eval/avg@1, eval/pass@1, eval/reward_mean"):
        run_training(run, output_dir=tmp_path, sink=MemorySink())


def test_no_best_checkpoint_without_the_setting(tmp_path) -> None:
    run = parse_run_config(config(best_checkpoint_metric=None, max_steps=1))
    assert run_training(run, output_dir=tmp_path, sink=MemorySink()).status == "completed"
    from engine.evaluation.evaluate import EvalError

    with pytest.raises(EvalError, match="kept no best checkpoint; train with best_checkpoint_metric"):
        find_checkpoint(tmp_path, "best")


def test_a_metric_a_built_in_task_does_not_report_is_refused_when_the_config_is_checked() -> None:
    from engine.schema.preflight import preflight_problems

    def problems(**trainer) -> list[str]:
        return [str(p) for p in preflight_problems(parse_run_config(config(**trainer)))
                if p.field == "trainer.best_checkpoint_metric"]

    [refused] = problems(best_checkpoint_metric="eval/solved")
    assert "task 'quickstart' does not report 'eval/solved'" in refused and "eval/pass@1" in refused
    assert problems(best_checkpoint_metric="eval/pass@1") == []
    assert problems(best_checkpoint_metric="eval/reward_mean") == []
    # pass@k only up to the answers per item: greedy evaluation gives one
    assert problems(best_checkpoint_metric="eval/pass@4", eval_greedy=True)
    assert problems(best_checkpoint_metric="eval/pass@4", eval_greedy=False, eval_samples_per_item=4) == []


def test_humaneval_declares_its_own_metrics_per_turn() -> None:
    from engine.tasks import get_task_info

    names = get_task_info("humaneval").eval_metric_names(2, 3)
    assert {"eval/turn_2/solved", "eval/turn_1/tests_passed", "eval/pass@3", "eval/avg@3"} <= names
    assert "eval/turn_3/solved" not in names and "eval/pass@4" not in names


def test_a_completed_run_exports_the_best_models_beside_the_last(tmp_path) -> None:
    run = parse_run_config(config(max_steps=4))
    assert run_training(run, output_dir=tmp_path, sink=MemorySink()).status == "completed"
    record = json.loads((tmp_path / "checkpoints" / "best.json").read_text())
    for i in range(2):
        assert (tmp_path / "model_best" / f"agent_{i}" / "config.json").is_file()
    exported = evaluate_run(run, models=[tmp_path / "model_best" / f"agent_{i}" for i in range(2)], greedy=True)
    from_best = evaluate_run(run, checkpoint=find_checkpoint(tmp_path, "best"), greedy=True)
    assert exported.metrics == from_best.metrics and from_best.checkpoint_step == record["step"]
