"""MADPO learns each agent's own part of a team reward, measured outside the trainer.

Issue 25's workload (``bench.training.madpo_learning``): two tiny Llamas (2 layers, hidden 128, one
BPE tokenizer), 8 prompts, team reward = 0.5 x digit share of agent 1's text + 0.5 x capital share of
agent 2's, CoMLRL's config of the issue (8 epochs over 32 pairs in batches of 2 = 128 DPO steps).
Before and after ``train()`` each agent samples 16 answers per prompt with plain ``model.generate``;
never the trainer's own logs. Seeded: the figures reproduce on a CPU.
"""

from __future__ import annotations

import statistics

import pytest

from bench.training import madpo_learning as ml

# CoMLRL 1.4.3's MADPOTrainer on this workload and measurement, seeds 0-2, mean team gain (per seed
# +0.061, +0.030, +0.041): `python -m bench.training.madpo_learning --side comlrl --seeds 0 1 2` with
# comlrl==1.4.3 installed (a benchmark-only extra), 2026-12-04, 2-core CPU.
COMLRL_TEAM_GAIN = 0.044


@pytest.mark.slow
def test_each_agent_learns_its_share_and_the_team_gains_at_least_comlrls() -> None:
    results = [ml.run_cooplab(seed) for seed in (0, 1, 2)]
    report = [ml.format_result(r) for r in results]
    for r in results:
        assert r.extra["steps"] == 128 and r.extra["pairs"] == 32, report  # CoMLRL's schedule: 8 x ceil(32 / 2)
        assert r.after.shares[0] > r.before.shares[0], report  # agent 1's digits
        assert r.after.shares[1] > r.before.shares[1], report  # agent 2's capitals
    assert statistics.fmean(r.gain for r in results) >= COMLRL_TEAM_GAIN, report
