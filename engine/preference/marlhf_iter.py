"""``MARLHFIterTrainer``: iterative MARLHF (CoMLRL's MARLHFIter) — rounds of collect pairs against a
comparator policy, refit the reward model on them, and RL against it.

    for iteration r in range(num_iterations):
        at the iteration's first step: snapshot the policy; pairs of current vs comparator
            candidates labelled by the task's reward (as MADPOIter collects them); the reward
            model continues training on them (reward_num_train_epochs passes)
        num_train_epochs epochs of MAGRPO-family RL steps against the reward model

The run's length is known before it starts: ``num_iterations * num_train_epochs`` epochs of RL
steps. With ``preference_scoring_reward="reward_model"`` the pairs of the second and later
iterations are labelled by the reward model learned so far instead of the task's reward.
Checkpoints hold the iteration, its pairs, the snapshots and the reward model, so a run
resumes mid-iteration exactly.
"""

from __future__ import annotations

from typing import Any

from engine.preference.iterations import ComparatorIterations
from engine.preference.marlhf import MARLHFTrainer
from engine.rewards.team_reward import TeamReward
from engine.schema.preference_configs import MARLHFIterConfig
from engine.sinks.base import Episode


class MARLHFIterTrainer(ComparatorIterations, MARLHFTrainer):
    """Iterative MARLHF (see the module docstring); the constructor is MAGRPO's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.steps_per_iteration = self.args.num_train_epochs * self.steps_per_epoch
        self.total_steps = self.args.max_steps or self.args.num_iterations * self.steps_per_iteration

    def _default_config(self) -> MARLHFIterConfig:
        return MARLHFIterConfig()

    def start_iteration(self, iteration: int) -> dict[str, float]:
        """Snapshot, comparator, the iteration's pairs (labelled by ``preference_scoring_reward``), and
        the reward model refit on the replayed ones."""
        self.begin_iteration(iteration)
        self.label_pairs_with(self._scoring_reward(iteration))
        self.collect_counting(lambda: self.collector.collect(lambda: False))
        self.total_pairs += len(self.collector.pairs)
        return self.fit_reward_model(self.mix_replay())  # the pairs preference_replay_mode draws

    def _scoring_reward(self, iteration: int) -> TeamReward:
        """What labels iteration ``iteration``'s pairs: the task's team reward, or with
        ``preference_scoring_reward="reward_model"`` the reward model learned so far (from the second
        iteration on; the first has only the task's labels to learn from, as in CoMLRL)."""
        if self.args.preference_scoring_reward == "reward_model" and iteration > 0 and self.reward_model_trained:
            return self.learned_reward  # the RL stage's reward: the learned model
        return self.task_reward

    def train_step(self) -> tuple[dict[str, float], list[Episode]]:
        """An RL step; an iteration's first step collects, refits and reports both."""
        iteration = self.step // self.steps_per_iteration
        first = iteration != self.iteration
        if first:
            self.start_iteration(iteration)
        metrics, episodes = super().train_step()
        if first:
            metrics.update({**self.collection_metrics(), **self.reward_model_metrics})
        metrics.update(self.iteration_metrics())
        return metrics, episodes
