"""A blank experiment draft for the form's validation tests."""

from __future__ import annotations

from app import draft as drafts
from engine.schema.run_config import TaskSpec, TrainerSpec


def blank_draft() -> dict:
    """A minimal valid draft: two default agents on the default task with default trainer settings."""
    return {"name": "experiment", "description": "", "tags": [],
            "agents": [drafts.new_agent([]), drafts.new_agent([{"name": "agent_1"}])],
            "task": TaskSpec().model_dump(mode="json"), "trainer": TrainerSpec().model_dump(mode="json")}
