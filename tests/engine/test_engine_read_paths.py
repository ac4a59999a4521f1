"""Paths a run config names for reading (a task's dataset file, a model or tokenizer folder, the
comparator's checkpoint) lie inside the roots the caller gives, symlinks and ``..`` resolved
(:mod:`engine.permissions.read_paths`): pre-flight names each one outside, and the loaders check again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.permissions.read_paths import (
    SETTING,
    ReadArea,
    ReadPathError,
    checked_read,
    read_path_problems,
    reading_within,
)
from engine.schema.preflight import preflight_problems
from engine.schema.run_config import ConfigError, parse_run_config

SECRET = "root-only-credential-4711"


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    """(allowed root, a folder outside it holding creds.jsonl)."""
    root, outside = tmp_path / "data", tmp_path / "private"
    root.mkdir()
    outside.mkdir()
    (outside / "creds.jsonl").write_text("\n".join(json.dumps({"text": f"{SECRET} line {i}"}) for i in range(8)))
    return root, outside


def writing(dataset: str, **agent: object) -> dict:
    return {"agents": [{"name": "summarizer", **agent}, {"name": "elaborator"}],
            "task": {"name": "writing", "params": {"dataset": dataset, "eval_items": 0}},
            "trainer": {"max_steps": 1, "max_new_tokens": 4, "num_generations": 2}}


def test_paths_inside_a_root_resolve_and_others_are_refused_naming_field_path_and_setting(places):
    root, outside = places
    area = ReadArea.of([root])
    (root / "d.jsonl").write_text("{}")
    assert area.resolve("task.params.dataset", str(root / "d.jsonl")) == (root / "d.jsonl").resolve()
    for value in (str(outside / "creds.jsonl"), str(root / ".." / "private" / "creds.jsonl"), "/etc/passwd"):
        with pytest.raises(ReadPathError) as caught:
            area.resolve("task.params.dataset", value)
        message = str(caught.value)
        assert message.startswith(f"task.params.dataset: {value!r}") and str(root.resolve()) in message
        assert SETTING in message


def test_a_symlink_inside_a_root_that_points_out_is_refused(places):
    root, outside = places
    (root / "link.jsonl").symlink_to(outside / "creds.jsonl")
    with pytest.raises(ReadPathError, match="resolves to"):
        ReadArea.of([root]).resolve("task.params.dataset", str(root / "link.jsonl"))


def test_preflight_names_every_path_outside(places):
    root, outside = places
    model = outside / "model"
    model.mkdir()
    data = writing(str(outside / "creds.jsonl"), model=str(model), tokenizer=str(model))
    data["trainer"].update(algorithm="madpo_iter", comparator_policy="model", comparator_model_name=str(model),
                           num_iterations=1, preference_num_candidates=2, num_generations=2)
    config = parse_run_config(data)
    fields = {field for field, _ in read_path_problems(config, ReadArea.of([root]))}
    assert fields == {"task.params.dataset", "agents.0.model", "agents.0.tokenizer",
                      "trainer.comparator_model_name"}
    problems = {p.field: p.message for p in preflight_problems(config, hub_cache_dirs=[],
                                                               read_area=ReadArea.of([root]))}
    assert SETTING in problems["task.params.dataset"]


def test_builtins_hub_ids_and_paths_inside_are_not_problems(places):
    root, _ = places
    (root / "d.jsonl").write_text("{}")
    config = parse_run_config(writing(str(root / "d.jsonl")))
    assert read_path_problems(config, ReadArea.of([root])) == []
    config = parse_run_config(writing("org/some-dataset", model="HuggingFaceTB/SmolLM2-135M"))
    assert read_path_problems(config, ReadArea.of([root])) == []


def test_loading_checks_again_without_reading_the_file(places):
    from engine.tasks.base import TaskError
    from engine.tasks.datasets import load_items

    root, outside = places
    with reading_within(ReadArea.of([root])):
        with pytest.raises(TaskError, match=f"outside.*{SETTING}"):
            load_items(str(outside / "creds.jsonl"))
        assert checked_read("dataset", "org/name") == "org/name"  # a hub name is not a path
    assert len(load_items(str(outside / "creds.jsonl"))) == 8  # library use: not confined


def test_loading_a_model_folder_outside_is_refused(places):
    from engine.models import ModelLoadError, build_tiny_model, load_agent

    root, outside = places
    model, tokenizer = build_tiny_model("llama", "xs")
    model.save_pretrained(outside / "m")
    tokenizer.save_pretrained(outside / "m")
    with reading_within(ReadArea.of([root])), pytest.raises(ModelLoadError, match=f"outside.*{SETTING}"):
        load_agent(str(outside / "m"))


def test_run_training_refuses_before_anything_is_read(places, tmp_path):
    from engine.build.run import run_training
    from engine.sinks import MemorySink

    root, outside = places
    sink = MemorySink()
    with pytest.raises(ConfigError, match="^task.params.dataset: .*outside") as caught:
        run_training(parse_run_config(writing(str(outside / "creds.jsonl"))), output_dir=tmp_path / "out", sink=sink,
                     read_roots=[root])
    assert SECRET not in str(caught.value)
    assert sink.started == [] and sink.steps == []  # nothing was built or trained


def test_a_held_out_dataset_file_is_judged_like_the_training_file(places):
    root, outside = places
    (root / "train.jsonl").write_text(json.dumps({"prompt": "a text"}) + "\n")
    config = parse_run_config({"agents": [{"name": "summary"}, {"name": "expansion"}],
                               "task": {"name": "tldr", "params": {"dataset": str(root / "train.jsonl"),
                                                                  "eval_dataset": str(outside / "creds.jsonl")}}})
    assert [field for field, _ in read_path_problems(config, ReadArea.of([root]))] == ["task.params.eval_dataset"]
