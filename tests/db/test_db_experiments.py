"""Experiments: create, read, search, tags, update, clone, delete (with its runs)."""

from __future__ import annotations

import pytest

from db.errors import StaleEditError
from db.store import DuplicateNameError, NotFoundError, RunActiveError, Store


def test_create_and_read_back(store: Store) -> None:
    exp = store.create_experiment("  coding duo ", description="two coders", tags=["code", " code", "", "pair"],
                                  config={"task": {"name": "humaneval"}, "agents": [{"name": "a"}]})
    assert exp.name == "coding duo"
    assert exp.tags == ("code", "pair")
    assert exp.config["task"] == {"name": "humaneval"}
    assert exp.created_at.tzinfo is not None and exp.created_at == exp.updated_at
    assert store.get_experiment(exp.id) == exp
    assert store.find_experiment("coding duo") == exp
    assert store.find_experiment("nope") is None


def test_names_are_unique_and_validated(store: Store) -> None:
    assert store.create_experiment("a").id == 1  # every test's ids start at 1, so id 42 names no row
    with pytest.raises(DuplicateNameError, match="named 'a' already exists"):
        store.create_experiment("a")
    with pytest.raises(ValueError, match="non-empty name"):
        store.create_experiment("   ")
    with pytest.raises(TypeError, match="not the string 'x'"):
        store.create_experiment("b", tags="x")
    with pytest.raises(NotFoundError, match="no experiment with id 42"):
        store.get_experiment(42)


def test_list_search_and_tags(store: Store) -> None:
    a = store.create_experiment("Writing pair", description="article writing", tags=["writing"])
    b = store.create_experiment("coder", description="100% pass rate hunt", tags=["code", "writing_x"])
    c = store.create_experiment("plain")
    assert [e.id for e in store.list_experiments()] == [c.id, b.id, a.id]
    assert [e.id for e in store.list_experiments(search="WRITING")] == [a.id]
    assert [e.id for e in store.list_experiments(search="100%")] == [b.id]
    assert store.list_experiments(search="0%p") == []  # % is literal, not a wildcard
    assert [e.id for e in store.list_experiments(tag="writing")] == [a.id]  # exact tag, not a prefix
    assert [e.id for e in store.list_experiments(limit=1, offset=1)] == [b.id]
    assert store.experiment_tags() == ["code", "writing", "writing_x"]


def test_update_bumps_updated_at_and_keeps_unset_fields(store: Store) -> None:
    exp = store.create_experiment("a", description="d", tags=["x"], config={"k": 1})
    store.create_experiment("b")
    updated = store.update_experiment(exp.id, config={"k": 2})
    assert (updated.description, updated.tags, updated.config) == ("d", ("x",), {"k": 2})
    assert updated.updated_at >= exp.updated_at
    with pytest.raises(DuplicateNameError):
        store.update_experiment(exp.id, name="b")
    assert store.update_experiment(exp.id, name="a").name == "a"  # its own name is fine


def test_an_update_from_an_older_version_is_refused(store: Store) -> None:
    exp = store.create_experiment("cas", config={"k": 1})
    mine = store.update_experiment(exp.id, config={"k": 2}, if_saved_at=exp.updated_at)
    with pytest.raises(StaleEditError, match="saved elsewhere"):
        store.update_experiment(exp.id, config={"k": 3}, if_saved_at=exp.updated_at)  # the older base
    assert store.get_experiment(exp.id).config == {"k": 2}
    assert store.update_experiment(exp.id, config={"k": 4}, if_saved_at=mine.updated_at).config == {"k": 4}


def test_clone_copies_config_and_tags_but_not_runs(store: Store) -> None:
    exp = store.create_experiment("base", description="d", tags=["x"], config={"trainer": {"lr": 1e-5}})
    store.create_run(exp.id, exp.config, "cpu")
    clone = store.clone_experiment(exp.id, "base (copy)")
    assert (clone.description, clone.tags, clone.config) == ("d", ("x",), {"trainer": {"lr": 1e-5}})
    assert store.list_runs(experiment_id=clone.id) == []
    with pytest.raises(DuplicateNameError):
        store.clone_experiment(exp.id, "base")


def test_delete_cascades_and_refuses_active_runs(store: Store) -> None:
    exp = store.create_experiment("gone")
    run = store.create_run(exp.id, {}, "cpu")
    store.log_metrics(run.id, 0, 0, {"m": 1.0})
    with pytest.raises(RunActiveError, match="still has active runs"):
        store.delete_experiment(exp.id)
    store.request_stop(run.id)  # queued -> cancelled
    store.delete_experiment(exp.id)
    with pytest.raises(NotFoundError):
        store.get_run(run.id)
    assert store.metric_keys(run.id) == []
    assert store.list_experiments() == []
