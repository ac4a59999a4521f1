"""LoRA agents on one frozen base: adapters train, the base does not, each agent has its own adapter
and optimizer, checkpoints hold adapters and resume bit for bit, the merged export loads."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from engine.lora import LoraSettings, frozen_base, lora_team, team_memory
from engine.models.tiny import build_tiny_model
from engine.sinks import MemorySink
from tests.engine.trainer.trainer_helpers import fast_config, make_trainer

SETTINGS = LoraSettings(rank=4, alpha=8.0, target_modules=("q_proj", "v_proj", "down_proj"))


def _lora_pair(seed: int = 0):
    base, tok = build_tiny_model("llama", "xs", seed=seed)
    return base, lora_team([base, base], [SETTINGS, SETTINGS], seed=0), tok


def _adapters(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Two LoRA agents on one base, trained 2 steps (with a checkpoint at step 1) and exported."""
    out = tmp_path_factory.mktemp("lora-run")
    base, models, tok = _lora_pair()
    base_before = {k: v.clone() for k, v in base.state_dict().items()}
    adapters_before = [_adapters(m) for m in models]
    trainer = make_trainer((models, [tok, tok]), fast_config(max_steps=2, checkpoint_interval=1,
                                                              reference_kl_enabled=True),
                           output_dir=out)
    trainer.train()
    trainer.save_model(out / "model")
    return dict(out=out, base=base, base_before=base_before, adapters_before=adapters_before, trainer=trainer,
                models=models, tok=tok)


def test_adapters_change_and_the_shared_base_does_not(trained) -> None:
    base, models = trained["base"], trained["models"]
    for key, value in base.state_dict().items():
        assert torch.equal(value, trained["base_before"][key]), key
    for before, model in zip(trained["adapters_before"], models, strict=True):
        after = _adapters(model)
        assert set(after) == set(before) and all("lora_" in n for n in after)
        assert all(not torch.equal(before[n], after[n]) for n in after if ".lora_B." in n), "B never moved"
    # one base tensor set: every frozen weight of both agents is the base's own tensor
    base_ptrs = {p.data_ptr() for p in base.parameters()}
    for model in models:
        frozen = [p for p in model.parameters() if not p.requires_grad]
        assert frozen and all(p.data_ptr() in base_ptrs for p in frozen)
        assert frozen_base(model) is base
    # the untouched base is the KL reference: no copy was made
    assert all(a.reference_model is base for a in trained["trainer"].agents)


def test_shared_base_agents_have_separate_adapters_and_optimizer_states(trained) -> None:
    agents = trained["trainer"].agents
    a0, a1 = _adapters(agents[0].model), _adapters(agents[1].model)
    assert set(a0) == set(a1)
    assert any(not torch.equal(a0[n], a1[n]) for n in a0), "the two agents' adapters are identical"
    ptrs = [{p.data_ptr() for p in a.trainable_parameters()} for a in agents]
    assert ptrs[0].isdisjoint(ptrs[1])
    assert agents[0].optimizer is not agents[1].optimizer
    for agent, own in zip(agents, ptrs, strict=True):
        stepped = {p.data_ptr() for p in agent.optimizer.state}
        assert stepped == own  # moments of this agent's adapter only, never of the base
        moments = [t for s in agent.optimizer.state.values() for k, t in s.items() if k != "step"]
        assert _bytes(moments) == 2 * _bytes(agent.trainable_parameters())


def test_memory_accounting_counts_the_shared_base_once(trained) -> None:
    base, models, agents = trained["base"], trained["models"], trained["trainer"].agents
    base_bytes = _bytes([*base.parameters(), *base.buffers()])
    adapter_bytes = [_bytes(a.trainable_parameters()) for a in agents]
    memory = team_memory(models, [a.optimizer for a in agents])
    assert memory.weight_bytes == base_bytes + sum(adapter_bytes)
    assert memory.unshared_weight_bytes == 2 * base_bytes + sum(adapter_bytes)
    assert memory.trainable_bytes == sum(adapter_bytes)
    steps = sum(_bytes([s["step"]]) for a in agents for s in a.optimizer.state.values())
    assert memory.optimizer_bytes == 2 * sum(adapter_bytes) + steps


def test_memory_accounting_by_hand() -> None:
    """Two agents holding one 3x4 float32 linear (48 B + 12 B bias) and one private 2x2 each."""
    shared = torch.nn.Linear(4, 3)
    agents = [torch.nn.Sequential(shared, torch.nn.Linear(2, 2, bias=False)) for _ in range(2)]
    shared.requires_grad_(False)
    memory = team_memory(agents)
    assert memory.weight_bytes == 60 + 2 * 16
    assert memory.unshared_weight_bytes == 2 * (60 + 16)
    assert memory.trainable_bytes == 2 * 16 and memory.optimizer_bytes == 0


def test_checkpoint_holds_only_the_adapters(trained) -> None:
    checkpoint = trained["out"] / "checkpoints" / "checkpoint-2"
    for u, model in enumerate(trained["models"]):
        saved = load_file(str(checkpoint / f"model_{u}.safetensors"))
        assert set(saved) == set(_adapters(model))
        for name, value in saved.items():
            assert torch.equal(value, dict(model.named_parameters())[name])


def test_adapter_checkpoint_resumes_bit_for_bit(trained, tmp_path) -> None:
    _, models, tok = _lora_pair()
    resumed = make_trainer((models, [tok, tok]), fast_config(max_steps=2, reference_kl_enabled=True),
                           sink=MemorySink())
    resumed.train(resume_from_checkpoint=trained["out"] / "checkpoints" / "checkpoint-1")
    for full, again in zip(trained["models"], models, strict=True):
        a, b = _adapters(full), _adapters(again)
        for name in a:
            assert torch.equal(a[name], b[name]), name
    for x, y in zip(trained["trainer"].agents, resumed.agents, strict=True):
        for sx, sy in zip(x.optimizer.state.values(), y.optimizer.state.values(), strict=True):
            assert all(torch.equal(sx[k], sy[k]) for k in sx)


def test_merged_export_loads_with_from_pretrained_and_matches_the_agent(trained) -> None:
    ids = torch.tensor([[5, 17, 42, 9, 3]])
    for i, model in enumerate(trained["models"]):
        folder = trained["out"] / "model" / f"agent_{i}"
        assert (folder / "adapter" / "adapter_config.json").is_file()
        plain = AutoModelForCausalLM.from_pretrained(folder)
        assert "lora" not in " ".join(n for n, _ in plain.named_parameters())
        model.eval()
        with torch.no_grad():
            torch.testing.assert_close(plain(ids).logits, model(input_ids=ids).logits, rtol=1e-5, atol=1e-5)
    for key, value in trained["base"].state_dict().items():  # merging worked on copies
        assert torch.equal(value, trained["base_before"][key]), key


def test_separate_bases_and_full_agents_mix() -> None:
    """An agent without LoRA keeps every weight trainable; LoRA agents on separate bases share nothing."""
    b0, tok = build_tiny_model("llama", "xs", seed=0)
    b1, _ = build_tiny_model("llama", "xs", seed=0)
    full, _ = build_tiny_model("llama", "xs", seed=0)
    models = lora_team([b0, b1, full], [SETTINGS, SETTINGS, None], seed=3)
    assert models[2] is full and all(p.requires_grad for p in full.parameters())
    memory = team_memory(models)
    assert memory.weight_bytes == memory.unshared_weight_bytes
    with pytest.raises(ValueError, match="lora_target_modules: .*linear modules of this model"):
        lora_team([full], [LoraSettings(rank=2, target_modules=("no_such_proj",))])
