"""LoRA from a run config: per-agent settings, validation naming the fields, a whole run through
``run_training`` with the merged export, ``cooplab export-merged`` from a checkpoint, and a clear
error when peft is missing."""

from __future__ import annotations

import sys

import pytest
import torch
from transformers import AutoModelForCausalLM
from typer.testing import CliRunner

from engine.build.run import run_training
from engine.lora import PeftMissingError, frozen_base, is_lora, peft_model_of, require_peft
from engine.schema.run_config import ConfigError, parse_run_config
from engine.sinks import MemorySink


def _config(agent0: dict, agent1: dict, **trainer) -> dict:
    values = {"max_steps": 2, "num_generations": 2, "max_new_tokens": 4, "rollout_buffer_size": 1,
              "eval_interval": 0, "agent_learning_rate": 1e-3, "checkpoint_interval": 1}
    values.update(trainer)
    return {"name": "lora", "agents": [{"name": "first", "model": "builtin:tiny-llama", **agent0},
                                       {"name": "second", "model": "builtin:tiny-llama", **agent1}],
            "task": {"name": "quickstart", "params": {"num_items": 4, "eval_items": 1}}, "trainer": values}


def test_lora_settings_are_validated_per_agent() -> None:
    with pytest.raises(ConfigError, match="lora_alpha: has no effect without lora_rank"):
        parse_run_config(_config({"lora_alpha": 32}, {}))
    with pytest.raises(ConfigError, match="agents.0.lora_rank"):
        parse_run_config(_config({"lora_rank": 0}, {}))
    with pytest.raises(ConfigError, match="agents sharing weights must all use LoRA"):
        parse_run_config(_config({"lora_rank": 4}, {"share_weights_with": "first"}))
    run = parse_run_config(_config({"lora_rank": 4, "lora_target_modules": "all-linear"},
                                   {"lora_rank": 2, "lora_dropout": 0.1}))
    assert run.agents[0].lora_target_modules == ["all-linear"] and run.agents[1].lora_alpha == 16.0
    with pytest.raises(ConfigError, match=r"rollout_dtype: LoRA agents \(second\) .* leave rollout_dtype empty"):
        parse_run_config(_config({}, {"lora_rank": 2}, rollout_dtype="bfloat16"))
    assert parse_run_config(_config({}, {}, rollout_dtype="bfloat16")).trainer.rollout_dtype == "bfloat16"


def test_actor_critic_with_lora_is_refused_by_name() -> None:
    from engine.schema.configure import trainer_config

    run = parse_run_config(_config({"lora_rank": 4}, {}, algorithm="iac"))
    with pytest.raises(ConfigError, match="agents: LoRA .* iac"):
        trainer_config(run.trainer, run.agents)


def test_a_lora_team_on_one_base_runs_end_to_end_and_exports_merged_models(tmp_path) -> None:
    from cooplab.cli import app

    run = parse_run_config(_config({"lora_rank": 4, "lora_target_modules": "all-linear"},
                                   {"lora_rank": 2, "lora_alpha": 4, "share_weights_with": "first"}))
    out = tmp_path / "run"
    captured = {}

    def build(config, **kwargs):
        from engine.build.run import build_trainer

        captured["trainer"] = build_trainer(config, **kwargs)
        return captured["trainer"]

    from engine.build.run_folder import train_into_folder

    result = train_into_folder(run, build, output_dir=out, sink=MemorySink())
    assert result.status == "completed"
    models = [a.model for a in captured["trainer"].agents]
    assert all(is_lora(m) for m in models) and frozen_base(models[0]) is frozen_base(models[1])
    assert [peft_model_of(m).peft_config["default"].r for m in models] == [4, 2]
    ids = torch.tensor([[3, 4, 5, 6]])
    for i, model in enumerate(models):
        plain = AutoModelForCausalLM.from_pretrained(out / "model" / f"agent_{i}")
        with torch.no_grad():
            torch.testing.assert_close(plain(ids).logits, model.eval()(input_ids=ids).logits, rtol=1e-5, atol=1e-5)

    # the same models again, from the last checkpoint's adapters alone
    merged = tmp_path / "merged"
    cli = CliRunner().invoke(app, ["export-merged", str(out / "checkpoints" / "checkpoint-2"), "--out", str(merged)])
    assert cli.exit_code == 0, cli.output
    for i in range(2):
        again = AutoModelForCausalLM.from_pretrained(merged / f"agent_{i}")
        final = AutoModelForCausalLM.from_pretrained(out / "model" / f"agent_{i}")
        for (name, a), (_, b) in zip(again.state_dict().items(), final.state_dict().items(), strict=True):
            assert torch.equal(a, b), name
    bad = CliRunner().invoke(app, ["export-merged", str(tmp_path), "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "not a checkpoint" in bad.output


def test_run_training_accepts_a_lora_agent_beside_a_full_one(tmp_path) -> None:
    run = parse_run_config(_config({"lora_rank": 2}, {}, checkpoint_interval=0, max_steps=1))
    assert run_training(run, output_dir=tmp_path, sink=MemorySink()).status == "completed"
    assert (tmp_path / "model" / "agent_0" / "adapter").is_dir()
    assert not (tmp_path / "model" / "agent_1" / "adapter").exists()


def test_missing_peft_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "peft", None)  # what an environment without peft imports
    with pytest.raises(PeftMissingError, match=r"pip install 'cooplab\[lora\]'"):
        require_peft()
    assert not is_lora(torch.nn.Linear(2, 2))
