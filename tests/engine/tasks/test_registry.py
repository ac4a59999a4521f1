"""The catalog, parameter validation, team sizes, and user tasks from import paths and entry points."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from engine.tasks import Task, TaskError, build_task, get_task_info, task_catalog

BUILTINS = {"quickstart", "humaneval", "writing", "self_refine", "role_switch"}


def test_importing_the_catalog_loads_neither_torch_nor_datasets():
    code = (
        "import sys\n"
        "from engine.tasks import task_catalog, get_task_info\n"
        "infos = task_catalog()\n"
        "get_task_info('humaneval').param_fields()\n"
        "import engine.tasks.presets\n"
        "print(len(infos), 'torch' in sys.modules, 'datasets' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=".")
    count, torch_loaded, datasets_loaded = out.stdout.split()
    assert int(count) >= len(BUILTINS)
    assert (torch_loaded, datasets_loaded) == ("False", "False")


def test_catalog_describes_every_builtin_for_the_form():
    infos = {info.name: info for info in task_catalog()}
    assert set(infos) >= BUILTINS
    quick = infos["quickstart"]
    assert quick.default_num_agents == 2 and quick.team_sizes == (2,) and quick.max_turns == 1
    assert quick.roles == ("first", "second") and quick.title and quick.description
    assert infos["humaneval"].team_sizes == (1, 2) and infos["humaneval"].supports_multi_turn
    assert infos["self_refine"].default_num_agents == 1
    fields = {row["name"]: row for row in infos["humaneval"].param_fields()}
    assert fields["train_slice"]["default"] == "0:133" and fields["train_slice"]["help"]


def test_invalid_params_name_the_field():
    with pytest.raises(TaskError) as info:
        build_task("quickstart", {"num_items": 0}, 2)
    assert "task 'quickstart'" in str(info.value) and "num_items" in str(info.value)
    with pytest.raises(TaskError, match="num_itemz"):
        build_task("quickstart", {"num_itemz": 3}, 2)
    with pytest.raises(TaskError, match="train_slice"):
        build_task("humaneval", {"train_slice": "abc"}, 2)


def test_team_size_must_fit():
    with pytest.raises(TaskError, match=r"supports teams of 2 agent\(s\), not 3"):
        build_task("quickstart", {}, 3)
    with pytest.raises(TaskError, match="not 2"):
        build_task("self_refine", {}, 2)


def test_unknown_task_lists_the_builtins():
    with pytest.raises(TaskError, match="unknown task 'nope'.*quickstart"):
        build_task("nope", {}, 2)


PLUGIN = textwrap.dedent(
    '''
    from engine.tasks import RewardTerm, RewardTerms, Task


    def echo_task(num_agents: int, word: str = "hi", repeat: int = 2):
        """Each agent should say the word."""
        items = [{"prompt": f"Say {word}"} for _ in range(repeat)]
        def said(agent_completions, batch_items, prompts):
            return [float(all(word in c for c in joint)) for joint in zip(*agent_completions)]
        return Task(
            name="echo",
            roles=[f"agent{i}" for i in range(num_agents)],
            train_dataset=items,
            formatters=[lambda item: item["prompt"]] * num_agents,
            reward_func=RewardTerms(task="echo", terms=[RewardTerm("said", said)]),
        )


    def wrong_type(num_agents: int):
        return {"not": "a task"}


    def crashes(num_agents: int):
        raise RuntimeError("dataset missing")
    '''
)


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    (tmp_path / "my_plugin_tasks.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_plugin_tasks"
    sys.modules.pop("my_plugin_tasks", None)


def test_plugin_factory_from_import_path(plugin_module):
    task = build_task(f"{plugin_module}:echo_task", {"word": "yo", "repeat": 3}, 3)
    assert isinstance(task, Task) and task.num_agents == 3 and len(task.train_dataset) == 3
    totals, terms = task.reward_func.score([["yo!", "no"], ["yo", "yo"], ["yoyo", "yo"]], [{}, {}], None)
    assert totals == [1.0, 0.0] and terms == {"said": [1.0, 0.0]}
    info = get_task_info(f"{plugin_module}:echo_task")
    assert info.description == "Each agent should say the word."
    assert info.default_params() == {"word": "hi", "repeat": 2}
    with pytest.raises(TaskError, match="repeat"):
        build_task(f"{plugin_module}:echo_task", {"repeat": "many"}, 2)
    with pytest.raises(TaskError, match="colour"):
        build_task(f"{plugin_module}:echo_task", {"colour": "red"}, 2)


def test_plugin_errors_are_clear(plugin_module):
    with pytest.raises(TaskError, match="could not import module 'no_such_module_xyz'"):
        build_task("no_such_module_xyz:factory", {}, 2)
    with pytest.raises(TaskError, match="has no attribute 'missing'"):
        build_task(f"{plugin_module}:missing", {}, 2)
    with pytest.raises(TaskError, match="returned dict, expected engine.tasks.Task"):
        build_task(f"{plugin_module}:wrong_type", {}, 2)
    with pytest.raises(TaskError, match="building it failed: RuntimeError: dataset missing"):
        build_task(f"{plugin_module}:crashes", {}, 2)
    with pytest.raises(TaskError, match="package.module:factory"):
        build_task(":nothing", {}, 2)


def test_entry_point_group_registers_user_tasks(plugin_module, tmp_path, monkeypatch):
    dist = tmp_path / "my_plugin_tasks-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-plugin-tasks\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[cooplab.tasks]\necho = {plugin_module}:echo_task\nbroken = no_such_plugin_module:factory\n"
    )
    task = build_task("echo", {"word": "hey"}, 2)
    assert task.name == "echo" and task.train_dataset[0]["prompt"] == "Say hey"
    names = {info.name for info in task_catalog()}
    assert "echo" in names and "broken" not in names and "quickstart" in names  # a broken plugin is skipped
    with pytest.raises(TaskError, match="entry point 'no_such_plugin_module:factory' failed to import"):
        build_task("broken", {}, 2)
