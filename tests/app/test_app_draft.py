"""The experiment draft: schema-driven field kinds, validation errors by field path, YAML round trip."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import Field

from app import draft as drafts
from app.fields import FieldInputError, field_form, from_text, model_forms, named_forms, placed_forms, to_text
from engine.schema.catalog import CATALOG, FORM_MAIN
from engine.schema.run_config import AgentSpec, TrainerSpec, parse_run_config
from engine.tasks import register_task, unregister_task
from engine.tasks.base import TaskInfo, TaskParams
from tests.app.drafts import blank_draft


class PairParams(TaskParams):
    target_len: int = Field(8, ge=1, description="Characters each agent should write.")


PAIR = TaskInfo(name="pair", title="Pair", description="two agents", roles=("a", "b"), default_num_agents=2,
                team_sizes=(2,), max_turns=1, params_model=PairParams, factory=lambda p, n: None)


@pytest.fixture(autouse=True)
def pair_task() -> Iterator[TaskInfo]:
    """``pair`` registered for these tests only: a config names only registered (or allowed) tasks."""
    info = register_task("pair", PAIR.factory, params_model=PairParams, title="Pair", description="two agents",
                         roles=("a", "b"), team_sizes=(2,), max_turns=1, replace=True)
    yield info
    unregister_task("pair")


def test_field_kinds_come_from_the_schema() -> None:
    forms = {f.name: f for f in model_forms(TrainerSpec)}
    assert forms["joint_mode"].kind == "choice" and forms["joint_mode"].choices == ("aligned", "cross")
    assert forms["num_generations"].kind == "int" and not forms["num_generations"].optional
    assert forms["max_steps"].kind == "int" and forms["max_steps"].optional
    assert forms["clip_epsilon"].kind == "float" and forms["clip_epsilon"].optional
    assert forms["gradient_checkpointing"].kind == "bool"
    assert forms["agent_devices"].kind == "list_str"
    assert forms["num_generations"].help == TrainerSpec.model_fields["num_generations"].description
    kwargs = field_form("model_kwargs", AgentSpec.model_fields["model_kwargs"])
    assert kwargs.kind == "json" and kwargs.default == {}


def test_the_form_layout_comes_from_the_schemas() -> None:
    # the trainer grid: the catalog's form="main" settings in catalog order, every one a run-config field
    assert [f.name for f in named_forms(TrainerSpec, FORM_MAIN)] == list(FORM_MAIN)
    assert FORM_MAIN[:3] == ("algorithm", "num_generations", "num_turns") and FORM_MAIN[-1] == "transcripts_per_step"
    assert all(CATALOG[name].form == "main" for name in FORM_MAIN) and set(FORM_MAIN) < set(TrainerSpec.model_fields)
    # an agent's row: the per-agent overrides in the grid, tokenizer and model kwargs further down
    assert [f.name for f in placed_forms(AgentSpec, "main")] == ["device", "learning_rate", "temperature", "top_p",
                                                                 "top_k", "max_new_tokens"]
    assert [f.name for f in placed_forms(AgentSpec, "more")] == ["tokenizer", "model_kwargs", "lora_rank", "lora_alpha",
                                                                "lora_dropout", "lora_target_modules"]


def test_text_fields_round_trip_and_name_bad_input() -> None:
    devices = field_form("agent_devices", TrainerSpec.model_fields["agent_devices"])
    assert from_text(devices, "cuda:0, cuda:1") == ["cuda:0", "cuda:1"]
    assert from_text(devices, "  ") is None
    assert to_text(devices, ["cuda:0", "cuda:1"]) == "cuda:0, cuda:1"
    kwargs = field_form("model_kwargs", AgentSpec.model_fields["model_kwargs"])
    assert from_text(kwargs, '{"dtype": "float32"}') == {"dtype": "float32"}
    with pytest.raises(FieldInputError, match="not valid JSON"):
        from_text(kwargs, "{dtype: float32")


def test_validation_errors_are_keyed_by_field() -> None:
    draft = blank_draft()
    draft["agents"][1]["learning_rate"] = -1.0
    draft["trainer"]["num_generations"] = 1
    config, errors = drafts.validate(draft)
    assert config is None
    assert "agents.1.learning_rate" in errors and "greater than 0" in errors["agents.1.learning_rate"][0]
    assert "trainer.num_generations" in errors


def test_model_level_errors_are_reported_without_the_pydantic_prefix() -> None:
    draft = blank_draft()
    draft["agents"][1]["name"] = draft["agents"][0]["name"]
    config, errors = drafts.validate(draft)
    assert config is None
    assert errors[""] == ["agent names must be unique; repeated: agent_0"]


def test_task_params_team_size_and_turns_are_checked_against_the_task() -> None:
    draft = blank_draft()
    draft["task"] = {"name": "pair", "params": {"target_len": 0, "typo": 1}}
    draft["agents"].append(drafts.new_agent(draft["agents"]))
    draft["trainer"]["num_turns"] = 2
    config, errors = drafts.validate(draft, PAIR)
    assert config is None
    assert "greater than or equal to 1" in errors["task.params.target_len"][0]
    assert "task.params.typo" in errors  # unknown keys are rejected, not ignored
    assert "played by 2 agent(s), not 3" in errors["agents"][0]
    assert "at most 1 turn" in errors["trainer.num_turns"][0]


def test_valid_draft_round_trips_through_yaml() -> None:
    draft = blank_draft()
    draft["task"] = {"name": "pair", "params": {"target_len": 4}}
    config, errors = drafts.validate(draft, PAIR)
    assert errors == {} and config is not None
    text = drafts.to_yaml(config)
    assert drafts.from_yaml(text) == drafts.normalise(config.model_dump(mode="json"))
    assert parse_run_config(drafts.from_yaml(text)) == config


def test_yaml_import_names_the_problem() -> None:
    with pytest.raises(drafts.DraftImportError, match="not valid YAML"):
        drafts.from_yaml("agents: [unclosed")
    with pytest.raises(drafts.DraftImportError, match="must be a mapping"):
        drafts.from_yaml("- just\n- a list\n")


def test_new_agents_get_unique_names() -> None:
    agents = [{"name": "agent_0", "model": "builtin:tiny-qwen2"}, {"name": "agent_2"}]
    agent = drafts.new_agent(agents)
    assert agent["name"] not in {"agent_0", "agent_2"}
    assert agent["model"] == "builtin:tiny-qwen2"  # same model as the first agent by default
