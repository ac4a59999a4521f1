"""The agent form offers the per-agent LoRA settings (from the catalog), and a draft with them validates
or names the LoRA field at fault."""

from __future__ import annotations

from app import draft as drafts
from app.fields import field_form, from_text, placed_forms
from engine.schema.run_config import LORA_SETTINGS, AgentSpec
from tests.app.drafts import blank_draft


def test_the_agent_form_has_every_lora_setting() -> None:
    assert set(LORA_SETTINGS) <= {f.name for f in placed_forms(AgentSpec, "more")}  # under More agent settings
    forms = {name: field_form(name, AgentSpec.model_fields[name]) for name in LORA_SETTINGS}
    assert forms["lora_rank"].kind == "int" and forms["lora_rank"].optional and forms["lora_rank"].default is None
    assert forms["lora_alpha"].kind == "float" and forms["lora_dropout"].kind == "float"
    assert forms["lora_target_modules"].kind == "list_str"
    assert from_text(forms["lora_target_modules"], "q_proj, v_proj") == ["q_proj", "v_proj"]


def test_a_draft_with_lora_validates_and_bad_lora_input_names_the_field() -> None:
    draft = blank_draft()
    draft["agents"][0].update(lora_rank=8, lora_target_modules=["q_proj", "v_proj"])
    draft["agents"][1].update(lora_rank=4, lora_alpha=8.0)
    config, errors = drafts.validate(draft)
    assert errors == {} and config is not None and config.agents[1].lora_rank == 4
    draft["agents"][1].update(lora_rank=None)
    config, errors = drafts.validate(draft)
    assert config is None
    assert errors["agents.1.lora_alpha"] == ["has no effect without lora_rank; set lora_rank (e.g. 8) or leave "
                                             "lora_alpha out"]
