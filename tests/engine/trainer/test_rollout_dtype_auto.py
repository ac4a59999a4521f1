"""``rollout_dtype: auto``: a bfloat16 sampling copy of float32 weights where the device
computes bfloat16 natively, float32 elsewhere, never for LoRA or weights in another dtype; the
choice is printed when training starts, with the correction it gets."""

from __future__ import annotations

import pytest
import torch

from engine.models.tiny import build_tiny_model
from engine.trainer import agents as agent_runtime
from engine.trainer.agents import announce, choose_rollout_dtype, native_bfloat16, sampling_notes
from tests.engine.trainer.trainer_helpers import fast_config, make_trainer, tiny_team


def test_the_cpu_flags_decide_natively(monkeypatch) -> None:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        flags = f.read()
    monkeypatch.undo()  # the suite's float32 default off: the real answer
    expected = " avx512_bf16" in flags or " amx_bf16" in flags
    assert native_bfloat16(torch.device("cpu")) is expected
    assert native_bfloat16(torch.device("meta")) is False


def test_auto_chooses_bfloat16_for_float32_weights_only_where_native(monkeypatch) -> None:
    model, _ = build_tiny_model("llama", "xs", seed=0)
    assert choose_rollout_dtype(model, "auto") == (None, "cpu has no native bfloat16: sampling from the float32 weights")
    monkeypatch.setattr(agent_runtime, "native_bfloat16", lambda device: True)
    assert choose_rollout_dtype(model, "auto") == ("bfloat16", "rollout_dtype auto: this CPU has bfloat16 instructions")
    assert choose_rollout_dtype(model, None)[0] is None
    assert choose_rollout_dtype(model.to(torch.bfloat16), "auto") == (None, "the weights are bfloat16 already")


def test_an_auto_run_samples_from_bfloat16_copies_with_the_correction_where_native(monkeypatch, caplog) -> None:
    monkeypatch.setattr(agent_runtime, "native_bfloat16", lambda device: True)
    trainer = make_trainer(tiny_team(), fast_config(max_steps=1, rollout_dtype="auto"))
    assert all(a.rollout_copy is not None and a.rollout_copy.dtype == torch.bfloat16 for a in trainer.agents)
    notes = sampling_notes(trainer.agents, trainer.args)
    assert notes[0] == ("sampling: agent 'agent_0' samples from a bfloat16 copy of its float32 weights (rollout_dtype "
                        "auto: this CPU has bfloat16 instructions); the update weights each token by truncated "
                        "importance sampling (tis_cap 2)")
    with caplog.at_level("INFO", logger="cooplab.sampling"):
        trainer.train()
    assert any(r.getMessage().startswith("sampling: agent 'agent_1' samples from a bfloat16 copy")
               for r in caplog.records)


@pytest.mark.parametrize("native", [True, False])
def test_without_native_bfloat16_or_by_default_the_weights_sample_themselves(monkeypatch, native) -> None:
    monkeypatch.setattr(agent_runtime, "native_bfloat16", lambda device: native)
    config = fast_config(max_steps=1) if native else fast_config(max_steps=1, rollout_dtype="auto")
    trainer = make_trainer(tiny_team(), config)
    assert all(a.rollout_copy is None for a in trainer.agents)
    note = sampling_notes(trainer.agents, trainer.args)[1]
    assert note.startswith("sampling: agent 'agent_1' samples from its float32 weights (")
    assert "truncated importance" not in note


def test_with_no_logging_set_up_the_lines_go_to_stderr(monkeypatch, capsys) -> None:
    import logging

    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    announce(["sampling: agent 'a' samples from its float32 weights (x)"])
    assert capsys.readouterr().err == "sampling: agent 'a' samples from its float32 weights (x)\n"
