"""CoMLRL's coding benchmarks without running code: the level reward by hand, data, slices, settings."""

from __future__ import annotations

import pytest

from engine.tasks import TaskError, build_task
from engine.tasks.humaneval.code import analyze, assemble_program, part_facts
from engine.tasks.humaneval.reward import MAX_LEVEL_REWARD, level_terms
from tests.engine.tasks.comlrl_fixtures import code_file, write_jsonl

PROMPT = 'def f(x):\n    """doc"""\n'
HELPER = "def aux(x):\n    return x * 2\n"


def levels(helper: str, main: str, fraction: float, team: bool = True) -> dict[str, float]:
    program = assemble_program(PROMPT, helper, main, "f")
    facts = analyze(helper, main, program, "f")
    return level_terms(part_facts(helper, main, PROMPT, "f"), facts, fraction, team=team)


def test_the_level_reward_by_hand():
    assert MAX_LEVEL_REWARD == 4.0
    full = levels(HELPER, "def f(x):\n    y = aux(x)\n    return y + 1\n", 1.0)
    # 0.4 + 0.6 structure, 0.5 syntax, 1.0 tests, 0.5 calls + 1.0 not a wrapper
    assert full == {"structure": 1.0, "syntax": 0.5, "tests": 1.0, "cooperation": 1.5}
    assert sum(full.values()) == MAX_LEVEL_REWARD
    # CoMLRL's two wrapper forms earn the call bonus only
    assert levels(HELPER, "def f(x):\n    return aux(x)\n", 0.5)["cooperation"] == 0.5
    assert levels(HELPER, "def f(x):\n    y = aux(x)\n    return y\n", 0.5)["cooperation"] == 0.5
    # a call whose value is ignored: +0.5 +1.0 -0.5
    assert levels(HELPER, "def f(x):\n    aux(x)\n    return x\n", 0.5)["cooperation"] == 1.0
    # no passing test, or no helper: no bonus
    assert levels(HELPER, "def f(x):\n    y = aux(x)\n    return y + 1\n", 0.0)["cooperation"] == 0.0
    assert levels("", "def f(x):\n    y = aux(x)\n    return y + 1\n", 1.0) == {
        "structure": 0.6, "syntax": 0.5, "tests": 1.0, "cooperation": 0.0}


def test_structure_is_read_per_part_and_gates_the_rest():
    # the helper part is fine but the main part does not parse: helper's 0.4 only, the ladder stops
    assert levels(HELPER, "def f(x):\n    return (\n", 1.0) == {
        "structure": 0.4, "syntax": 0.0, "tests": 0.0, "cooperation": 0.0}
    # main that never returns: no main share, nothing above it
    assert levels(HELPER, "def f(x):\n    print(x)\n", 1.0)["syntax"] == 0.0
    # a body that continues the prompt's stub counts as main
    assert levels(HELPER, "    return aux(x) + 1\n", 1.0, team=True)["structure"] == 1.0
    # one agent: main alone is the whole structure level, no cooperation term
    assert levels("", "def f(x):\n    return x\n", 1.0, team=False) == {"structure": 1.0, "syntax": 0.5,
                                                                        "tests": 1.0}


def test_coop_humaneval_reads_a_local_file_and_holds_out_a_slice(tmp_path):
    path = code_file(tmp_path, 6)
    task = build_task("coop_humaneval", {"dataset": path, "train_slice": "2:", "eval_slice": "0:2", "workers": 1}, 2)
    assert [row["task_id"] for row in task.eval_dataset] == ["Fixture/0", "Fixture/1"]
    assert len(task.train_dataset) == 4 and task.roles == ["helper", "main"]
    assert task.reward_func.term_names == ["structure", "syntax", "tests", "cooperation"]
    assert task.extras["scorer"].reward == "level" and task.extras["feedback_mode"] == "level_feedback"
    single = build_task("mbpp", {"dataset": path, "train_slice": "1:", "eval_slice": "0:1", "workers": 1}, 1)
    assert single.roles == ["coder"] and len(single.train_dataset) == 5


def test_overlapping_slices_missing_columns_and_unknown_modes_are_refused(tmp_path):
    path = code_file(tmp_path, 6)
    with pytest.raises(TaskError, match="share 2 problem"):
        build_task("coop_humaneval", {"dataset": path, "train_slice": "0:", "eval_slice": "0:2"}, 2)
    with pytest.raises(TaskError, match="0 <= start < end <= 6"):
        build_task("mbpp", {"dataset": path, "train_slice": "0:4", "eval_slice": "4:9"}, 2)
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"prompt": "def g():\n", "test": "def check(c):\n    pass\n"}])
    with pytest.raises(TaskError, match="lacks the column"):
        build_task("mbpp", {"dataset": bad}, 2)
    with pytest.raises(TaskError, match="expert_edits"):
        build_task("coop_humaneval", {"dataset": path, "feedback_mode": "expert_edits"}, 2)
    with pytest.raises(TaskError, match="feedback is off"):
        build_task("humaneval", {"feedback": False, "feedback_mode": "passed"}, 2)


def test_humaneval_keeps_its_tiered_reward_and_offers_the_level_variant():
    tiered = build_task("humaneval", {"train_slice": "0:2", "eval_slice": "2:3", "workers": 1}, 2)
    level = build_task("humaneval", {"train_slice": "0:2", "eval_slice": "2:3", "workers": 1, "reward": "level"}, 2)
    assert tiered.extras["scorer"].reward == "tiered" and level.extras["scorer"].reward == "level"
    assert tiered.reward_func.term_names == level.reward_func.term_names
