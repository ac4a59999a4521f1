"""The task-writing example in docs/tasks.md runs as written: build, score and train it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

DOC = Path(__file__).resolve().parents[3] / "docs" / "tasks.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


@pytest.mark.slow
def test_docs_example_builds_scores_and_trains(tmp_path, monkeypatch):
    module_code, usage_code = blocks("python")[:2]
    (tmp_path / "my_tasks.py").write_text(module_code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("my_tasks", None)
    try:
        namespace: dict = {}
        exec(compile(usage_code, "docs/tasks.md", "exec"), namespace)  # its asserts check the scores
        assert namespace["totals"] == [1.5, 0.0, 0.25]

        from engine.build.run import run_training
        from engine.schema.run_config import parse_run_config
        from engine.sinks import MemorySink

        allowed = namespace["allowed"]  # the example's own permissions: its module allowed
        config = parse_run_config(yaml.safe_load(blocks("yaml")[0]), task_modules=allowed.task_modules)
        sink = MemorySink()
        result = run_training(config, output_dir=tmp_path / "run", sink=sink, permissions=allowed)
        assert result.status == "completed" and len(sink.steps) == 2
        assert {"reward/agree", "reward/on_target"} <= set(sink.steps[0].metrics)
    finally:
        sys.modules.pop("my_tasks", None)
