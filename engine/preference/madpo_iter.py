"""``MADPOIterTrainer``: iterative MADPO (CoMLRL's MADPOIter) — rounds of collect-pairs-then-train,
the current policy's candidates compared with a comparator policy's.

    for iteration r in range(num_iterations):
        at the iteration's first step: snapshot the policy; every item gets K candidates from the
            current policy and, unless comparator_policy="current", K from the comparator
            (current_copy: a frozen copy of the policy now; model: the initial policy;
             history: the policy comparator_history_k iterations back); pairs join one current and
            one comparator candidate (or two current ones), selected by pair_selection
        steps_per_iteration DPO steps (MADPO's update) over the iteration's pairs

An iteration has a fixed number of steps, ``num_train_epochs * ceil(items * pairs_per_sample /
train_batch_size)``, so the run's length is known before it starts (the shared loop needs it); when
ties leave fewer pairs, the iteration's pairs are cycled in fresh seeded orders. Checkpoints hold
the iteration's pairs and the snapshots a comparator needs, so a run resumes mid-iteration exactly.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
from pathlib import Path
from typing import Any

import torch

from engine.preference.config import MADPOIterConfig
from engine.preference.madpo import MADPOTrainer
from engine.preference.pairs import PreferencePair
from engine.sinks.base import Episode, Sink
from engine.trainer.loop import TrainLoopMixin, TrainResult
from engine.trainer.rollout import TreeBuilder

_CONSTRUCTOR = inspect.signature(MADPOTrainer.__init__)


class MADPOIterTrainer(MADPOTrainer):
    """Iterative MADPO (see the module docstring); the constructor is MADPO's (MAGRPO's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        config = _CONSTRUCTOR.bind(self, *args, **kwargs).arguments.get("args")
        if config is not None and not hasattr(config, "num_iterations"):
            raise ValueError(f"args: MADPOIterTrainer takes a MADPOIterConfig, got {type(config).__name__}")
        super().__init__(*args, **kwargs)
        self.iteration = -1  # the iteration whose pairs the collector holds
        self.total_pairs = 0
        self.snapshots: dict[int, list[dict[str, torch.Tensor]]] = {0: self._weights()}
        self._comparator_tree: TreeBuilder | None = None

    def _default_config(self) -> MADPOIterConfig:
        return MADPOIterConfig()

    def _pair_schedule(self) -> None:
        cfg = self.args
        self.steps_per_iteration = cfg.num_train_epochs * math.ceil(
            self.num_train_items * cfg.preference_pairs_per_sample / cfg.effective_train_batch_size)
        self.steps_per_epoch = self.steps_per_iteration  # train/epoch reports the iteration
        self.total_steps = cfg.max_steps or cfg.num_iterations * self.steps_per_iteration

    def train(self, resume_from_checkpoint: str | Path | None = None, checkpoint_dir: str | Path | None = None,
              checkpoint_interval: int | None = None, checkpoint_total_limit: int | None = None, *,
              sink: Sink | None = None) -> TrainResult:
        """The shared loop; each iteration collects its pairs in its first step."""
        if resume_from_checkpoint is not None:
            self.load_checkpoint(resume_from_checkpoint)
        return TrainLoopMixin.train(self, None, checkpoint_dir, checkpoint_interval, checkpoint_total_limit,
                                    sink=sink)

    # -- iterations --------------------------------------------------------------------------------
    @property
    def comparator_iteration(self) -> int | None:
        """Whose weights the comparator has in this iteration (None: no comparator, ``current``)."""
        cfg, r = self.args, max(self.iteration, 0)
        return {"current": None, "current_copy": r, "model": 0,
                "history": max(0, r - (cfg.comparator_history_k or 1))}[cfg.comparator_policy]

    def start_iteration(self, iteration: int) -> list[PreferencePair]:
        """Snapshot the policy, load the comparator, and collect the iteration's pairs."""
        self.iteration = iteration
        self.snapshots.setdefault(iteration, self._weights())
        source = self.comparator_iteration
        self.collector.comparator_tree = None if source is None else self._comparator(self.snapshots[source])
        keep = {0, iteration} | ({source} if source is not None else set())
        keep |= {iteration - k for k in range(1, (self.args.comparator_history_k or 1) + 1)}
        self.snapshots = {r: w for r, w in self.snapshots.items() if r in keep}
        self.collector.reset()
        pairs = self.collect_pairs()
        self.total_pairs += len(pairs)
        return pairs

    def pairs_for_step(self, step: int) -> list[PreferencePair]:
        iteration, j = divmod(step, self.steps_per_iteration)
        if iteration != self.iteration:
            self.start_iteration(iteration)
        size = self.args.effective_train_batch_size
        passes = max(1, math.ceil(len(self.pairs) / size))
        cycle, pos = divmod(j, passes)
        return [self.pairs[i] for i in self.pair_order(iteration * 100_003 + cycle)[pos * size:(pos + 1) * size]]

    def train_step(self) -> tuple[dict[str, float], list[Episode]]:
        """MADPO's step; an iteration's first step also reports its collection."""
        first = self.step % self.steps_per_iteration == 0
        metrics, episodes = super().train_step()
        if first:
            metrics.update(self.collector.metrics())
        metrics.update({"iter/current_iteration": float(self.iteration + 1),
                        "iter/current_preference_pairs": float(len(self.pairs)),
                        "iter/total_preference_pairs": float(self.total_pairs)})
        return metrics, episodes

    def _weights(self) -> list[dict[str, torch.Tensor]]:
        models, _ = self._model_groups()
        return [{k: v.detach().cpu().clone() for k, v in m.state_dict().items()} for m in models]

    def _comparator(self, weights: list[dict[str, torch.Tensor]]) -> TreeBuilder:
        """Frozen copies of the agents' models with ``weights``, sampling as the agents do."""
        if self._comparator_tree is None:
            models, which = self._model_groups()
            copies = [copy.deepcopy(m).eval().requires_grad_(False) for m in models]
            agents = [dataclasses.replace(a, model=copies[which[a.index]], optimizer=None, reference_model=None)
                      for a in self.agents]
            self._comparator_tree = TreeBuilder(agents, self.reward, None, self.tree.settings, pool=self.tree.pool)
            self._comparator_copies = copies
        for model, state in zip(self._comparator_copies, weights, strict=True):
            model.load_state_dict(state)
        return self._comparator_tree

    # -- checkpoints -------------------------------------------------------------------------------
    def _training_state(self) -> dict[str, Any]:
        state = super()._training_state()
        state["iterative"] = {"iteration": self.iteration, "total_pairs": self.total_pairs,
                              "snapshots": [[r, w] for r, w in sorted(self.snapshots.items())]}
        return state

    def _restore_training_state(self, state: dict[str, Any]) -> None:
        super()._restore_training_state(state)
        saved = state["iterative"]
        self.iteration = int(saved["iteration"])
        self.total_pairs = int(saved["total_pairs"])
        self.snapshots = {int(r): w for r, w in saved["snapshots"]}
        source = self.comparator_iteration
        if self.iteration >= 0 and source is not None:
            self.collector.comparator_tree = self._comparator(self.snapshots[source])
