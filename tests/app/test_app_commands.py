"""The dashboard changes state only through its command helpers (``app.commands``, and ``app.control``
for run control): pages and components describe the UI and call them. The helpers themselves, on a
real store."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from app import commands
from db.errors import DuplicateNameError, RunActiveError
from db.eval_request_store import EvalRequestStore
from db.evaluation_store import EvaluationStore
from db.store import Store
from db.study_store import StudyStore
from jobs.study_space import generate, parse_space
from tests.app.conftest import add_run

APP = Path(__file__).resolve().parents[2] / "app"
WRITE_PREFIXES = ("add_", "claim_", "clone_", "create_", "delete_", "get_or_create_", "heartbeat", "import_",
                  "log_", "mark_", "reap_", "release_", "request_", "set_", "stop_early", "transition", "update_",
                  "upsert_", "save_", "forget_")
JOB_ACTIONS = {"create_study", "schedule_study", "stop_study", "resume_study", "queue_evaluation", "submit_run",
               "stop_run", "resume_run", "cancel_queued"}
HELPERS = {"commands", "control"}


def _store_writes() -> set[str]:
    methods = {name for cls in (Store, StudyStore, EvaluationStore, EvalRequestStore) for name in dir(cls)
               if not name.startswith("_")}
    return {name for name in methods if name.startswith(WRITE_PREFIXES)}


def _direct_writes(path: Path, writes: set[str]) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name) and func.value.id in HELPERS):
            name = func.attr
        elif isinstance(func, ast.Name):
            name = func.id
        else:
            continue
        if (name in writes and isinstance(func, ast.Attribute)) or name in JOB_ACTIONS:
            found.append(f"{path.relative_to(APP.parent)}:{node.lineno} {name}")
    return found


def test_pages_and_components_write_only_through_the_command_helpers() -> None:
    writes = _store_writes()
    assert {"create_experiment", "update_experiment", "delete_run", "set_run_notes", "create_study",
            "reap_stale", "save_view", "forget_view"} <= writes
    files = sorted([*(APP / "app_pages").glob("*.py"), *(APP / "components").glob("*.py")])
    assert len(files) > 15
    assert [hit for path in files for hit in _direct_writes(path, writes)] == []


def test_pages_are_functions_with_one_call_at_module_level() -> None:
    for page in sorted((APP / "app_pages").glob("*.py")):
        tree = ast.parse(page.read_text(encoding="utf-8"))
        script = [node for node in tree.body[1:]
                  if not isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.ClassDef)
                  and not (isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id.isupper()
                                                                 for t in node.targets))]
        assert len(script) == 1 and isinstance(script[0], ast.Expr) and isinstance(script[0].value, ast.Call), page


def test_save_creates_then_updates_and_refuses_a_taken_name(store: Store, make_config) -> None:
    created = commands.save_experiment(store, None, {**make_config("first"), "description": "d", "tags": ["a"]})
    assert (created.name, created.description, created.tags) == ("first", "d", ("a",))
    updated = commands.save_experiment(store, created.id, {**make_config("renamed"), "description": "", "tags": []})
    assert updated.id == created.id and updated.name == "renamed" and updated.tags == ()
    commands.create_experiment(store, make_config("other"))
    with pytest.raises(DuplicateNameError):
        commands.save_experiment(store, created.id, {**make_config("other"), "description": "", "tags": []})
    clone = commands.clone_experiment(store, created.id, "renamed-copy")
    assert clone.config == {**store.get_experiment(created.id).config, "name": "renamed-copy"}


def test_run_notes_and_deletion(store: Store, experiment: int) -> None:
    run_id = add_run(store, experiment, status="running")
    run = commands.set_run_notes(store, run_id, tags=" a, b,, c ", notes="**why**")
    assert run.tags == ("a", "b", "c") and run.notes == "**why**"
    with pytest.raises(RunActiveError):
        commands.delete_run(store, run_id)
    with pytest.raises(RunActiveError):
        commands.delete_experiment(store, experiment)
    done = add_run(store, experiment, status="succeeded")
    commands.delete_run(store, done)
    assert [r.id for r in store.list_runs(experiment)] == [run_id]


def test_promoting_a_point_twice_opens_the_same_experiment(store: Store, make_config) -> None:
    base = make_config()
    space = {"trainer.agent_learning_rate": [0.001, 0.01]}
    study = StudyStore(store).create_study("lr", {"base": base, "space": space}, generate(base, parse_space(space)),
                                           max_concurrent=1)
    first = commands.promote_point(store, study, 1, {"trainer.agent_learning_rate": 0.01})
    again = commands.promote_point(store, study, 1, {"trainer.agent_learning_rate": 0.01})
    assert again.id == first.id and first.name == "lr: point 1" and first.tags == ("promoted",)
    assert first.config["trainer"]["agent_learning_rate"] == 0.01 and first.config["name"] == "lr: point 1"
