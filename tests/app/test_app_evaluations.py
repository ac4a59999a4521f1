"""The run page's Evaluations tab: held-out metrics per checkpoint (mean ± s.e., the best marked), team
analyses, and per-item outcomes whose rows open the evaluated episode; the table builders by hand."""

from __future__ import annotations

import json

from db.evaluation_records import EvaluationInput
from db.evaluation_store import EvaluationStore
from db.store import Store

EPISODE = {"step": 4, "split": "eval", "sample_index": 0, "item_index": 0, "reward": 0.5, "ret": 0.5, "turns": [
    {"turn": 1, "agent_index": 0, "agent_name": "writer", "prompt": "Topic: islands", "completion": "abcdef",
     "reward": 0.5, "ret": 0.5, "advantage": 0.0},
    {"turn": 1, "agent_index": 1, "agent_name": "editor", "prompt": "Topic: islands", "completion": "nopqrs",
     "reward": 0.5, "ret": 0.5, "advantage": 0.0}]}


def _evaluation(run_id: int, step: int, reward: float, **fields) -> EvaluationInput:
    values = dict(run_id=run_id, split="eval", settings={"seed": 0, "greedy": True, "samples": 1, "items": 2},
                  metrics={"eval/reward_mean": reward, "eval/pass@1": 0.5},
                  standard_errors={"eval/reward_mean": 0.05, "eval/pass@1": 0.5},
                  per_item=[{"index": 0, "turn_rewards": [reward], "return": reward, "samples": 1, "correct": 1,
                             "task_metrics": {}},
                            {"index": 1, "turn_rewards": [reward], "return": reward, "samples": 1, "correct": 0,
                             "task_metrics": {}}],
                  episodes=[EPISODE, {**EPISODE, "item_index": 1}], checkpoint_step=step)
    values.update(fields)
    return EvaluationInput(**values)


def test_the_tab_lists_evaluations_with_the_best_marked_and_opens_an_items_episode(
        app, store: Store, experiment: int, seed, tmp_path) -> None:
    run_id = seed(experiment, status="succeeded", steps=2)
    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "best.json").write_text(json.dumps({"step": 4, "metric": "eval/reward_mean",
                                                               "value": 0.75, "mode": "max"}))
    store.update_run(run_id, output_dir=str(out))
    evaluations = EvaluationStore(store)
    evaluations.add_evaluation(_evaluation(run_id, 4, 0.75))
    evaluations.add_evaluation(_evaluation(run_id, 8, 0.5))
    for label, value in (("trained", 0.75), ("writer reset", 0.25), ("editor reset", 0.65)):
        evaluations.add_evaluation(_evaluation(run_id, 8, value, kind="team_analysis", label=label, analysis="abc123",
                                               settings={"metric": "eval/reward_mean", "samples": 1, "items": 2,
                                                         "weights": ["trained:writer", "trained:editor"]}))
    at = app("run_detail", run=run_id, tab="Evaluations")
    assert not at.exception
    held_out, analysis, items = (df.value for df in at.dataframe[:3])
    assert list(held_out["checkpoint"]) == ["4 ★ best", "8"]
    assert list(held_out["eval/reward_mean"]) == ["0.7500 ± 0.0500", "0.5000 ± 0.0500"]
    # the quick start checks no tests: its pass@1 is not shown as if it were a code benchmark's
    assert [c for c in held_out.columns if c.startswith("eval/")] == ["eval/reward_mean"]
    assert list(analysis["configuration"]) == ["trained", "writer reset", "editor reset"]
    assert list(analysis["eval/reward_mean"]) == ["0.7500 ± 0.0500", "0.2500 ± 0.0500", "0.6500 ± 0.0500"]
    # one plain sentence says who mattered, from the rows above
    assert ("**writer** mattered most: resetting it to its base model lowers `eval/reward_mean` by 0.500 ± 0.071 "
            "(editor's reset lowers it by 0.100 ± 0.071).") in [m.value for m in at.markdown]
    assert list(items["correct"]) == ["1 / 1", "0 / 1"]
    texts = [t.value for t in at.text]
    assert "abcdef" in texts and "nopqrs" in texts  # the evaluated episode of item 0, as a dialogue


def test_a_run_without_evaluations_says_how_to_make_one(app, store: Store, experiment: int, seed) -> None:
    run_id = seed(experiment, status="succeeded", steps=1)
    at = app("run_detail", run=run_id, tab="Evaluations")
    assert not at.exception
    assert any(f"cooplab eval {run_id} --checkpoint last" in c.value for c in at.caption)


def test_evaluate_queues_an_evaluation_and_shows_its_state(app, store: Store, experiment: int, seed, home) -> None:
    from db.eval_request_store import EvalRequestStore

    run_id = seed(experiment, status="succeeded", steps=2)
    for step in (1, 2):
        store.add_checkpoint(run_id, step, str(home / "runs" / f"run-{run_id}" / "checkpoints" / f"checkpoint-{step}"))
    at = app("run_detail", run=run_id, tab="Evaluations")
    assert not at.exception
    key = f"evaluate_{run_id}"
    assert at.selectbox(key=f"{key}_ckpt").options == ["last", "2", "1"]  # no best_checkpoint_metric: no best
    at.selectbox(key=f"{key}_ckpt").set_value("1")
    at.checkbox(key=f"{key}_greedy").check()
    at.number_input(key=f"{key}_items").set_value(2)
    next(b for b in at.button if b.label == "Evaluate").click()
    at.run()
    assert not at.exception
    (request,) = EvalRequestStore(store).list_for_run(run_id)
    assert (request.status, request.checkpoint, request.queue) == ("queued", "1", "cpu")
    assert request.options["greedy"] is True and request.options["items"] == 2 and request.options["samples"] is None
    assert any(f"Queued evaluation request #{request.id} (checkpoint 1) on cpu" in s.value for s in at.success)
    table = at.dataframe[0].value
    assert list(table["state"]) == ["⏳ queued"] and list(table["options"]) == ["greedy · 2 items"]
    requests = EvalRequestStore(store)
    requests.claim(request.id, worker="cooplab-cpu-1@host")
    requests.finish(request.id, "failed", error="no such checkpoint")
    at.run()
    assert not any("Queued evaluation request" in s.value for s in at.success)  # the banner is not left stale
    assert list(at.dataframe[0].value["state"]) == ["✖ failed"]


def test_requests_show_done_and_failed_with_their_reason(app, store: Store, experiment: int, seed) -> None:
    from db.eval_request_store import EvalRequestStore

    run_id = seed(experiment, status="succeeded", steps=1)
    requests = EvalRequestStore(store)
    options = {"split": "eval", "items": None, "samples": 4, "greedy": False, "team_analysis": True,
               "metric": "eval/reward_mean"}
    failed = requests.create(run_id, checkpoint="best", options=options, queue="cpu")
    requests.claim(failed.id, worker="cooplab-cpu-1@host")
    requests.finish(failed.id, "failed", error="run folder x kept no best checkpoint")
    done = requests.create(run_id, checkpoint="last", options={**options, "team_analysis": False}, queue="cpu")
    requests.claim(done.id, worker="cooplab-cpu-1@host")
    requests.finish(done.id, "done", evaluation_ids=[3])
    at = app("run_detail", run=run_id, tab="Evaluations")
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table["request"]) == [done.id, failed.id]
    assert list(table["state"]) == ["✔ done", "✖ failed"]
    assert list(table["evaluations"]) == ["3", ""]
    assert list(table["reason"]) == ["", "run folder x kept no best checkpoint"]
    assert list(table["options"]) == ["4 sample(s) · all items", "4 sample(s) · all items · team analysis "
                                                                 "(eval/reward_mean)"]
    # no checkpoints recorded: nothing to evaluate yet
    assert next(b for b in at.button if b.label == "Evaluate").disabled
    assert any("no checkpoints yet" in c.value for c in at.caption)


def test_an_evaluated_episodes_header_totals_its_turns(store: Store, experiment: int, seed) -> None:
    """Evaluation episodes are stored as the engine writes them (turns, no episode totals): the header's
    team reward and return come from the turns, never a made-up 0."""
    from app.components.evaluations import episode_view
    from app.components.transcript_view import episode_title
    from engine.sinks.jsonl import episode_to_dict
    from engine.transcripts import Episode, TurnRecord

    turns = tuple(TurnRecord(turn=t, agent_index=i, agent_name=name, prompt="p", completion="c", reward=1.0,
                             ret=2.0 - (t - 1), advantage=0.0)
                  for t in (1, 2) for i, name in enumerate(("writer", "editor")))
    stored = episode_to_dict(4, Episode(sample_index=0, split="eval", item_index=0, turns=turns))
    assert "reward" not in stored  # what the evaluation job stores
    run_id = seed(experiment, status="succeeded", steps=1)
    EvaluationStore(store).add_evaluation(_evaluation(run_id, 4, 1.0, episodes=[stored]))
    [evaluation] = EvaluationStore(store).list_evaluations(run_id)
    episode = episode_view(evaluation, 0)
    assert (episode.reward, episode.ret) == (2.0, 2.0)  # two turns of 1.0; the first turn's return
    assert "team reward 2.000 · return 2.000" in episode_title(episode)


def test_held_out_metrics_in_reading_order_by_hand() -> None:
    from app.held_out import metric_order

    keys = ["eval/avg@4", "eval/pass@10", "eval/pass@2", "eval/reward/team", "eval/reward_mean", "eval/reward_mean_se",
            "eval/turn_1/expected_return", "eval/turn_10/reward_mean", "eval/turn_2/reward_mean",
            "eval/turn_1/reward_mean", "eval/turn_1/solved", "eval/accuracy"]
    assert metric_order(keys) == [
        "eval/reward_mean", "eval/reward/team", "eval/turn_1/reward_mean", "eval/turn_2/reward_mean",
        "eval/turn_10/reward_mean", "eval/turn_1/expected_return", "eval/pass@2", "eval/pass@10", "eval/avg@4",
        "eval/accuracy", "eval/turn_1/solved"]
    assert "eval/pass@2" not in metric_order(keys, tests=False) and "eval/avg@4" not in metric_order(keys, tests=False)


def test_checkpoint_choices_by_hand() -> None:
    from app.components.evaluate_control import checkpoint_choices

    assert checkpoint_choices([4, 2, 8, 4], keeps_best=True) == ["last", "best", "8", "4", "2"]
    assert checkpoint_choices([], keeps_best=False) == ["last"]


def test_promoted_config_by_hand() -> None:
    from app.components.evaluations import promoted_config

    config = {"name": "x", "agents": [{"name": "a", "model": "builtin:tiny-llama", "lora_rank": 8, "lora_alpha": 16.0},
                                      {"name": "b", "model": "builtin:tiny-llama", "share_weights_with": "a"}],
              "trainer": {"seed": 3}}
    promoted = promoted_config(config, ["/r/model_best/agent_0", "/r/model_best/agent_1"])
    assert promoted["agents"] == [{"name": "a", "model": "/r/model_best/agent_0", "tokenizer": None,
                                   "share_weights_with": None},
                                  {"name": "b", "model": "/r/model_best/agent_1", "tokenizer": None,
                                   "share_weights_with": None}]
    assert promoted["trainer"] == {"seed": 3} and config["agents"][0]["lora_rank"] == 8  # the input is left alone
    import pytest

    with pytest.raises(ValueError, match="1 exported model folder"):
        promoted_config(config, ["/r/model_best/agent_0"])


def test_the_best_models_are_promoted_to_the_experiments_model_sources(
        app, store: Store, experiment: int, seed, tmp_path) -> None:
    run_id = seed(experiment, status="succeeded", steps=1)
    out = tmp_path / "run"
    (out / "checkpoints" / "best").mkdir(parents=True)
    (out / "checkpoints" / "best.json").write_text(json.dumps({"step": 3, "metric": "eval/reward_mean",
                                                               "value": 0.5, "mode": "max"}))
    for i in range(2):
        (out / "model_best" / f"agent_{i}").mkdir(parents=True)
        (out / "model_best" / f"agent_{i}" / "config.json").write_text("{}")
    store.update_run(run_id, output_dir=str(out))
    at = app("run_detail", run=run_id, tab="Evaluations")
    assert not at.exception
    at.button(key=f"best_{run_id}.promote").click().run()
    assert not at.exception
    models = [a["model"] for a in store.get_experiment(experiment).config["agents"]]
    assert models == [str(out / "model_best" / "agent_0"), str(out / "model_best" / "agent_1")]
    assert any("start from the best models of step 3" in s.value for s in at.success)


def test_who_mattered_by_hand() -> None:
    from app.who_mattered import who_mattered

    def variant(label: str, value: float):  # the fields who_mattered reads, as a stored variant has them
        return _evaluation(1, 8, value, kind="team_analysis", label=label)

    rows = [variant("trained", 0.5), variant("writer reset", 0.45), variant("editor reset", 0.55)]
    assert who_mattered(rows, "eval/reward_mean").endswith(
        "by 0.050 ± 0.071 (within two standard errors: more items or samples would tell) (editor's reset raises it "
        "by 0.050 ± 0.071).")  # the other reset's change said as one, not as a value of the metric
    assert who_mattered([variant("trained", 0.5), variant("writer reset", 0.55)], "eval/reward_mean") == (
        "No agent mattered: resetting any one of them to its base model does not lower `eval/reward_mean`.")
    # a reset that raises the metric beyond the noise: that agent's training lowered it, which is said
    assert who_mattered([variant("trained", 0.5), variant("writer reset", 0.9), variant("editor reset", 0.5)],
                        "eval/reward_mean") == (
        "No agent mattered: resetting any one of them to its base model does not lower `eval/reward_mean`; "
        "resetting **writer** raises it by 0.400 ± 0.071 (its training lowered it).")
    nan = variant("editor reset", float("nan"))  # a metric that is not a number names nobody
    assert who_mattered([variant("trained", 0.5), variant("writer reset", 0.45), nan], "eval/reward_mean").startswith(
        "**writer** mattered most")
    assert who_mattered([variant("trained", 0.5), variant("base", 0.1)], "eval/reward_mean") is None  # one agent
