"""Cooperative HumanEval: code analysis, the tiered reward by hand, sandboxed tests, feedback, pass@k."""

from __future__ import annotations

import pytest

from engine.tasks import build_task
from engine.tasks.humaneval.code import analyze, assemble_program, extract_code
from engine.tasks.humaneval.problems import load_problems, split_tests
from engine.tasks.humaneval.reward import tiered_terms

HELPER = (
    "def aux(numbers, threshold):\n"
    "    for i, a in enumerate(numbers):\n"
    "        for j, b in enumerate(numbers):\n"
    "            if i != j and abs(a - b) < threshold:\n"
    "                return True\n"
    "    return False\n"
)
MAIN_USES_HELPER = (
    "```python\ndef has_close_elements(numbers, threshold):\n"
    "    found = aux(sorted(numbers), threshold)\n    return bool(found)\n```"
)
MAIN_WRONG = "def has_close_elements(numbers, threshold):\n    return False\n"
MAIN_HANGS = "def has_close_elements(numbers, threshold):\n    while True:\n        pass\n    return True\n"


@pytest.fixture(scope="module")
def team_task():
    return build_task("humaneval", {"train_slice": "0:4", "eval_slice": "4:6", "workers": 2,
                                    "sandbox_timeout_s": 2, "step_timeout_s": 1}, 2)


def test_problems_ship_offline_and_tests_split_into_checks():
    problems = load_problems()
    assert len(problems) == 164
    plan = split_tests(problems[0]["test"])
    assert plan.num_tests == 7 and "METADATA" in plan.preamble
    plan32 = split_tests(problems[32]["test"])  # imports and a loop with asserts inside check()
    assert [kind for kind, _ in plan32.steps][:2] == ["setup", "setup"] and plan32.num_tests == 1


def test_extract_and_assemble():
    assert extract_code("Here:\n```python\nx = 1\n```\nDone") == "x = 1\n"
    assert extract_code("y = 2") == "y = 2\n"
    stub = 'def f(x):\n    """doc"""\n'
    # a bare body continues the prompt's stub
    program = assemble_program(stub, "", "    return x + 1\n", "f")
    assert program.count("def f(x):") == 2 and program.rstrip().endswith("return x + 1")


@pytest.mark.parametrize(
    ("helper", "main", "expected"),
    [
        # helper defined + main defined, both return; main calls helper and does more than wrap it
        (HELPER, "def f(x):\n    y = aux(x)\n    return y + 1\n", dict(calls_helper=True, trivial_wrapper=False)),
        ("", "def f(x):\n    return aux(x)\n", dict(helper_defined=False, trivial_wrapper=True)),
        (HELPER, "def f(x):\n    aux(x)\n    return 1\n", dict(helper_result_ignored=True)),
        # a program that does not parse defines nothing (no structure credit for text that looks like code)
        (HELPER, "def f(x):\n    return (\n", dict(syntax_ok=False, main_defined=False, main_returns=False,
                                                    helper_defined=False)),
        (HELPER, "", dict(main_defined=False)),
    ],
)
def test_code_facts(helper, main, expected):
    program = assemble_program('def f(x):\n    """doc"""\n', helper, main, "f")
    facts = analyze(helper, main, program, "f")
    for name, value in expected.items():
        assert getattr(facts, name) == value, name


def test_tiered_reward_by_hand():
    program = assemble_program("", HELPER, "def f(x):\n    y = aux(x)\n    return y\n", "f")
    good = analyze(HELPER, "def f(x):\n    y = aux(x)\n    return y\n", program, "f")
    # structure 0.4 + 0.6, syntax 0.5, tests 0.5, cooperation 0.5 + 0.5
    assert tiered_terms(good, 0.5, team=True) == {"structure": 1.0, "syntax": 0.5, "tests": 0.5, "cooperation": 1.0}
    # no test passes: no cooperation bonus
    assert tiered_terms(good, 0.0, team=True)["cooperation"] == 0.0
    broken = analyze(HELPER, "def f(x):\n    return (\n", assemble_program("", HELPER, "def f(x):\n    return (\n", "f"), "f")
    assert tiered_terms(broken, 1.0, team=True) == {"structure": 0.0, "syntax": 0.0, "tests": 0.0, "cooperation": 0.0}
    single = tiered_terms(good, 1.0, team=False)
    assert single == {"structure": 1.0, "syntax": 0.5, "tests": 1.0}


def test_reward_runs_tests_in_the_sandbox(team_task):
    item = team_task.train_dataset[0]
    totals, terms = team_task.reward_func.score(
        [[HELPER, HELPER, HELPER, ""], [MAIN_USES_HELPER, MAIN_WRONG, MAIN_HANGS, MAIN_USES_HELPER]], [item] * 4, None
    )
    assert terms["tests"][0] == 1.0 and terms["cooperation"][0] == 1.0 and totals[0] == 3.5
    assert terms["tests"][1] == pytest.approx(3 / 7)  # "return False" passes the 3 negative checks
    assert terms["cooperation"][1] == 0.0
    assert terms["tests"][2] == 0.0 and terms["syntax"][2] == 0.5  # the hanging program is cut off
    assert terms["structure"][3] == 0.6 and terms["tests"][3] == 0.0  # calls a helper nobody wrote
    assert team_task.reward_func.term_names == ["structure", "syntax", "tests", "cooperation"]


def test_multi_turn_feedback_reports_test_results(team_task):
    item = team_task.train_dataset[0]
    prompts = team_task.external_transition(
        prompt=item["prompt"], agent_completions=[HELPER, MAIN_WRONG], num_agents=2,
        prompt_history_per_agent=[["p"], ["p"]], response_history_per_agent=[[HELPER], [MAIN_WRONG]],
    )
    assert len(prompts) == 2
    assert "Tests: 3/7 passed." in prompts[1] and "First failing check: assert candidate" in prompts[1]
    assert "does not call the helper `aux`" in prompts[1]
    assert prompts[0].startswith("Write one Python helper function named `aux`")
    # the formatter passes a later turn's prompt through unchanged
    assert team_task.formatters[1](item, external_prompts=prompts[1]) == prompts[1]


def test_check_and_eval_logger(team_task):
    item = team_task.train_dataset[0]
    assert team_task.check(item, [HELPER, MAIN_USES_HELPER]) is True
    assert team_task.check(item, [HELPER, MAIN_WRONG]) is False
    rows = team_task.eval_logger(
        agent_completions_turns=[[[HELPER, HELPER]], [[MAIN_WRONG, MAIN_USES_HELPER]]], batch_items=[item]
    )
    assert rows == [{"turn_1/tests_passed": pytest.approx(3 / 7), "turn_1/solved": 0.0,
                     "turn_2/tests_passed": 1.0, "turn_2/solved": 1.0}]
    assert team_task.eval_aggregator(rows + [{"turn_1/solved": 1.0}], num_turns=2)["turn_1/solved"] == 0.5


def test_single_agent_variant_scores_the_canonical_solution():
    task = build_task("humaneval", {"train_slice": "10:12", "eval_slice": "12:13", "workers": 2}, 1)
    assert task.roles == ["coder"] and len(task.formatters) == 1
    items = [task.train_dataset[0], task.train_dataset[1]]
    canonical = {p["task_id"]: p["canonical_solution"] for p in load_problems()}
    answers = [canonical[item["task_id"]] for item in items]  # bodies that continue the prompt's stub
    totals, terms = task.reward_func.score([answers], items, None)
    assert terms["tests"] == [1.0, 1.0] and totals == [2.5, 2.5]
    assert "cooperation" not in terms


def test_a_program_that_stops_answering_keeps_the_checks_it_passed():
    from engine.sandbox import SandboxPool
    from engine.tasks.humaneval.execution import default_limits
    from engine.tasks.humaneval.scoring import CodeScorer

    item = {
        "prompt": 'def f(x):\n    """Add one."""\n',
        "entry_point": "f",
        "test": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n"
        "    assert candidate(10 ** 6) == 10 ** 6 + 1\n",
    }
    # the third check runs a long C-level loop that the candidate's own alarm cannot interrupt:
    # the judge stops waiting at the step's limit
    slow = "def f(x):\n    if x > 100:\n        sum(range(10 ** 13))\n    return x + 1\n"
    with SandboxPool(1, limits=default_limits(4.0)) as pool:
        evaluation = CodeScorer(pool, team=False, step_timeout_s=0.5).evaluate(item, [slow])
        assert (evaluation.outcome.passed, evaluation.outcome.total) == (2, 3)
        assert "did not answer within the time limit" in evaluation.outcome.first_failure
        assert not evaluation.solved
        # with a wall clock shorter than the step limit, the run is cut off and keeps its credit
        evaluation = CodeScorer(pool, team=False, step_timeout_s=30).evaluate(item, [slow + "\n# again\n"])
    assert (evaluation.outcome.passed, evaluation.outcome.total) == (2, 3)
    assert "wall-clock limit" in evaluation.outcome.error


def test_model_code_compile_warnings_stay_off_the_console():
    import warnings

    main = 'def f(x):\n    if x is 1:\n        return "\\d"\n    return aux(x)\n'
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        facts = analyze(HELPER, main, assemble_program("", HELPER, main, "f"), "f")
    assert facts.main_defined and not [w for w in caught if issubclass(w.category, SyntaxWarning | DeprecationWarning)]
