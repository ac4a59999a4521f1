"""Evaluation: per-turn reward and expected return, greedy decoding, pass@k, CoMLRL's hooks."""

from __future__ import annotations

import pytest

from engine.sinks import MemorySink
from tests.engine.trainer.trainer_helpers import DATA, fast_config, make_trainer


def test_evaluate_reports_turn_metrics_pass_at_k_and_eval_episodes(team) -> None:
    sink = MemorySink()
    trainer = make_trainer(
        team, fast_config(num_turns=2, eval_samples_per_item=3, discount=0.5), eval_dataset=DATA[:2],
        reward_func=lambda c1, c2: [1.0], eval_check=lambda item, completions: item["n"] == 0,
    )
    metrics = trainer.evaluate(sink=sink)
    assert metrics["eval/turn_1/reward_mean"] == 1.0 and metrics["eval/turn_2/reward_mean"] == 1.0
    assert metrics["eval/turn_1/expected_return"] == 1.5  # 1 + 0.5 * 1
    # item 0 always passes, item 1 never: pass@k = 0.5 for every k <= 3
    assert metrics["eval/pass@1"] == metrics["eval/pass@3"] == 0.5
    assert "eval/pass@5" not in metrics
    assert sink.metrics[0][2] == metrics
    (step, episodes), = sink.transcripts
    assert step == 0 and [e.split for e in episodes] == ["eval", "eval"]
    assert [t.turn for t in episodes[0].turns] == [1, 1, 2, 2]


def test_greedy_evaluation_is_deterministic(team) -> None:
    trainer = make_trainer(team, fast_config(eval_greedy=True), eval_dataset=DATA[:2])
    seen = []
    trainer.eval_logger = lambda agent_completions_turns, **kw: seen.append(agent_completions_turns) or []
    trainer.evaluate()
    trainer.evaluate()
    assert seen[0] == seen[1]
    assert len(seen[0]) == 2 and len(seen[0][0]) == 2 and len(seen[0][0][0]) == 1  # [agent][item][turn]


def test_eval_logger_and_aggregator_follow_comlrl(team) -> None:
    calls = {}

    def logger(agent_completions_turns, batch_items, prompts):
        calls["logger"] = (len(agent_completions_turns), batch_items, prompts)
        return [{"score": float(i)} for i in range(len(prompts))]

    def aggregator(metrics, num_turns=1):
        calls["num_turns"] = num_turns
        return {"turn_1/avg_score": sum(m["score"] for m in metrics) / len(metrics)}

    trainer = make_trainer(team, fast_config(), eval_dataset=DATA[:3], eval_logger=logger, eval_aggregator=aggregator)
    metrics = trainer.evaluate(num_eval_samples=2)
    assert calls["logger"] == (2, DATA[:2], ["Count to 0:", "Count to 1:"])
    assert calls["num_turns"] == 1
    assert metrics["eval/turn_1/avg_score"] == pytest.approx(0.5)


def test_training_evaluates_on_its_interval(team) -> None:
    sink = MemorySink()
    trainer = make_trainer(team, fast_config(max_steps=3, eval_interval=2, eval_num_samples=1),
                           eval_dataset=DATA[:1], sink=sink)
    trainer.train()
    eval_steps = [step for step, _, m in sink.metrics if "eval/turn_1/reward_mean" in m]
    assert eval_steps == [0, 2, 3]  # CoMLRL's schedule, then the final weights


def test_a_stopped_run_skips_the_final_evaluation(team) -> None:
    class StopAfterOne(MemorySink):
        def should_stop(self) -> bool:
            return len(self.steps) >= 1

    sink = StopAfterOne()
    trainer = make_trainer(team, fast_config(max_steps=3, eval_interval=2, eval_num_samples=1),
                           eval_dataset=DATA[:1], sink=sink)
    assert trainer.train().status == "stopped"
    assert [step for step, _, m in sink.metrics if "eval/turn_1/reward_mean" in m] == [0]


def test_no_eval_dataset_gives_no_metrics(team) -> None:
    assert make_trainer(team, fast_config()).evaluate() == {}
