"""The catalog, parameter validation, team sizes, and user tasks from import paths and entry points;
a config names code only from the built-ins, the entry points and the operator's module allowlist."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from engine.permissions.operator import OperatorPermissions
from engine.permissions.task_modules import import_path_problem, module_allowed, normalise_modules
from engine.schema.run_config import ConfigError, parse_run_config
from engine.schema.task_table import BUILTIN_TASKS
from engine.tasks import Task, TaskError, build_task, check_task_name, get_task_info, task_catalog
from engine.tasks.builtin import BUILDERS
from tests.engine.tasks.comlrl_fixtures import code_file, writing_files

BUILTINS = {"quickstart", "humaneval", "writing", "self_refine", "role_switch", "coop_humaneval", "mbpp", "tldr", "arxiv"}


def test_importing_the_catalog_loads_neither_torch_nor_datasets():
    """The dashboard reads the catalog and the presets from the schema; importing ``engine.tasks``
    (for ``build_task``) stays light too until a task is built."""
    code = (
        "import sys\n"
        "from engine.schema.task_registry import task_catalog, get_task_info\n"
        "infos = task_catalog()\n"
        "get_task_info('humaneval').default_params()\n"
        "import engine.schema.presets\n"
        "import engine.tasks\n"
        "print(len(infos), 'torch' in sys.modules, 'datasets' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=".")
    count, torch_loaded, datasets_loaded = out.stdout.split()
    assert int(count) >= len(BUILTINS)
    assert (torch_loaded, datasets_loaded) == ("False", "False")


def test_the_builtin_table_and_its_builders_name_the_same_tasks(tmp_path):
    """Each row of the torch-free table has a builder, each builder a row, and each row is one
    ``register_task`` would accept (its default team among its team sizes)."""
    assert [row.name for row in BUILTIN_TASKS] == list(BUILDERS)
    assert {row.name for row in BUILTIN_TASKS} == BUILTINS
    problems = code_file(tmp_path, 70)  # CoMLRL's default slices reach problem 65 (MBPP)
    data = {"coop_humaneval": {"dataset": problems}, "mbpp": {"dataset": problems}}
    train, held_out = writing_files(tmp_path)
    data["tldr"] = data["arxiv"] = {"dataset": train, "eval_dataset": held_out, "text_column": "prompt"}
    for row in BUILTIN_TASKS:
        assert row.factory is None and row.default_num_agents in row.team_sizes
        assert len(row.roles) == max(row.team_sizes) and row.title and row.description
        task = build_task(row.name, data.get(row.name, {}), row.default_num_agents)  # CoMLRL's data: fixture files
        assert task.name == row.name and task.roles == list(row.roles[: row.default_num_agents])


def test_catalog_describes_every_builtin_for_the_form():
    infos = {info.name: info for info in task_catalog()}
    assert set(infos) >= BUILTINS
    quick = infos["quickstart"]
    assert quick.default_num_agents == 2 and quick.team_sizes == (2,) and quick.max_turns == 1
    assert quick.roles == ("first", "second") and quick.title and quick.description
    assert infos["humaneval"].team_sizes == (1, 2) and infos["humaneval"].max_turns != 1
    assert infos["self_refine"].default_num_agents == 1
    train_slice = infos["humaneval"].params_model.model_fields["train_slice"]
    assert train_slice.default == "0:133" and train_slice.description


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
    allowed = OperatorPermissions(task_modules=[plugin_module])
    task = build_task(f"{plugin_module}:echo_task", {"word": "yo", "repeat": 3}, 3, permissions=allowed)
    assert isinstance(task, Task) and task.num_agents == 3 and len(task.train_dataset) == 3
    totals, terms = task.reward_func.score([["yo!", "no"], ["yo", "yo"], ["yoyo", "yo"]], [{}, {}], None)
    assert totals == [1.0, 0.0] and terms == {"said": [1.0, 0.0]}
    info = get_task_info(f"{plugin_module}:echo_task", allowed.task_modules)
    assert info.description == "Each agent should say the word."
    assert info.default_params() == {"word": "hi", "repeat": 2}
    with pytest.raises(TaskError, match="repeat"):
        build_task(f"{plugin_module}:echo_task", {"repeat": "many"}, 2, permissions=allowed)
    with pytest.raises(TaskError, match="colour"):
        build_task(f"{plugin_module}:echo_task", {"colour": "red"}, 2, permissions=allowed)


def test_plugin_errors_are_clear(plugin_module):
    allowed = OperatorPermissions(task_modules=[plugin_module, "no_such_module_xyz"])
    with pytest.raises(TaskError, match="could not import module 'no_such_module_xyz'"):
        build_task("no_such_module_xyz:factory", {}, 2, permissions=allowed)
    with pytest.raises(TaskError, match="has no attribute 'missing'"):
        build_task(f"{plugin_module}:missing", {}, 2, permissions=allowed)
    with pytest.raises(TaskError, match="returned dict, expected engine.tasks.Task"):
        build_task(f"{plugin_module}:wrong_type", {}, 2, permissions=allowed)
    with pytest.raises(TaskError, match="building it failed: RuntimeError: dataset missing"):
        build_task(f"{plugin_module}:crashes", {}, 2, permissions=allowed)
    with pytest.raises(TaskError, match="package.module:factory"):
        build_task(":nothing", {}, 2, permissions=allowed)
    with pytest.raises(TaskError, match="'_hidden' is a private or dunder attribute"):
        build_task(f"{plugin_module}:_hidden", {}, 2, permissions=allowed)
    with pytest.raises(TaskError, match="'__globals__'"):
        build_task(f"{plugin_module}:echo_task.__globals__", {}, 2, permissions=allowed)


def test_entry_point_group_registers_user_tasks(plugin_module, tmp_path, monkeypatch):
    """Installed entry points are allowed without the module allowlist (installing is the operator's act)."""
    dist = tmp_path / "my_plugin_tasks-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-plugin-tasks\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[cooplab.tasks]\necho = {plugin_module}:echo_task\nbroken = no_such_plugin_module:factory\n"
    )
    task = build_task("echo", {"word": "hey"}, 2)
    check_task_name("echo")
    with pytest.raises(TaskError, match=f"module '{plugin_module}' is not on the task module allowlist"):
        check_task_name(f"{plugin_module}:echo_task")  # the entry point, not its module, is allowed
    assert task.name == "echo" and task.train_dataset[0]["prompt"] == "Say hey"
    names = {info.name for info in task_catalog()}
    assert "echo" in names and "broken" not in names and "quickstart" in names  # a broken plugin is skipped
    with pytest.raises(TaskError, match="entry point 'no_such_plugin_module:factory' failed to import"):
        build_task("broken", {}, 2)


def test_allowlist_matches_exact_modules_and_dotted_prefixes():
    assert normalise_modules(" mylab.tasks, otherpkg,,mylab.tasks ") == ("mylab.tasks", "otherpkg")
    allowed = ("mylab.tasks", "otherpkg")
    assert module_allowed("mylab.tasks", allowed) and module_allowed("mylab.tasks.coding", allowed)
    assert module_allowed("otherpkg.deep.module", allowed)
    assert not module_allowed("mylab.tasksevil", allowed) and not module_allowed("mylab", allowed)
    assert not module_allowed("otherpkg2", allowed) and not module_allowed("os", allowed)
    assert import_path_problem("mylab.tasks.coding:factory", allowed) is None
    assert "not on the task module allowlist" in import_path_problem("mylab.tasksevil:x", allowed)
    assert "private or dunder" in import_path_problem("mylab.tasks:_make", allowed)
    assert "dunder module" in import_path_problem("mylab.tasks.__main__:x", allowed)
    assert "must look like" in import_path_problem("mylab.tasks:", allowed)
    assert "must look like" in import_path_problem("../mylab:x", allowed)
    for bad in ("mylab.tasks:factory", "my lab", "mylab.*", "/opt/mylab"):
        with pytest.raises(ValueError, match="is not a module name"):
            normalise_modules([bad])


MARKER_MODULE = """
import pathlib
pathlib.Path({marker!r}).write_text("imported")


def factory(num_agents: int):
    raise RuntimeError("never called")
"""


def test_a_task_off_the_allowlist_is_refused_before_anything_is_imported(tmp_path, monkeypatch):
    marker = tmp_path / "imported.txt"
    (tmp_path / "marker_tasks.py").write_text(MARKER_MODULE.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(tmp_path))
    shell_marker = tmp_path / "shell-ran.txt"
    operator = OperatorPermissions(task_modules=["mylab.tasks"])
    for name in ("marker_tasks:factory", "os:system"):
        config = {"agents": [{"name": "a"}, {"name": "b"}],
                  "task": {"name": name, "params": {"command": f"touch {shell_marker}"}}}
        with pytest.raises(ConfigError) as info:
            parse_run_config(config, task_modules=operator.task_modules)
        message = str(info.value)
        module = name.split(":")[0]
        assert message.startswith(f"task.name: task {name!r} is not allowed: module {module!r} is not on the task "
                                  "module allowlist"), message
        for allowed in ("quickstart", "humaneval", "entry points of the 'cooplab.tasks' group",
                        "allowed: mylab.tasks", "COOPLAB_TASK_MODULES"):
            assert allowed in message, (allowed, message)
        with pytest.raises(TaskError, match="is not allowed"):
            get_task_info(name, operator.task_modules)
        with pytest.raises(TaskError, match="is not allowed"):
            build_task(name, {"command": f"touch {shell_marker}"}, 2, permissions=operator)
    assert not marker.exists() and "marker_tasks" not in sys.modules
    assert not shell_marker.exists()
    try:  # the same module, allowed by the operator: imported on use
        assert get_task_info("marker_tasks:factory", ("marker_tasks",)).name == "marker_tasks:factory"
        assert marker.read_text() == "imported"
    finally:
        sys.modules.pop("marker_tasks", None)


def test_an_allowed_package_prefix_admits_its_submodules_only(tmp_path, monkeypatch):
    package = tmp_path / "mylab_pkg"
    (package / "tasks").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tasks" / "__init__.py").write_text("")
    (package / "tasks" / "coding.py").write_text(PLUGIN)
    evil_marker = tmp_path / "evil.txt"
    (package / "tasksevil.py").write_text(MARKER_MODULE.format(marker=str(evil_marker)))
    monkeypatch.syspath_prepend(str(tmp_path))
    allowed = OperatorPermissions(task_modules=["mylab_pkg.tasks"])
    try:
        task = build_task("mylab_pkg.tasks.coding:echo_task", {"word": "ok"}, 2, permissions=allowed)
        assert task.train_dataset[0]["prompt"] == "Say ok"
        assert parse_run_config({"agents": [{"name": "a"}, {"name": "b"}],
                                 "task": {"name": "mylab_pkg.tasks.coding:echo_task"}},
                                task_modules=allowed.task_modules).task.name
        with pytest.raises(TaskError, match="module 'mylab_pkg.tasksevil' is not on the task module allowlist"):
            build_task("mylab_pkg.tasksevil:factory", {}, 2, permissions=allowed)
        assert not evil_marker.exists()
    finally:
        for name in [m for m in sys.modules if m.startswith("mylab_pkg")]:
            sys.modules.pop(name)


def test_unknown_task_names_are_refused_at_parse_time_with_the_allowed_names():
    with pytest.raises(ConfigError, match=r"task.name: unknown task 'nope'; a config may name a registered task "
                                          r"\((?P<names>[a-z_, ]+)\)") as refused:
        parse_run_config({"agents": [{"name": "a"}], "task": {"name": "nope"}})
    listed = re.search(r"a registered task \(([a-z_, ]+)\)", str(refused.value)).group(1).split(", ")
    assert listed == sorted(listed) and set(listed) >= BUILTINS, listed  # tasks other tests registered may be listed too


def test_an_allowed_module_cannot_lend_what_it_imported(tmp_path, monkeypatch):
    (tmp_path / "lender_tasks.py").write_text("import os\nimport subprocess\nfrom subprocess import run\n"
                                              "from os import system as shell\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    marker = tmp_path / "ran"
    allowed = OperatorPermissions(task_modules=["lender_tasks"])
    try:
        for name, params in [("lender_tasks:os.system", {"command": f"touch {marker}"}),
                             ("lender_tasks:shell", {"command": f"touch {marker}"}),
                             ("lender_tasks:run", {"args": f"touch {marker}", "shell": True}),
                             ("lender_tasks:subprocess.run", {"args": f"touch {marker}", "shell": True})]:
            with pytest.raises(TaskError, match=rf"task '{name}' is not allowed: it (resolves to .* from|reaches) "
                                                r"module '(os|posix|subprocess)', which is not on the task module "
                                                r"allowlist"):
                build_task(name, params, 2, permissions=allowed)
        assert not marker.exists()
    finally:
        sys.modules.pop("lender_tasks", None)
