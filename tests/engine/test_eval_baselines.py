"""Test-time baselines (engine.evaluation.baselines): what each protocol shows each agent, the scores with
standard errors, and ``evaluate_run(baseline=...)`` on tiny models with CoMLRL's TLDR task."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from engine.evaluation.baselines import discussion_prompt, joint_answers, run_protocol
from engine.evaluation.evaluate import EvalError, evaluate_run
from engine.schema.run_config import parse_run_config
from tests.engine.tasks.comlrl_fixtures import writing_files


@dataclass
class Sampled:
    texts: list[str]


class EchoAgent:
    """Answers with its name and the last line of the prompt it saw, and records every prompt."""

    def __init__(self, name: str) -> None:
        self.name, self.tokenizer, self.system_prompt, self.seen = name, None, None, []
        self.formatter = lambda item: f"{self.name} task: {item['prompt']}"

    def sample(self, prompts, n, greedy=False):
        self.seen.extend(prompts)
        return [Sampled([f"{self.name}#{k}<{p.splitlines()[-1][:30]}>" for k in range(n)]) for p in prompts], 0


def test_parallel_agents_answer_independently():
    a, b = EchoAgent("a"), EchoAgent("b")
    texts = joint_answers([a, b], {"prompt": "P"}, "parallel", 2, False)
    assert texts == [["a#0<a task: P>", "a#1<a task: P>"], ["b#0<b task: P>", "b#1<b task: P>"]]
    assert a.seen == ["a task: P"] and b.seen == ["b task: P"]


def test_pipeline_shows_each_later_agent_the_replies_before_it():
    a, b = EchoAgent("a"), EchoAgent("b")
    texts = joint_answers([a, b], {"prompt": "P"}, "pipeline", 2, False)
    assert len(b.seen) == 2 and "[a]\na#0<a task: P>" in b.seen[0] and "[a]\na#1<a task: P>" in b.seen[1]
    assert texts[0] == ["a#0<a task: P>", "a#1<a task: P>"] and all(t.startswith("b#0") for t in texts[1])


def test_discussion_shows_own_and_partner_answers_and_keeps_the_second_round():
    a, b = EchoAgent("a"), EchoAgent("b")
    texts = joint_answers([a, b], {"prompt": "P"}, "discussion", 1, False)
    second_a = a.seen[1]
    assert "Your first answer:\na#0<a task: P>" in second_a and "[b]\nb#0<b task: P>" in second_a
    assert texts[0][0].startswith("a#0<Taking your partners") and texts[1][0].startswith("b#0<Taking your")
    assert len(a.seen) == len(b.seen) == 2
    assert discussion_prompt("T", "mine", [("x", "theirs")]).startswith("T\n\nYour first answer:\nmine")
    chat = discussion_prompt([{"role": "system", "content": "S"}, {"role": "user", "content": "T"}], "mine",
                             [("x", "theirs")])
    assert chat[0] == {"role": "system", "content": "S"} and chat[1]["content"].startswith("T\n\nYour first answer")


class ScoringTrainer:
    def __init__(self, agents):
        self.agents, self.eval_check = agents, (lambda item, joint: joint[0].startswith("a#0"))

        class Reward:
            @staticmethod
            def score(texts, items, prompts):
                values = [float(len(texts[0][j]) > 3) + (1.0 if items[j]["prompt"] == "Q" else 0.0)
                          for j in range(len(items))]
                return values, {"long": [float(len(texts[0][j]) > 3) for j in range(len(items))]}

        self.reward = Reward()


def test_scores_pass_at_k_and_standard_errors_over_items():
    trainer = ScoringTrainer([EchoAgent("a"), EchoAgent("b")])
    means, ses, rows = run_protocol(trainer, [{"prompt": "P"}, {"prompt": "Q"}], 2, "parallel", samples=2,
                                    greedy=False)
    assert [row["eval/reward_mean"] for row in rows] == [1.0, 2.0]
    assert means["eval/reward_mean"] == 1.5 and ses["eval/reward_mean"] == pytest.approx(0.5)  # sd 0.707 / sqrt 2
    assert means["eval/pass@1"] == 0.5 and means["eval/pass@2"] == 1.0  # 1 of 2 samples correct per item
    assert means["eval/reward/long"] == 1.0


def test_evaluate_run_plays_the_first_agent_alone(tmp_path):
    train, held_out = writing_files(tmp_path)
    config = parse_run_config({
        "name": "baselines",
        "agents": [{"name": "summary", "model": "builtin:tiny-llama"}, {"name": "expansion", "model": "builtin:tiny-llama"}],
        "task": {"name": "tldr", "params": {"dataset": train, "eval_dataset": held_out}},
        "trainer": {"algorithm": "magrpo", "max_new_tokens": 6, "seed": 1},
    })
    # one agent alone: the first agent writes both parts (the protocols between agents: the fake agents above)
    report = evaluate_run(config, baseline="single", samples=2, items=2)
    assert report.baseline == "single" and report.items == 2 and len(report.per_item) == 2
    assert "eval/reward_mean" in report.standard_errors and "eval/reward/structure" in report.metrics
    assert report.to_json()["baseline"] == "single"
    with pytest.raises(EvalError, match="choose one of single, parallel, pipeline, discussion"):
        evaluate_run(config, baseline="debate")
    for name in ("single", "parallel"):  # a baseline is the untrained comparison: never a checkpoint's weights
        with pytest.raises(EvalError, match=f"--baseline {name} plays the config's base models"):
            evaluate_run(config, checkpoint=tmp_path, baseline=name)
