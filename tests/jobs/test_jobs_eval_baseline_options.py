"""An evaluation request's test-time baselines, checked before anything is stored (pure: no database,
no broker): known names once each, kept through the request's JSON, and only those the run's team and
task can play, each refusal naming the baseline, the reason and the fix."""

from __future__ import annotations

import pytest

from engine.schema.eval_baselines import config_unavailable, unavailable_reason
from jobs.eval_queue import EvalOptions, EvalRequestError, baseline_problems, check_options
from jobs.settings import Settings


def _config(task: str = "quickstart", agents: int = 2, **extra: object) -> dict:
    return {"agents": [{"name": f"a{i}"} for i in range(agents)], "task": {"name": task, "params": {}}, **extra}


def test_baselines_go_through_the_requests_json_and_old_requests_have_none() -> None:
    options = check_options(EvalOptions(greedy=True, baselines=("parallel", "discussion")))
    stored = options.to_json()
    assert stored["baselines"] == ["parallel", "discussion"]  # a JSON list in the request's options column
    assert EvalOptions.from_json(stored) == options
    before = {k: v for k, v in stored.items() if k != "baselines"}  # a request queued before baselines existed
    assert EvalOptions.from_json(before).baselines == ()


@pytest.mark.parametrize("baselines, message", [
    (("debate",), "--baseline 'debate': choose from single, parallel, pipeline, discussion"),
    (("pipeline", "pipeline"), "--baseline pipeline is given 2 times; name each baseline once"),
    (("single", 3), "give the baselines as a list of names"),
    ("single", "give the baselines as a list of names"),
])
def test_bad_baseline_names_are_refused_naming_them(baselines, message) -> None:
    with pytest.raises(EvalRequestError) as refused:
        check_options(EvalOptions(baselines=baselines))
    assert message in str(refused.value)


def test_only_the_baselines_a_team_and_task_can_play_are_allowed() -> None:
    settings = Settings()
    # the quick start has no one-agent form; a two-agent team plays the three protocols between agents
    assert baseline_problems(7, _config(), ("parallel", "pipeline", "discussion"), settings) == []
    assert baseline_problems(7, _config(), ("single", "pipeline"), settings) == [
        "--baseline single for run 7: task 'quickstart' has no one-agent form (its team sizes are 2); leave single "
        "out of the baselines"]
    # a coding task plays single; a one-agent team plays nothing between agents
    assert baseline_problems(7, _config("humaneval"), ("single", "parallel"), settings) == []
    assert baseline_problems(7, _config("humaneval", agents=1), ("discussion",), settings) == [
        "--baseline discussion for run 7: a protocol between agents needs a team of two or more; this run has 1 "
        "agent; leave discussion out of the baselines"]
    assert baseline_problems(7, _config("no_such_task"), ("parallel",), settings)[0].startswith(
        "run 7's task does not load here: unknown task 'no_such_task'")
    assert baseline_problems(7, _config("no_such_task"), (), settings) == []  # nothing asked, nothing checked


def test_what_the_form_offers_by_hand() -> None:
    sizes = {"quickstart": (2,), "tldr": (1, 2)}
    assert config_unavailable(_config(), sizes) == {"single": "task 'quickstart' has no one-agent form (its team "
                                                              "sizes are 2)"}
    assert config_unavailable(_config("tldr"), sizes) == {}
    assert set(config_unavailable(_config("tldr", agents=1), sizes)) == {"parallel", "pipeline", "discussion"}
    assert config_unavailable(_config("plugin:make"), sizes) == {}  # sizes not known here: the queue checks
    assert set(config_unavailable(_config(system={"trainers": []}), sizes)) == {
        "single", "parallel", "pipeline", "discussion"}
    assert unavailable_reason("debate", agents=2, task="tldr", team_sizes=(2,)).startswith("unknown baseline")


def test_a_discussion_is_sized_as_two_rounds_against_the_budget() -> None:
    from jobs.eval_queue import budget_problems
    from tests.jobs.helpers import tiny_config

    config = tiny_config()  # two agents, one turn, max_new_tokens 8: 2 items x 1 sample x 2 x 8 = 32 tokens
    settings = Settings(max_tokens_per_step=40)
    team = EvalOptions(items=2, greedy=True, baselines=("parallel", "pipeline"))
    assert budget_problems(7, config, team, settings) == []
    (problem,) = budget_problems(7, config, EvalOptions(items=2, greedy=True, baselines=("discussion",)), settings)
    assert problem.startswith("--items: an evaluation samples up to (2 items x 1 samples x 2 agents x 2 turn(s) x "
                              "8 max_new_tokens) = 64 tokens, over the limit of 40")
    assert problem.endswith("(--baseline discussion samples two rounds; or leave it out)")
