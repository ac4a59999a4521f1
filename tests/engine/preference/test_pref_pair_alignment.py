"""Every pair trains each agent on the joint candidates the team reward scored: a pair's winner (and
loser) is one joint candidate, every agent's part of it, with the reward it got, and each agent's
margin is its own log-probs of its own tokens of those candidates.

Checked on the two-agent workload of issue 25 (agent 1's digit share + agent 2's capital share),
against a record of what the reward function was called with and a plain forward of each model.
"""

from __future__ import annotations

import torch

from bench.training import madpo_learning as ml
from engine import MADPOConfig, MADPOTrainer
from engine.sampling.sampler import decode_completions


def _recording_reward(calls: list[tuple[str, str, float]]):
    def reward(completions1, completions2):
        values = ml.team_reward(completions1, completions2)
        calls.extend(zip(completions1, completions2, values, strict=True))
        return values

    return reward


def _trainer(calls: list, **overrides) -> MADPOTrainer:
    models, tokenizer = ml.tiny_agents(0)
    config = MADPOConfig(**{**ml.MADPO_SETTINGS, "num_train_epochs": 1, "preference_num_candidates": 6,
                            "max_new_tokens": 8, "seed": 0, "transcripts_per_step": 0, **overrides})
    return MADPOTrainer(agents=models, tokenizer=tokenizer, train_dataset=ml.dataset()[:4],
                        reward_func=_recording_reward(calls), formatters=ml.formatters(), args=config)


def _sequence_logprob(model, prompt: list[int], completion: list[int]) -> float:
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0].float().log_softmax(-1)
    return float(sum(logits[len(prompt) - 1 + t, tok] for t, tok in enumerate(completion)))


def test_every_pair_side_is_one_scored_joint_candidate_with_its_reward() -> None:
    for overrides in ({}, {"items_per_step": 4}, {"parallel_training": "mp", "agent_devices": ["cpu", "cpu"]}):
        calls: list[tuple[str, str, float]] = []
        trainer = _trainer(calls, **overrides)
        pairs = trainer.collect_pairs()
        scored = {(a, b): r for a, b, r in calls}
        assert len(calls) == 4 * 6 and pairs, overrides
        tokenizer = trainer.agents[0].tokenizer
        for pair in pairs:
            winner, loser = tuple(pair.winner_completions), tuple(pair.loser_completions)
            assert scored.get(winner) == pair.winner_reward, (overrides, winner)  # agent 2's part belongs to it
            assert scored.get(loser) == pair.loser_reward, (overrides, loser)
            assert pair.winner_reward > pair.loser_reward
            for i in range(2):  # the tokens each agent trains on are the text that was scored
                assert decode_completions(tokenizer, [pair.winner_ids[i], pair.loser_ids[i]]) == [winner[i], loser[i]]
                prompt = ml.formatters()[i](ml.dataset()[pair.item_index])
                assert tokenizer.decode(pair.prompt_ids[i]) == prompt == pair.prompts[i]


def test_each_agents_margin_is_its_own_log_probs_of_its_own_tokens() -> None:
    trainer = _trainer([])
    pairs = trainer.collect_pairs()[:6]
    for agent in trainer.agents:
        i = agent.index
        expected = torch.tensor([
            _sequence_logprob(agent.model, p.prompt_ids[i], p.winner_ids[i])
            - _sequence_logprob(agent.model, p.loser_prompt_ids[i], p.loser_ids[i]) for p in pairs])
        assert torch.allclose(trainer.margins(agent, pairs), expected, atol=1e-3), agent.name
        assert torch.allclose(trainer.margins(agent, pairs, grad=True).detach(), expected, atol=1e-3), agent.name
