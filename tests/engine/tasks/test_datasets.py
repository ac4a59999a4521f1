"""Datasets from plain lists and local json/jsonl/csv/parquet files."""

from __future__ import annotations

import json

import pytest

from engine.tasks import TaskError
from engine.tasks.datasets import items_to_dataset, load_items, split_items

ROWS = [{"prompt": "alpha", "n": 1}, {"prompt": "beta", "n": 2}, {"prompt": "gamma", "n": 3}]


def test_list_becomes_a_dataset():
    data = load_items(ROWS)
    assert len(data) == 3 and data[1] == {"prompt": "beta", "n": 2}


@pytest.mark.parametrize("suffix", [".json", ".jsonl", ".csv", ".parquet"])
def test_local_files(tmp_path, suffix):
    path = tmp_path / f"items{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(ROWS))
    elif suffix == ".jsonl":
        path.write_text("\n".join(json.dumps(r) for r in ROWS))
    elif suffix == ".csv":
        path.write_text("prompt,n\nalpha,1\nbeta,2\ngamma,3\n")
    else:
        items_to_dataset(ROWS).to_parquet(str(path))
    data = load_items(str(path))
    assert [row["prompt"] for row in data] == ["alpha", "beta", "gamma"]
    assert [int(row["n"]) for row in data] == [1, 2, 3]


def test_bad_sources_are_named(tmp_path):
    with pytest.raises(TaskError, match="dataset file not found"):
        load_items(str(tmp_path / "missing.jsonl"))
    odd = tmp_path / "items.txt"
    odd.write_text("hello")
    with pytest.raises(TaskError, match="unknown format"):
        load_items(str(odd))
    with pytest.raises(TaskError, match="items must be dicts"):
        load_items(["not a dict"])
    with pytest.raises(TaskError, match="empty"):
        load_items([])
    with pytest.raises(TaskError, match="cannot load a dataset from int"):
        load_items(42)


def test_split_items_holds_out_the_tail():
    assert split_items([1, 2, 3, 4, 5], 2) == ([1, 2, 3], [4, 5])
    assert split_items([1, 2], 0) == ([1, 2], [])
    # a list too short to hold items out is refused: an eval split never repeats a training item
    with pytest.raises(TaskError, match="holds out every one of the dataset's 2 items"):
        split_items([1, 2], 4)
    with pytest.raises(TaskError, match="set eval_items below 2"):
        split_items([1, 2], 2)
