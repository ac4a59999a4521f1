"""What a CoMLRL script's reward function and seeds see when the script runs on CoopLab unchanged but
for its imports: its reward is called exactly as often as CoMLRL 1.4.3 calls it (nothing the trainer
adds by default calls it again), and a script that seeds torch's global RNG before ``train()`` (CoMLRL
has no seed setting) gets a different run per seed, the same run for the same seed."""

from __future__ import annotations

import torch

from engine import MAGRPOConfig, MAGRPOTrainer
from engine.models.tiny import build_tiny_model

PROMPTS = [{"prompt": f"Count to {i}:"} for i in range(4)]


class CountingReward:
    """A CoMLRL reward ``f(*agent_completions)`` that records every call (one joint action each)."""

    def __init__(self, value: float) -> None:
        self.value = value
        self.seen: list[tuple[str, ...]] = []

    def __call__(self, *completions: list[str]) -> list[float]:
        self.seen.append(tuple(c[0] for c in completions))
        return [self.value]


def feedback(prompt, agent_completions, num_agents, prompt_history_per_agent, response_history_per_agent):
    return [f"{prompt} Again:" for _ in range(num_agents)]


def test_one_agent_grpo_reward_is_called_as_often_as_comlrl_calls_it() -> None:
    # CoMLRL 1.4.3, single turn, one agent (GRPO is MAGRPOTrainer with num_agents=1): one reward call per
    # joint action, K = num_generations (default 4) per item, each item once per epoch: 4 x 4 x 1 = 16
    model, tokenizer = build_tiny_model("llama", "xs", seed=0)
    reward = CountingReward(1.0)
    trainer = MAGRPOTrainer(agents=[model], num_agents=1, tokenizer=tokenizer, train_dataset=PROMPTS,
                            reward_func=reward, args=MAGRPOConfig(num_train_epochs=1, num_turns=1, max_new_tokens=4))
    trainer.train()
    assert len(reward.seen) == len(PROMPTS) * 4 * 1 == trainer.env_step


def test_two_agent_magrpo_reward_is_called_as_often_as_comlrl_calls_it() -> None:
    # CoMLRL 1.4.3, two turns, aligned, K = 4: per item K calls at the root, then every one of its K joint
    # actions gets a child node with K more (the reward -1 is below CoMLRL's early-termination threshold
    # -0.2, so CoMLRL expands every branch, as CoopLab does with its threshold off): 4 + 4 x 4 = 20 per item
    team = [build_tiny_model("llama", "xs", seed=0), build_tiny_model("qwen2", "xs", seed=1)]
    reward = CountingReward(-1.0)
    items = PROMPTS[:3]
    trainer = MAGRPOTrainer(agents=[m for m, _ in team], tokenizer=[t for _, t in team], train_dataset=items,
                            reward_func=reward, external_transition=feedback,
                            args=MAGRPOConfig(num_train_epochs=1, max_new_tokens=4))
    trainer.train()
    assert len(reward.seen) == len(items) * (4 + 4 * 4) == trainer.env_step
    assert all(len(joint) == 2 for joint in reward.seen)


def _sampled(manual_seed: int | None, *, config_seed: int | None = None, seed_after_building: bool = False,
             items: int = 1, **settings: object) -> list[tuple[str, ...]]:
    """The completions a one-agent CoMLRL-style run on ``items`` prompts samples (as its reward sees them)
    when the script calls ``torch.manual_seed(manual_seed)`` before ``train()``: before building the
    trainer, or between building it and ``train()``."""
    model, tokenizer = build_tiny_model("llama", "xs", seed=0)  # fixed weights; the global RNG is left as it was
    reward = CountingReward(1.0)
    config = MAGRPOConfig(num_train_epochs=1, num_turns=1, num_generations=2, max_new_tokens=6, **settings)
    if config_seed is not None:
        config.seed = config_seed
    if not seed_after_building:
        torch.manual_seed(manual_seed)
    trainer = MAGRPOTrainer(agents=[model], num_agents=1, tokenizer=tokenizer, train_dataset=PROMPTS[:items],
                            reward_func=reward, args=config)
    if seed_after_building:
        torch.manual_seed(manual_seed)
    trainer.train()
    return reward.seen


def test_a_script_s_global_torch_seed_picks_the_run_when_the_config_gives_none() -> None:
    runs = {seed: _sampled(seed) for seed in (1, 2, 3)}
    assert runs[1] != runs[2] and runs[2] != runs[3] and runs[1] != runs[3]
    assert _sampled(2) == runs[2]  # the same seed again: the same run
    late = {seed: _sampled(seed, seed_after_building=True) for seed in (1, 2)}
    assert late[1] != late[2]  # seeding between building the trainer and train() picks the run too
    assert _sampled(1, seed_after_building=True) == late[1]


def test_a_seed_drawn_when_train_starts_seeds_every_stream_as_a_given_seed_does(monkeypatch) -> None:
    import engine.trainer.core as core

    monkeypatch.setattr(core, "draw_seed", lambda: 7)  # the draw of train() (the constructor's is not patched)
    settings = dict(items=4, shuffle=True, agent_learning_rate=1e-3)  # two steps: data order, update, samples
    drawn = _sampled(1, **settings)
    monkeypatch.undo()
    assert drawn == _sampled(2, config_seed=7, **settings)  # every stream was seeded again from 7, in place
    assert drawn != _sampled(2, config_seed=8, **settings)


def test_an_explicit_config_seed_reproduces_whatever_the_global_rng() -> None:
    assert _sampled(1, config_seed=7) == _sampled(2, config_seed=7) == _sampled(3, config_seed=7,
                                                                                seed_after_building=True)
    assert _sampled(1, config_seed=7) != _sampled(1, config_seed=8)


def test_a_run_without_a_config_seed_resumes_exactly_from_its_checkpoint(tmp_path) -> None:
    from engine.sinks import MemorySink

    def run(manual_seed: int, *, stop_after: int | None = None, resume: str | None = None,
            out: str = "run") -> tuple[list[tuple[str, ...]], MAGRPOTrainer]:
        model, tokenizer = build_tiny_model("llama", "xs", seed=0)
        reward = CountingReward(1.0)
        config = MAGRPOConfig(num_train_epochs=1, max_steps=3, num_turns=1, num_generations=2, max_new_tokens=6,
                              shuffle=True, checkpoint_interval=1, agent_learning_rate=1e-3)
        torch.manual_seed(manual_seed)
        trainer = MAGRPOTrainer(agents=[model], num_agents=1, tokenizer=tokenizer, train_dataset=PROMPTS,
                                reward_func=reward, args=config, output_dir=tmp_path / out,
                                sink=MemorySink(stop_after_steps=stop_after))
        trainer.train(resume_from_checkpoint=resume)
        return reward.seen, trainer

    full, _ = run(5, out="full")
    part, first = run(5, stop_after=1, out="part")
    assert first.step == 1 and part == full[:4]
    rest, resumed = run(99, resume=str(tmp_path / "part" / "checkpoints" / "checkpoint-1"), out="part")
    assert resumed.step == 3 and resumed.args.seed == first.args.seed  # the run's drawn seed came back
    assert part + rest == full  # the same items (shuffled with that seed) and the same samples


def test_credit_probes_run_only_when_asked_never_for_one_agent_and_say_what_they_cost(caplog) -> None:
    import logging

    from engine.sinks import MemorySink

    caplog.set_level(logging.INFO, logger="cooplab.sampling")  # the start-up lines

    model, tokenizer = build_tiny_model("llama", "xs", seed=0)
    alone = CountingReward(1.0)
    MAGRPOTrainer(agents=[model], num_agents=1, tokenizer=tokenizer, train_dataset=PROMPTS, reward_func=alone,
                  args=MAGRPOConfig(num_train_epochs=1, num_turns=1, max_new_tokens=4, credit_samples=8)).train()
    assert len(alone.seen) == len(PROMPTS) * 4  # asked for, yet a team of one is never probed
    assert "credit probes: off for a team of one agent (credit_samples 8 is ignored" in caplog.text

    team = [build_tiny_model("llama", "xs", seed=0), build_tiny_model("qwen2", "xs", seed=1)]
    pair, sink = CountingReward(1.0), MemorySink()
    trainer = MAGRPOTrainer(agents=[m for m, _ in team], tokenizer=[t for _, t in team], train_dataset=PROMPTS,
                            reward_func=pair, sink=sink, args=MAGRPOConfig(num_train_epochs=1, num_turns=1,
                                                                           max_new_tokens=4, credit_samples=3))
    trainer.train()
    # two items per step (one node sample per agent each fills the buffer of 2), 8 joint actions; each
    # step probes 3 of them once per agent: 2 steps x 3 x 2 = 12 calls on top of CoMLRL's 4 x 4
    assert len(pair.seen) == 4 * 4 + 2 * 3 * 2
    assert [s.metrics["perf/credit_reward_calls"] for s in sink.steps] == [6.0, 6.0]
    assert "credit probes: on (credit_samples 3): up to 3 joint actions per step" in caplog.text
    assert "up to 6 extra reward calls per step" in caplog.text


def test_a_run_config_always_records_its_seed_and_hands_it_to_the_trainer() -> None:
    import pytest

    from engine.schema.configure import trainer_config
    from engine.schema.errors import ConfigError
    from engine.schema.run_config import parse_run_config

    config = parse_run_config({"agents": [{"name": "a"}, {"name": "b"}]})
    assert config.model_dump(mode="json")["trainer"]["seed"] == 0
    assert trainer_config(config.trainer, config.agents).seed == 0  # explicit: the run reproduces
    assert trainer_config(parse_run_config({"agents": [{"name": "a"}], "trainer": {"seed": 5}}).trainer,
                          [config.agents[0]]).seed == 5
    with pytest.raises(ConfigError, match="trainer.seed"):
        parse_run_config({"agents": [{"name": "a"}], "trainer": {"seed": None}})
