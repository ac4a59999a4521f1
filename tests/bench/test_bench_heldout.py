"""The held-out learning bench, short: two tiny agents, a few steps, the whole pipeline (training with a
best checkpoint, evaluation of step 0, best and last on held-out items, the team analysis)."""

from __future__ import annotations

import json

import pytest

from bench.training.heldout import main


@pytest.mark.slow
def test_the_heldout_bench_trains_evaluates_and_analyses(capsys) -> None:
    report = main(["--model", "builtin:tiny-llama", "--seeds", "0,1", "--steps", "4", "--lr", "1e-3",
                   "--samples", "2", "--new-tokens", "6", "--eval-interval", "2", "--eval-items", "6", "--json"])
    assert set(report["seeds"]) == {"0", "1"}
    for seed in report["seeds"].values():
        rows = seed["rows"]
        assert seed["status"] == "completed" and rows["step 0"]["step"] == 0 and rows["last"]["step"] == 4
        assert rows["best"]["step"] in (0, 2, 4) and all(r["items"] == 6 for r in rows.values())
        labels = [v["label"] for v in seed["analysis"]["variants"]]
        assert labels == ["trained", "base", "first reset", "second reset", "roles swapped"]
        assert seed["analysis"]["variants"][0]["metrics"]["eval/reward_mean"] == pytest.approx(rows["last"]["value"])
    gains = report["summary"]["gains"]
    for key, seed in report["seeds"].items():
        expected = seed["rows"]["last"]["value"] - seed["rows"]["step 0"]["value"]
        assert gains[int(key)]["gain"] == pytest.approx(expected)
    assert capsys.readouterr().out.count("\n") == 1  # --json: one line


def test_the_tldr_workload_holds_out_the_last_shipped_passages_and_scores_as_the_task(tmp_path) -> None:
    from bench.training.heldout import run_config
    from bench.training.heldout_tasks import comlrl_reward, task_spec
    from engine.schema.run_config import parse_run_config
    from engine.tasks import build_task
    from engine.tasks.writing import shipped_prompts

    task = task_spec("tldr", eval_items=8, task_params={}, data_dir=tmp_path)
    config = parse_run_config(run_config(model="builtin:tiny-llama", seed=0, steps=24, lr=1e-5, samples=4,
                                         new_tokens=64, eval_interval=12, select_items=4, task=task))
    assert config.task.name == "tldr" and config.trainer.max_new_tokens == 64
    built = build_task("tldr", task["params"], 2)
    texts = [p["text"] for p in shipped_prompts()]
    assert [i["prompt"] for i in built.train_dataset] == texts[:12]
    assert [i["prompt"] for i in built.eval_dataset] == texts[12:]
    summary = "Bees dance to show the hive where the flowers are, because food matters."
    expansion = ("Honey bees live in large colonies. However, when a forager finds nectar it returns and "
                 "performs a waggle dance, so that workers learn the direction and distance of the flowers.")
    totals, _ = built.reward_func.score([[summary, "too short"], [expansion, expansion]], [{}, {}])
    reward = comlrl_reward("tldr", task["params"])([summary, "too short"], [expansion, expansion])
    assert reward[0] > 1.5 and reward[1] == 0.0  # the second pair fails the 8-word gate
    assert reward == pytest.approx(totals)
    overlapping = {**task["params"], "eval_dataset": task["params"]["dataset"]}
    with pytest.raises(Exception, match="disjoint"):
        build_task("tldr", overlapping, 2)


def test_reports_of_one_seed_each_merge_into_one_table(tmp_path) -> None:
    from bench.training.heldout import merged

    def report(seed: int, last: float) -> str:
        rows = {label: {"step": step, "value": value, "se": 0.1, "items": 6}
                for label, step, value in (("step 0", 0, 0.5), ("best", 7, last), ("last", 14, last))}
        seed_report = {"rows": rows, "total_wall_min": 30.0, "total_cpu_min": 9.0}
        path = tmp_path / f"seed{seed}.json"
        path.write_text(json.dumps({"seeds": {str(seed): seed_report}}))
        return str(path)

    table = merged([report(0, 0.7), report(1, 0.9)])
    assert "| 0 | 0.500 ± 0.100 | 0.700 ± 0.100 (7) | 0.700 ± 0.100 | +0.200 ± 0.141 | 30.0 / 9.0 |" in table
    assert "| mean ± s.e. over seeds | 0.500 ± 0.000 | 0.800 ± 0.100 | 0.800 ± 0.100 | | |" in table
