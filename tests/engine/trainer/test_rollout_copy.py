"""rollout_dtype: agents sample from a copy of their weights in another dtype, refreshed before every
sampling call, while training stays in the weights' own dtype (engine.trainer.agents)."""

from __future__ import annotations

import copy

import pytest
import torch

from engine import MAGRPOConfig
from engine.models.tiny import build_tiny_model
from engine.sampling.sampler import generate_completions
from engine.trainer.agents import RolloutCopy, rollout_copy_for
from tests.engine.trainer.trainer_helpers import fast_config, make_trainer


def _copy_is_the_cast(copy_: RolloutCopy) -> bool:
    return all(torch.equal(src.to(copy_.dtype), dst) for src, dst in
               zip(copy_.source.parameters(), copy_.model.parameters(), strict=True))


def _record_refreshes(agent) -> list[tuple[bool, torch.Tensor]]:
    """Wrap the agent's refresh: after each, whether the copy is the cast weights, and one weight."""
    seen: list[tuple[bool, torch.Tensor]] = []
    refresh = agent.rollout_copy.refreshed

    def recorded():
        model = refresh()
        seen.append((_copy_is_the_cast(agent.rollout_copy), next(agent.model.parameters()).detach().clone()))
        return model

    agent.rollout_copy.refreshed = recorded
    return seen


def test_every_sampling_call_sees_the_latest_weights_in_bfloat16(team) -> None:
    trainer = make_trainer(team, fast_config(rollout_dtype="bfloat16", max_steps=3, agent_learning_rate=1e-2))
    seen = [_record_refreshes(agent) for agent in trainer.agents]
    trainer.train()
    for agent, calls in zip(trainer.agents, seen, strict=True):
        assert agent.rollout_copy.model.dtype == torch.bfloat16
        assert all(p.dtype == torch.float32 for p in agent.model.parameters())  # training stays in float32
        assert len(calls) == 3 and all(fresh for fresh, _ in calls)
        assert not torch.equal(calls[0][1], calls[-1][1])  # the weights moved between the calls


def test_the_copy_samples_what_a_bfloat16_model_samples() -> None:
    model, tok = build_tiny_model("llama", "xs", seed=0)
    trainer = make_trainer(([model], [tok]), fast_config(num_agents=1, rollout_dtype="bfloat16", max_steps=1),
                           reward_func=lambda c: [0.0])
    agent = trainer.agents[0]
    agent.generator.manual_seed(7)
    mine, _ = agent.sample(["Count to 3:", "Count to 5:"], 3)
    cast = copy.deepcopy(model)
    for p in cast.parameters():
        p.data = p.data.to(torch.bfloat16)
    theirs = generate_completions(cast, tok, ["Count to 3:", "Count to 5:"], num_generations=3, max_new_tokens=6,
                                  temperature=agent.generation.temperature, top_p=agent.generation.top_p,
                                  top_k=agent.generation.top_k, generator=torch.Generator().manual_seed(7))
    assert [s.texts for s in mine] == theirs.texts
    assert all(lp.dtype == torch.float32 for s in mine for lp in s.logprobs)


def test_agents_sharing_a_model_share_one_copy_that_follows_both_optimizers() -> None:
    model, tok = build_tiny_model("llama", "xs", seed=0)
    trainer = make_trainer(([model, model], [tok, tok]), fast_config(rollout_dtype="bfloat16", max_steps=2))
    first, second = trainer.agents
    assert first.rollout_copy is second.rollout_copy
    first.rollout_copy.refreshed()
    with torch.no_grad():  # one step of the second agent's optimizer alone marks the copy stale
        for p in second.trainable_parameters():
            p.grad = torch.ones_like(p)
        second.optimizer.step()
    assert not _copy_is_the_cast(first.rollout_copy)
    first.rollout_copy.refreshed()
    assert _copy_is_the_cast(first.rollout_copy)


def test_a_loaded_state_reaches_the_copy(team) -> None:
    """Weights written in place (a resume's load_state_dict) bump version counters: the next
    refresh copies them although no optimizer stepped."""
    trainer = make_trainer(team, fast_config(rollout_dtype="bfloat16"))
    agent = trainer.agents[0]
    agent.rollout_copy.refreshed()
    state = {k: v + 0.5 if v.is_floating_point() else v for k, v in agent.model.state_dict().items()}
    agent.model.load_state_dict(state)
    assert not _copy_is_the_cast(agent.rollout_copy)
    agent.rollout_copy.refreshed()
    assert _copy_is_the_cast(agent.rollout_copy)


def test_an_unchanged_model_is_not_copied_again(team) -> None:
    trainer = make_trainer(team, fast_config(rollout_dtype="bfloat16"))
    copy_ = trainer.agents[0].rollout_copy
    copy_.refreshed()
    before = copy_.tensors_copied
    copy_.refreshed()
    assert copy_.tensors_copied == before


def test_no_copy_without_rollout_dtype_or_in_the_models_own_dtype(team) -> None:
    assert all(a.rollout_copy is None for a in make_trainer(team, fast_config()).agents)
    assert all(a.rollout_copy is None for a in make_trainer(team, fast_config(rollout_dtype="float32")).agents)
    model, _ = team[0][0], team[1][0]
    assert rollout_copy_for(model, None, {}) is None
    assert rollout_copy_for(model, "float32", {}) is None


def test_buffers_keep_their_dtype_as_from_pretrained_gives_them(team) -> None:
    model = team[0][0]
    copy_ = rollout_copy_for(model, "bfloat16", {})
    assert {b.dtype for b in copy_.model.buffers()} == {b.dtype for b in model.buffers()} == {torch.float32}


def test_lora_agents_are_refused_with_the_fix() -> None:
    pytest.importorskip("peft", reason="LoRA agents need the peft package")
    from engine.lora import LoraSettings, attach_lora

    base, _ = build_tiny_model("llama", "xs", seed=0)
    agent = attach_lora(base, LoraSettings(rank=2))
    with pytest.raises(ValueError, match="rollout_dtype: LoRA agents .* Leave rollout_dtype empty"):
        rollout_copy_for(agent, "bfloat16", {})


def test_an_unknown_dtype_is_a_clear_config_error() -> None:
    with pytest.raises(ValueError, match="rollout_dtype"):
        MAGRPOConfig(rollout_dtype="int8")


@pytest.mark.parametrize("example", ["iac", "madpo"])
def test_actor_critic_and_preference_trainers_sample_from_the_copy(example) -> None:
    import yaml

    from engine.build.run import build_trainer
    from engine.examples import example_path
    from engine.schema.run_config import parse_run_config
    from engine.sinks import MemorySink

    config = yaml.safe_load(example_path(example).read_text(encoding="utf-8"))
    config["trainer"].update(rollout_dtype="bfloat16", max_steps=2, eval_interval=0, checkpoint_interval=0)
    trainer = build_trainer(parse_run_config(config), output_dir=None)
    seen = [_record_refreshes(agent) for agent in trainer.agents]
    trainer.train(sink=MemorySink())
    for agent, calls in zip(trainer.agents, seen, strict=True):
        assert agent.rollout_copy.model.dtype == torch.bfloat16
        assert calls and all(fresh for fresh, _ in calls)
        assert not torch.equal(calls[0][1], next(agent.model.parameters()).detach())  # it trained after sampling


def test_the_reference_kl_compares_the_trained_weights_not_the_copy(team) -> None:
    """At the first step the policy is its reference: the KL is zero although the samples came from
    the bfloat16 copy (whose log-probs differ from the float32 policy's)."""
    from engine.sinks import MemorySink

    trainer = make_trainer(team, fast_config(rollout_dtype="bfloat16", reference_kl_enabled=True, max_steps=1))
    sink = MemorySink()
    trainer.train(sink=sink)
    metrics = sink.steps[0].metrics
    assert all(metrics[f"agent/{name}/kl"] == 0.0 for name in trainer.agent_names)


def test_a_comparator_samples_its_own_weights_not_the_agents_copy() -> None:
    import yaml

    from engine.build.run import build_trainer
    from engine.examples import example_path
    from engine.schema.run_config import parse_run_config

    config = yaml.safe_load(example_path("madpo_iter").read_text(encoding="utf-8"))
    config["trainer"].update(rollout_dtype="bfloat16")
    trainer = build_trainer(parse_run_config(config), output_dir=None)
    agent = trainer.agents[0]
    snapshot = copy.deepcopy(agent.model)
    frozen = trainer.comparator_runtime(agent, snapshot, None)
    assert agent.sampling_model() is agent.rollout_copy.model
    assert frozen.sampling_model() is snapshot
