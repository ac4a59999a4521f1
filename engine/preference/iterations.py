"""What the iterative preference trainers share (MADPOIter, MARLHFIter): iterations inside the
shared loop, snapshots of the policy, the comparator policy's frozen copies, and their state in
checkpoints (so a run resumes mid-iteration exactly).

A subclass sets ``steps_per_iteration``, calls :meth:`begin_iteration` at an iteration's first step
and then collects its pairs with ``self.collector`` (whose ``comparator_tree`` this sets).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from engine.lora.weights import load_weights_file
from engine.permissions.operator import LIBRARY, OperatorPermissions
from engine.permissions.read_paths import checked_read
from engine.permissions.write_paths import WriteArea
from engine.preference.comparator_sources import ComparatorSources
from engine.preference.iteration_files import IterationFiles
from engine.preference.pairs import PreferencePair
from engine.preference.replay import replay_pairs, shards_kept
from engine.schema.comparator_checkpoint import comparator_checkpoint_problem
from engine.sinks.base import Sink
from engine.trainer.core import TrainResult, train_trainer
from engine.trainer.magrpo import MAGRPOTrainer
from engine.trainer.rollout import TreeBuilder

_CONSTRUCTOR = inspect.signature(MAGRPOTrainer.__init__)  # every preference trainer takes MAGRPO's arguments


if TYPE_CHECKING:  # what the iterations read of the trainer they are mixed into (MADPO, MARLHF)
    from engine.trainer.core import TrainerCore as _TrainerHost
else:
    _TrainerHost = object


class ComparatorIterations(ComparatorSources, _TrainerHost):
    """Iterations against ``comparator_policy`` (current, current_copy, model, history, api); the
    constructor is the trainer's (MAGRPO's arguments) with an iterative config. The comparators that
    write text (another model, a centralized writer, an API) come from
    :class:`engine.preference.comparator_sources.ComparatorSources`. ``write_area`` confines the
    folders the config names for writing (:mod:`engine.permissions.write_paths`; the run-config build passes it);
    ``permissions`` are the operator's (:mod:`engine.permissions.operator`: the API comparator's hosts and keys;
    the run-config build passes them, a script leaves them at :data:`engine.permissions.operator.LIBRARY`)."""

    if TYPE_CHECKING:  # set by the host trainer (MADPOTrainer, or CentralizedRoles for MARLHF)
        collection_unparsed_share: float | None

    def __init__(self, *args: Any, centralized_adapter: Any = None, centralized_comparator_adapter: Any = None,
                 write_area: WriteArea | None = None, permissions: OperatorPermissions = LIBRARY,
                 **kwargs: Any) -> None:
        config = _CONSTRUCTOR.bind(self, *args, **kwargs).arguments.get("args")
        if config is not None and not hasattr(config, "num_iterations"):
            raise ValueError(f"args: {type(self).__name__} takes a {type(self._default_config()).__name__}, got "
                             f"{type(config).__name__}")
        self.comparator_adapter = centralized_comparator_adapter  # CoMLRL's name: the centralized comparator's
        self.write_area = write_area  # where policy_checkpoint_dir / preference_replay_dir may be (None: anywhere)
        self.permissions = permissions  # the operator's API hosts and keys (LIBRARY: a script's own)
        # the host trainer's constructor (MAGRPO's arguments); mypy sees the TrainerCore host, which takes none
        super().__init__(*args, centralized_adapter=centralized_adapter, **kwargs)  # type: ignore[call-arg]
        self._init_iterations()

    def _init_iterations(self) -> None:
        self.iteration = -1  # the iteration whose pairs the collector holds
        self.total_pairs = 0
        self.snapshots: dict[int, list[dict[str, torch.Tensor]]] = {0: self._weights()}
        self._comparator_tree: TreeBuilder | None = None
        self._checkpoint_loaded = False
        self.policies_written: set[int] = set()  # iterations whose policy this run wrote to policy_checkpoint_dir
        self.replay_shards: list[list[PreferencePair]] = []  # pairs of past iterations replay may draw
        self.training_pairs: list[PreferencePair] = []  # what the iteration trains on
        self._replay_rng = random.Random(self.args.seed * 7919 + 3)
        self.files = IterationFiles.for_config(self.args, self.output_dir, getattr(self, "write_area", None))
        path = self.args.comparator_checkpoint
        if path is not None:  # inside the run's read roots (engine.permissions.read_paths), resolved once
            path = self._checkpoint_path = checked_read("trainer.comparator_checkpoint", path)
        if path is not None:  # refused now, before any sampling, when the folder cannot be the comparator
            problem = comparator_checkpoint_problem(path, self.num_agents, self._model_groups()[1])
            if problem is not None:
                raise FileNotFoundError(f"comparator_checkpoint: {problem}")
        self._init_sources()  # another model / an API client: loaded or checked now, before any sampling

    def train(self, resume_from_checkpoint: str | Path | None = None, checkpoint_dir: str | Path | None = None,
              checkpoint_interval: int | None = None, checkpoint_total_limit: int | None = None, *,
              sink: Sink | None = None) -> TrainResult:
        """The shared loop; each iteration collects its pairs in its first step."""
        self._settle_seed(resuming=resume_from_checkpoint is not None)
        if resume_from_checkpoint is not None:
            self.load_checkpoint(resume_from_checkpoint)
        return train_trainer(self, None, checkpoint_dir, checkpoint_interval, checkpoint_total_limit, sink=sink)

    def _reseed(self, seed: int) -> None:
        super()._reseed(seed)
        self._replay_rng.seed(seed * 7919 + 3)
        self.reseed_comparator_generators(seed)

    @property
    def comparator_iteration(self) -> int | None:
        """Whose snapshot the comparator has in this iteration (None: it samples no snapshot: the
        current policy, another model, an API)."""
        cfg, r = self.args, max(self.iteration, 0)
        if self.external_comparator:
            return None
        return {"current": None, "current_copy": r, "model": 0,
                "history": max(0, r - (cfg.comparator_history_k or 1))}[cfg.comparator_policy]

    def begin_iteration(self, iteration: int) -> None:
        """Snapshot the policy, load the comparator and empty the collector for the new pairs."""
        self.iteration = iteration
        if iteration not in self.snapshots:  # a resumed iteration keeps the snapshot it was saved with
            self.snapshots[iteration] = self._weights()
        if iteration not in self.policies_written:  # a fresh run rewrites an older run's folder; a resumed one not
            self.files.write_policy(iteration, self.snapshots[iteration], self._model_groups()[1])
            self.policies_written.add(iteration)
        source = self.comparator_iteration
        self.collector.comparator_tree = self._install_comparator(source)
        keep = {0, iteration} | ({source} if source is not None else set())
        keep |= {iteration - k for k in range(1, (self.args.comparator_history_k or 1) + 1)}
        self.snapshots = {r: w for r, w in self.snapshots.items() if r in keep}
        self.collector.reset()

    def mix_replay(self) -> list[PreferencePair]:
        """The iteration's collected pairs become a replay shard; the pairs to train on are drawn by
        ``preference_replay_mode`` (:mod:`engine.preference.replay`). Call once per iteration."""
        cfg = self.args
        self.files.write_pairs(self.iteration, self.collector.pairs)
        self.replay_shards.append(list(self.collector.pairs))
        keep = shards_kept(cfg.preference_replay_mode, cfg.preference_replay_k)
        self.replay_shards = self.replay_shards[-keep:] if keep else self.replay_shards
        self.training_pairs = replay_pairs(self.replay_shards, cfg.preference_replay_mode, self._replay_rng,
                                           k=cfg.preference_replay_k, lam=cfg.preference_replay_lambda,
                                           sample_size=cfg.preference_replay_sample_size)
        return self.training_pairs

    def iteration_metrics(self) -> dict[str, float]:
        """CoMLRL's ``iter/...`` keys."""
        return {"iter/current_iteration": float(self.iteration + 1),
                "iter/current_preference_pairs": float(len(self.collector.pairs)),
                "iter/total_preference_pairs": float(self.total_pairs),
                "iter/train_preference_pairs": float(len(self.training_pairs))}

    def collection_metrics(self) -> dict[str, float]:
        """The iteration's collection (``pairs/...``, ``perf/...``), its comparator's (``comparator/...``)
        and, with ``log_reward_distribution``, the team-reward distributions (``iter/reward_dist/...``;
        also written as JSON + SVG by :class:`engine.preference.iteration_files.IterationFiles`)."""
        metrics = {**self.collector.metrics(), **self.comparator_metrics()}
        if self.collection_unparsed_share is not None:  # a centralized team: its joint answers without sections
            metrics["centralized/unparsed_share"] = self.collection_unparsed_share
        if self.args.log_reward_distribution:
            metrics.update(self.files.write_reward_distribution(self.iteration, self.collector.reward_series()))
        return metrics

    def _weights(self) -> list[dict[str, torch.Tensor]]:
        models, _ = self._model_groups()
        return [{k: v.detach().cpu().clone() for k, v in m.state_dict().items()} for m in models]

    def _install_comparator(self, source: int | None) -> Any:
        """The collector's comparator for this iteration (None: pairs among the current candidates)."""
        if self.external_comparator:
            return self.external_comparator
        if source is None:  # the current policy; centralized, its writer answers the joint prompt
            return self._centralized(self.agents) if self.args.comparator_generation_mode == "centralized" else None
        tree = self._comparator_for(source)
        if self.args.comparator_generation_mode == "centralized":
            return self._centralized(tree.agents)
        return tree

    def _comparator_for(self, source: int) -> TreeBuilder:
        """The comparator of this iteration: the snapshot ``source``, or with ``comparator_checkpoint``
        (comparator_policy='model') the checkpoint's weights, read once."""
        path = self._checkpoint_path if self.args.comparator_checkpoint is not None else None
        if path is None:
            return self._comparator(self.snapshots[source])
        tree = self._comparator(None)
        if not self._checkpoint_loaded:
            for u, model in enumerate(self._comparator_copies):
                load_weights_file(model, Path(path) / f"model_{u}.safetensors")
            self._checkpoint_loaded = True
        return tree

    def _comparator(self, weights: list[dict[str, torch.Tensor]] | None) -> TreeBuilder:
        """Frozen copies of the agents' models with ``weights`` (None: as they are), sampling as the
        candidates do."""
        if self._comparator_tree is None:
            models, which = self._model_groups()
            devices = self.comparator_devices()
            copies = [copy.deepcopy(m).eval().requires_grad_(False) for m in models]
            for u, model in enumerate(copies):
                device = devices[which.index(u)]
                if device is not None:
                    copies[u] = model.to(device)
            agents = [self.comparator_runtime(a, copies[which[a.index]], devices[a.index]) for a in self.agents]
            candidates = self.collector.tree
            settings = dataclasses.replace(candidates.settings, samples_per_node=self.comparator_candidates)
            self._comparator_tree = TreeBuilder(agents, candidates.reward, None, settings, pool=candidates.pool)
            self._comparator_copies = copies
        for model, state in zip(self._comparator_copies, weights or [], strict=weights is not None):
            model.load_state_dict(state)
        return self._comparator_tree

    def _training_state(self) -> dict[str, Any]:
        state = super()._training_state()
        where = {id(p): [s, i] for s, shard in enumerate(self.replay_shards) for i, p in enumerate(shard)}
        version, internal, gauss = self._replay_rng.getstate()
        state["iterative"] = {"iteration": self.iteration, "total_pairs": self.total_pairs,
                              "snapshots": [[r, w] for r, w in sorted(self.snapshots.items())],
                              "replay_shards": [[p.to_state() for p in shard] for shard in self.replay_shards],
                              "training_pairs": [where[id(p)] for p in self.training_pairs],
                              "replay_rng": [version, list(internal), gauss],
                              "policies_written": sorted(self.policies_written),
                              "comparator_generators": [g.get_state() for g in self.comparator_generators()]}
        return state

    def _restore_training_state(self, state: dict[str, Any]) -> None:
        super()._restore_training_state(state)
        saved = state["iterative"]
        self.iteration = int(saved["iteration"])
        self.total_pairs = int(saved["total_pairs"])
        self.snapshots = {int(r): w for r, w in saved["snapshots"]}
        self.replay_shards = [[PreferencePair.from_state(p) for p in shard] for shard in saved["replay_shards"]]
        self.training_pairs = [self.replay_shards[s][i] for s, i in saved["training_pairs"]]
        version, internal, gauss = saved["replay_rng"]
        self._replay_rng.setstate((version, tuple(internal), gauss))
        self.policies_written = {int(r) for r in saved.get("policies_written", [])}
        if self.iteration >= 0:
            self.collector.comparator_tree = self._install_comparator(self.comparator_iteration)
        self.restore_comparator_generators(saved.get("comparator_generators", []))
