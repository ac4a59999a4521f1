"""CoMLRL's level reward and feedback modes on fixture problems, with the tests run in the sandbox:
real, garbage and adversarial answers against hand-computed values."""

from __future__ import annotations

import os

import pytest

from engine.tasks import build_task
from tests.engine.tasks.comlrl_fixtures import code_file

HELPER = "def aux(numbers):\n    return sum(numbers)\n"
GOOD = "def add_all_0(numbers):\n    total = aux(numbers)\n    return total + 0\n"
WRAPPER = "def add_all_0(numbers):\n    return aux(numbers)\n"
HALF = "def add_all_0(numbers):\n    return 3\n"  # passes assert candidate([1, 2]) == 3 only
IGNORES = "def add_all_0(numbers):\n    aux(numbers)\n    return sum(numbers)\n"
GARBAGE = "return return return ((("
ESCAPE = "def add_all_0(numbers):\n    import os\n    os.system('touch /tmp/escaped')\n    return sum(numbers)\n"
HANGS = "def add_all_0(numbers):\n    while True:\n        pass\n    return 0\n"
SETTINGS = {"train_slice": "0:4", "eval_slice": "4:6", "workers": 2, "sandbox_timeout_s": 2, "step_timeout_s": 1}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return code_file(tmp_path_factory.mktemp("code"), 6)


def task_with(files, **params):
    return build_task("coop_humaneval", {"dataset": files, **SETTINGS, **params}, 2)


def test_level_reward_through_the_sandbox(files):
    task = task_with(files)
    item = task.train_dataset[0]
    answers = [(HELPER, GOOD), (HELPER, WRAPPER), (HELPER, HALF), (HELPER, IGNORES), (GARBAGE, GARBAGE),
               (HELPER, ESCAPE), (HELPER, HANGS)]
    totals, terms = task.reward_func.score([[a for a, _ in answers], [b for _, b in answers]], [item] * len(answers),
                                           None)
    assert totals[0] == 4.0  # 1.0 + 0.5 + 1.0 + 1.5
    assert totals[1] == 3.0  # a wrapper: the call bonus only
    assert terms["tests"][2] == 0.5 and terms["cooperation"][2] == 0.0 and totals[2] == 2.0
    assert terms["cooperation"][3] == 1.0 and totals[3] == 3.5  # +0.5 +1.0 -0.5
    assert totals[4] == 0.0  # garbage earns nothing
    assert terms["syntax"][5] == 0.5 and not os.path.exists("/tmp/escaped")  # nothing reaches the host
    assert terms["tests"][6] == 0.0 and terms["structure"][6] == 1.0  # cut off by the clock
    assert task.check(item, [HELPER, GOOD]) is True and task.check(item, [HELPER, HALF]) is False


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("level_feedback", ["Tests: 1/2 passed.", "First failing check"]),
        ("level_passed", ["Main `add_all_0` defined and returns a value: yes", "All tests pass: no"]),
        ("passed", ["Not all tests passed."]),
        ("plain", ["Check your answer for mistakes"]),
    ],
)
def test_feedback_modes(files, mode, expected):
    task = task_with(files, feedback_mode=mode)
    item = task.train_dataset[0]
    prompts = task.external_transition(prompt=item["prompt"], agent_completions=[HELPER, HALF], num_agents=2,
                                       prompt_history_per_agent=[["p"], ["p"]],
                                       response_history_per_agent=[[HELPER], [HALF]])
    for fragment in expected:
        assert fragment in prompts[1], (mode, prompts[1])
    if mode != "level_feedback":
        assert "Tests: 1/2" not in prompts[1]
