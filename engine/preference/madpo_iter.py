"""``MADPOIterTrainer``: iterative MADPO (CoMLRL's MADPOIter) — rounds of collect-pairs-then-train,
the current policy's candidates compared with a comparator policy's.

    for iteration r in range(num_iterations):
        at the iteration's first step: snapshot the policy; every item gets K candidates from the
            current policy and, unless comparator_policy="current", K from the comparator
            (current_copy: a frozen copy of the policy now; model: the initial policy;
             history: the policy comparator_history_k iterations back); pairs join one current and
            one comparator candidate (or two current ones), selected by pair_selection
        the pairs to train on: the iteration's own, or drawn by preference_replay_mode from the
            pairs of several iterations (engine.preference.replay)
        steps_per_iteration DPO steps (MADPO's update) over them

An iteration has a fixed number of steps, ``num_train_epochs * ceil(items * pairs_per_sample /
train_batch_size)`` (``preference_replay_sample_size`` instead of ``items * pairs_per_sample`` when set), so the run's length is known before it starts (the shared loop needs it); when
ties leave fewer pairs, the iteration's pairs are cycled in fresh seeded orders. Checkpoints hold
the iteration's pairs and the snapshots a comparator needs, so a run resumes mid-iteration exactly.
"""

from __future__ import annotations

import math

from engine.preference.iterations import ComparatorIterations
from engine.preference.madpo import MADPOTrainer
from engine.preference.pairs import PreferencePair
from engine.schema.preference_configs import MADPOIterConfig
from engine.sinks.base import Episode


class MADPOIterTrainer(ComparatorIterations, MADPOTrainer):
    """Iterative MADPO (see the module docstring); the constructor is MADPO's (MAGRPO's)."""

    def _default_config(self) -> MADPOIterConfig:
        return MADPOIterConfig()

    def _pair_schedule(self) -> None:
        cfg = self.args
        pairs = cfg.preference_replay_sample_size or self.num_train_items * cfg.preference_pairs_per_sample
        self.steps_per_iteration = cfg.num_train_epochs * math.ceil(pairs / cfg.effective_train_batch_size)
        self.steps_per_epoch = self.steps_per_iteration  # train/epoch reports the iteration
        self.total_steps = cfg.max_steps or cfg.num_iterations * self.steps_per_iteration

    def start_iteration(self, iteration: int) -> list[PreferencePair]:
        """Snapshot the policy, load the comparator, and collect the iteration's pairs."""
        self.begin_iteration(iteration)
        pairs = self.collect_pairs()
        self.total_pairs += len(pairs)
        return self.mix_replay()  # the pairs preference_replay_mode draws

    def pairs_for_step(self, step: int) -> list[PreferencePair]:
        iteration, j = divmod(step, self.steps_per_iteration)
        if iteration != self.iteration:
            self.start_iteration(iteration)
        size, pairs = self.args.effective_train_batch_size, self.training_pairs
        passes = max(1, math.ceil(len(pairs) / size))
        cycle, pos = divmod(j, passes)
        order = self.pair_order(iteration * 100_003 + cycle, len(pairs))
        return [pairs[i] for i in order[pos * size:(pos + 1) * size]]

    def train_step(self) -> tuple[dict[str, float], list[Episode]]:
        """MADPO's step; an iteration's first step also reports its collection."""
        first = self.step % self.steps_per_iteration == 0
        metrics, episodes = super().train_step()
        if first:
            metrics.update(self.collection_metrics())
        metrics.update(self.iteration_metrics())
        return metrics, episodes
