"""Saved views (``Store.save_view`` / ``saved_view`` / ``forget_view``): one JSON choice per owner, view and
scope, replaced in place, kept apart from every other owner's, view's and scope's, on SQLite and
PostgreSQL."""

from __future__ import annotations

import pytest

from db.ops_saved_views import MAX_CHOICE_CHARS
from db.store import Store


def test_a_saved_choice_is_read_back_replaced_and_forgotten(store: Store) -> None:
    assert store.saved_view("owner", "runs_columns", "all") is None
    store.save_view("owner", "runs_columns", "all", {"config": ["trainer.learning_rate"], "aggregates": ["max"]})
    store.save_view("owner", "runs_columns", "7", {"config": []})
    store.save_view("owner", "run_charts", "all", {"smoothing": "window", "amount": 10.0})
    store.save_view("ada", "runs_columns", "all", {"config": ["seed"]})
    assert store.saved_view("owner", "runs_columns", "all") == {"config": ["trainer.learning_rate"],
                                                               "aggregates": ["max"]}
    store.save_view("owner", "runs_columns", "all", {"config": ["trainer.num_generations"]})  # replaced
    assert store.saved_view("owner", "runs_columns", "all") == {"config": ["trainer.num_generations"]}
    assert store.saved_view("owner", "runs_columns", "7") == {"config": []}
    assert store.saved_view("owner", "run_charts", "all") == {"smoothing": "window", "amount": 10.0}
    assert store.saved_view("ada", "runs_columns", "all") == {"config": ["seed"]}
    assert store.forget_view("owner", "runs_columns", "all") is True
    assert store.forget_view("owner", "runs_columns", "all") is False  # nothing left to forget
    assert store.saved_view("owner", "runs_columns", "all") is None
    assert store.saved_view("owner", "runs_columns", "7") == {"config": []}  # the other scopes stay
    assert store.saved_view("ada", "runs_columns", "all") == {"config": ["seed"]}


def test_a_returned_choice_is_a_copy(store: Store) -> None:
    store.save_view("owner", "runs_columns", "all", {"config": ["a"]})
    store.saved_view("owner", "runs_columns", "all")["config"].append("b")  # type: ignore[index]
    assert store.saved_view("owner", "runs_columns", "all") == {"config": ["a"]}


def test_keys_and_choices_out_of_their_limits_are_refused(sqlite_store: Store) -> None:
    for key, choice, problem in [
        (("", "runs_columns", "all"), {}, "owner must be 1 to 100"),
        (("owner", "v" * 41, "all"), {}, "view must be 1 to 40"),
        (("owner", "runs_columns", "s" * 101), {}, "scope must be 1 to 100"),
        (("owner", "runs_columns", "all"), {"metrics": ["m" * MAX_CHOICE_CHARS]}, "at most 20000 are kept"),
        (("owner", "runs_columns", "all"), {"amount": float("nan")}, "must be JSON"),
        (("owner", "runs_columns", "all"), {"when": object()}, "must be JSON"),
    ]:
        with pytest.raises(ValueError, match=problem):
            sqlite_store.save_view(*key, choice)
    assert sqlite_store.saved_view("owner", "runs_columns", "all") is None
