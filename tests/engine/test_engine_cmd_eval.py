"""``cooplab eval``: a run folder at a checkpoint, a run config with model folders, one JSON line that a
second call reproduces, the evaluated episodes written on request, test-time baselines of the base models
(here, and queued beside the team as the dashboard queues them), and one-line refusals (exit 2)."""

from __future__ import annotations

import json

import pytest
import typer
import yaml
from typer.testing import CliRunner

from cooplab.cmd_eval import EXIT_BAD_INPUT, register
from engine.build.run import run_training
from engine.evaluation.evaluate import evaluate_run
from engine.schema.run_config import parse_run_config
from engine.sinks import NullSink


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.command("noop")
    def noop() -> None:  # a second command keeps typer in multi-command mode, as in the real CLI
        """Nothing."""

    return app


CONFIG = {
    "name": "cli-eval",
    "agents": [{"name": "first", "model": "builtin:tiny-llama"}, {"name": "second", "model": "builtin:tiny-qwen2"}],
    "task": {"name": "quickstart", "params": {"num_items": 4, "eval_items": 4}},
    "trainer": {"max_steps": 2, "num_generations": 2, "max_new_tokens": 4, "rollout_buffer_size": 1,
                "eval_interval": 0, "checkpoint_interval": 1, "seed": 1},
}


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli-eval")
    assert run_training(parse_run_config(CONFIG), output_dir=out / "run", sink=NullSink()).status == "completed"
    (out / "run.yaml").write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    return out


def _eval(*args: str):
    return CliRunner().invoke(_app(), ["eval", *args])


def test_a_second_eval_reproduces_the_json_line(run_folder, monkeypatch) -> None:
    monkeypatch.setenv("COOPLAB_HOME", str(run_folder / "home"))
    args = [str(run_folder / "run"), "--checkpoint", "1", "--samples", "3", "--seed", "5", "--json"]
    first, second = _eval(*args), _eval(*args)
    assert first.exit_code == 0, first.output
    assert first.output == second.output and first.output.count("\n") == 1
    record = json.loads(first.output)
    assert record["checkpoint_step"] == 1 and record["split"] == "eval" and record["seed"] == 5
    assert record["samples"] == 3 and record["items"] == 4 and len(record["per_item"]) == 4
    assert {"eval/reward_mean", "eval/pass@3", "eval/avg@3"} <= set(record["metrics"])
    assert set(record["standard_errors"]) == set(record["metrics"])


def test_model_folders_with_a_run_config_and_the_episodes_file(run_folder, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("COOPLAB_HOME", str(run_folder / "home"))
    models = ",".join(str(run_folder / "run" / "model" / f"agent_{i}") for i in range(2))
    episodes = tmp_path / "episodes.jsonl"
    result = _eval("--run-config", str(run_folder / "run.yaml"), "--models", models, "--greedy", "--items", "2",
                   "--transcripts", str(episodes))
    assert result.exit_code == 0, result.output
    assert "split eval, 2 items x 1 sample(s) (greedy)" in result.output and "eval/reward_mean" in result.output
    lines = [json.loads(line) for line in episodes.read_text().splitlines()]
    assert len(lines) == 2 and all(line["split"] == "eval" for line in lines)
    assert [turn["agent_name"] for turn in lines[0]["turns"]] == ["first", "second"]


@pytest.mark.parametrize("args, message", [
    ([], "give a run (id or folder) or --run-config FILE"),
    (["{run}", "--checkpoint", "7"], "no checkpoint at that step; it has steps 1, 2"),
    (["{run}", "--samples", "0"], "--samples 0: give at least 1"),
    (["{run}", "--models", "x"], "--models goes with --run-config"),
    (["not-a-run"], "'not-a-run' is neither a run folder nor a run id"),
    (["4242"], "no run 4242 in the database"),
])
def test_bad_input_is_one_line_naming_it(run_folder, monkeypatch, args, message) -> None:
    monkeypatch.setenv("COOPLAB_HOME", str(run_folder / "home"))
    result = _eval(*[a.replace("{run}", str(run_folder / "run")) for a in args])
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1


def test_team_analysis_prints_the_table_and_needs_a_run(run_folder, monkeypatch) -> None:
    monkeypatch.setenv("COOPLAB_HOME", str(run_folder / "home"))
    result = _eval(str(run_folder / "run"), "--team-analysis", "--greedy", "--items", "2")
    assert result.exit_code == 0, result.output
    for label in ("trained", "base", "first reset", "second reset", "contribution of first"):
        assert label in result.output
    assert "roles swapped" not in result.output  # tiny-llama and tiny-qwen2: different base models
    record = json.loads(_eval(str(run_folder / "run"), "--team-analysis", "--greedy", "--json").output)
    assert [v["label"] for v in record["variants"]] == ["trained", "base", "first reset", "second reset"]
    refused = _eval("--run-config", str(run_folder / "run.yaml"), "--team-analysis")
    assert refused.exit_code == EXIT_BAD_INPUT and "--team-analysis compares a run's checkpoint" in refused.output


def test_a_run_in_the_database_gets_its_evaluations_stored(run_folder, monkeypatch) -> None:
    monkeypatch.setenv("COOPLAB_HOME", str(run_folder / "home-db"))
    from db.evaluation_store import EvaluationStore
    from db.migrate import upgrade
    from jobs.client import get_store
    from jobs.settings import get_settings

    settings = get_settings()
    upgrade(settings.resolved_database_url)
    store = get_store(settings)
    experiment = store.create_experiment("stored-evals", config=CONFIG)
    run_id = store.create_run(experiment.id, CONFIG, "cpu", total_steps=2).id
    store.update_run(run_id, output_dir=str(run_folder / "run"))
    result = _eval(str(run_id), "--checkpoint", "2", "--greedy", "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    stored = EvaluationStore(store).get_evaluation(record["evaluation_id"])
    assert stored.run_id == run_id and stored.checkpoint_step == 2 and stored.split == "eval"
    assert dict(stored.metrics) == record["metrics"] and dict(stored.standard_errors) == record["standard_errors"]
    assert [dict(i) for i in stored.per_item] == record["per_item"] and len(stored.episodes) == 4
    assert stored.settings == {"seed": 1, "greedy": True, "samples": 1, "items": 4}
    analysis = json.loads(_eval(str(run_id), "--team-analysis", "--greedy", "--json").output)
    rows = EvaluationStore(store).list_evaluations(run_id)[1:]
    assert [r.id for r in rows] == analysis["evaluation_ids"] and len({r.analysis for r in rows}) == 1
    assert [r.label for r in rows] == ["trained", "base", "first reset", "second reset"]
    assert all(r.kind == "team_analysis" for r in rows)


def test_queue_sends_the_evaluation_to_the_runs_workers(run_folder, monkeypatch) -> None:
    monkeypatch.setenv("COOPLAB_HOME", str(run_folder / "home-queue"))
    from db.eval_request_store import EvalRequestStore
    from db.evaluation_store import EvaluationStore
    from db.migrate import upgrade
    from jobs.client import get_store
    from jobs.eval_job import execute_evaluation
    from jobs.settings import get_settings

    settings = get_settings()
    upgrade(settings.resolved_database_url)
    store = get_store(settings)
    experiment = store.create_experiment("queued-evals", config=CONFIG)
    run_id = store.create_run(experiment.id, CONFIG, "cpu", total_steps=2).id
    store.update_run(run_id, output_dir=str(run_folder / "run"))
    store.add_checkpoint(run_id, 2, str(run_folder / "run" / "checkpoints" / "checkpoint-2"))
    result = _eval(str(run_id), "--queue", "--greedy", "--items", "2", "--json")
    assert result.exit_code == 0, result.output
    queued = json.loads(result.output)
    assert (queued["status"], queued["run"], queued["checkpoint"], queued["queue"]) == ("queued", run_id, "last", "cpu")
    assert queued["options"]["greedy"] is True and queued["options"]["items"] == 2
    assert execute_evaluation(queued["request"], settings=settings) == "done"  # what a worker does with it
    (stored,) = EvaluationStore(store).list_evaluations(run_id)
    assert EvalRequestStore(store).get(queued["request"]).evaluation_ids == (stored.id,)
    assert stored.checkpoint_step == 2 and stored.settings["items"] == 2
    for args, message in ((["--queue", "--checkpoint", "5"], "run {run} has no checkpoint at that step; it has steps 2"),
                          (["--wait"], "--wait goes with --queue")):
        refused = _eval(str(run_id), *args)
        assert refused.exit_code == EXIT_BAD_INPUT and message.format(run=run_id) in refused.output, refused.output
    refused = _eval(str(run_folder / "run"), "--queue")
    assert refused.exit_code == EXIT_BAD_INPUT and "--queue needs a run id from the database" in refused.output


def test_baselines_play_the_base_models_with_the_same_items_seed_and_samples(run_folder, monkeypatch) -> None:
    """A run's baselines never load its trained checkpoint: each is exactly the engine's evaluation of the
    run config's own (untrained) models under the protocol, all with the items, seed and samples asked."""
    monkeypatch.setenv("COOPLAB_HOME", str(run_folder / "home"))
    result = _eval(str(run_folder / "run"), "--baseline", "parallel,discussion", "--samples", "2", "--items", "2",
                   "--seed", "3", "--json")
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.output.splitlines()]
    assert [r["baseline"] for r in records] == ["parallel", "discussion"]
    for record in records:
        assert (record["checkpoint"], record["checkpoint_step"]) == (None, None)  # not the trained checkpoint-2
        assert record["weights"] == "base models"
        assert (record["items"], record["samples"], record["seed"]) == (2, 2, 3)
        assert {"eval/reward_mean", "eval/pass@1", "eval/pass@2"} <= set(record["standard_errors"])
        base = evaluate_run(parse_run_config(CONFIG), baseline=record["baseline"], items=2, samples=2, seed=3)
        assert (record["metrics"], record["standard_errors"]) == (base.metrics, base.standard_errors)
    text = _eval(str(run_folder / "run"), "--baseline", "pipeline", "--greedy", "--items", "1")
    assert text.exit_code == 0, text.output
    assert ("baseline pipeline (sequential pipeline): cli-eval: base models, split eval, 1 items x 1 sample(s) "
            "(greedy), seed 1") in text.output


@pytest.mark.parametrize("args, message", [
    (["{config}", "--baseline", "single"], "--baseline single: task 'quickstart' has no one-agent form (its team "
                                           "sizes are 2); leave single out of the baselines"),
    (["{run}", "--baseline", "pipeline,single"], "--baseline single: task 'quickstart' has no one-agent form"),
    (["{config}", "--baseline", "debate"], "--baseline 'debate': choose from single, parallel, pipeline, discussion"),
    (["{run}", "--baseline", "pipeline, pipeline"], "--baseline pipeline is given 2 times; name each baseline once"),
    (["{run}", "--baseline", ","], "--baseline ',': name one or more of single, parallel"),
    (["{run}", "--baseline", "parallel", "--checkpoint", "2"], "--checkpoint 2: a baseline plays the run's base "
                                                                 "models, not a checkpoint"),
    (["{run}", "--baseline", "parallel", "--team-analysis"], "the workers evaluate both; add --queue"),
    (["{run}", "--baseline", "parallel", "--transcripts", "x.jsonl"], "--transcripts writes the team's episodes"),
])
def test_bad_baselines_are_one_line_in_the_queues_words(run_folder, monkeypatch, args, message) -> None:
    monkeypatch.setenv("COOPLAB_HOME", str(run_folder / "home"))
    where = {"{run}": [str(run_folder / "run")], "{config}": ["--run-config", str(run_folder / "run.yaml")]}
    refused = _eval(*where[args[0]], *args[1:])
    assert refused.exit_code == EXIT_BAD_INPUT, refused.output
    assert message in refused.output and len(refused.output.strip().splitlines()) == 1, refused.output


def test_queue_with_baselines_stores_them_beside_the_team(run_folder, monkeypatch) -> None:
    """``--queue --baseline a,b`` is the dashboard's Evaluate with baselines: the team at the checkpoint, then
    each baseline of the base models, stored together; the same numbers as the local baseline."""
    monkeypatch.setenv("COOPLAB_HOME", str(run_folder / "home-queue-baselines"))
    from db.eval_request_store import EvalRequestStore
    from db.evaluation_store import EvaluationStore
    from db.migrate import upgrade
    from jobs.client import get_store
    from jobs.eval_job import execute_evaluation
    from jobs.settings import get_settings

    settings = get_settings()
    upgrade(settings.resolved_database_url)
    store = get_store(settings)
    experiment = store.create_experiment("queued-baselines", config=CONFIG)
    run_id = store.create_run(experiment.id, CONFIG, "cpu", total_steps=2).id
    store.update_run(run_id, output_dir=str(run_folder / "run"))
    store.add_checkpoint(run_id, 2, str(run_folder / "run" / "checkpoints" / "checkpoint-2"))
    for args, message in (
            (["--baseline", "pipeline,single"], f"--baseline single for run {run_id}: task 'quickstart' has no "
                                                "one-agent form (its team sizes are 2); leave single out of the baselines"),
            (["--baseline", "parallel,parallel"], "--baseline parallel is given 2 times; name each baseline once"),
            (["--baseline", "debate"], "--baseline 'debate': choose from single, parallel, pipeline, discussion")):
        refused = _eval(str(run_id), "--queue", *args)
        assert refused.exit_code == EXIT_BAD_INPUT and message in refused.output, refused.output
    assert EvalRequestStore(store).list_for_run(run_id) == []  # refused before anything is stored
    result = _eval(str(run_id), "--queue", "--baseline", "parallel,pipeline", "--greedy", "--items", "2", "--json")
    assert result.exit_code == 0, result.output
    queued = json.loads(result.output)
    assert queued["options"]["baselines"] == ["parallel", "pipeline"] and queued["checkpoint"] == "last"
    assert execute_evaluation(queued["request"], settings=settings) == "done"  # what a worker does with it
    team, parallel, pipeline = EvaluationStore(store).list_evaluations(run_id)
    assert (team.kind, team.checkpoint_step) == ("eval", 2)
    assert [(e.kind, e.label, e.checkpoint_step) for e in (parallel, pipeline)] == [
        ("baseline", "parallel", None), ("baseline", "pipeline", None)]
    local = json.loads(_eval(str(run_id), "--baseline", "parallel", "--greedy", "--items", "2", "--json").output)
    assert (dict(parallel.metrics), dict(parallel.standard_errors)) == (local["metrics"], local["standard_errors"])
    assert {k: parallel.settings[k] for k in ("seed", "greedy", "samples", "items")} == dict(team.settings)
