"""A blank experiment name (empty or only spaces) is named at its field and blocks Create/Save."""

from __future__ import annotations

import pytest

from db.store import Store


def _name_column(at):
    for column in at.columns:
        if any(w.key == "ed0.name" for w in column.text_input):
            return column
    raise AssertionError("no column holds the experiment name")


@pytest.mark.parametrize("blank", ["   ", ""])
def test_a_blank_experiment_name_is_named_at_its_field(app, store: Store, blank: str) -> None:
    at = app()
    at.text_input(key="ed0.name").set_value(blank).run()
    assert not at.exception
    assert [e.value for e in _name_column(at).error] == [
        "the experiment name is empty (or only spaces); type a name"]
    assert at.button(key="exp_save").disabled
    assert store.list_experiments() == []
    at.text_input(key="ed0.name").set_value("  mine  ").run()  # surrounding spaces are fine: stored trimmed
    assert not at.button(key="exp_save").disabled
    at.button(key="exp_save").click().run()
    assert not at.exception
    assert [e.name for e in store.list_experiments()] == ["mine"]


def test_a_long_name_and_a_blank_clone_name_are_named_too(app, store: Store) -> None:
    at = app()
    at.text_input(key="ed0.name").set_value("x" * 201).run()
    assert [e.value for e in _name_column(at).error] == [
        "the experiment name is 201 characters long; keep it within 200"]
    assert at.button(key="exp_save").disabled
    at.text_input(key="ed0.name").set_value("mine").run()
    at.button(key="exp_save").click().run()
    [experiment] = store.list_experiments()
    at.text_input(key=f"exp_clone_name_{experiment.id}").set_value("  ").run()
    assert not at.exception
    assert any(e.value == "the experiment name is empty (or only spaces); type a name" for e in at.error)
    assert at.button(key="exp_clone").disabled
    assert len(store.list_experiments()) == 1
