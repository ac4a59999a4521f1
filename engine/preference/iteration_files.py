"""Files an iterative preference trainer writes besides its checkpoints, each when its setting asks:

* ``policy_checkpoint_dir``: the policy at the start of each iteration, ``iteration_NNN/`` with
  ``model_{u}.safetensors`` per distinct model and ``meta.json`` (``model_of_agent``, as in a
  checkpoint) — the snapshots the comparators sample, kept for later inspection or reuse;
* ``preference_replay_dir``: each iteration's collected pairs, ``iteration_NNN.jsonl``, one pair
  per line (:meth:`engine.preference.pairs.PreferencePair.to_state`);
* ``log_reward_distribution``: ``reward_distribution/iteration_NNN.json`` and ``.svg`` under the
  output folder (:mod:`engine.preference.reward_distribution`).

Iterations are numbered from 1 in file names, as in the ``iter/current_iteration`` metric. A
relative folder is taken under the trainer's ``output_dir`` (the run folder for a queued run); each
file is written atomically (a resumed run does not write an iteration's policy again). A run built
from a run config has a :class:`engine.permissions.write_paths.WriteArea`: both folders must then lie in the
run's folder or the data directory (symlinks resolved), each target is checked again right before it
is written, and outside the run's folder an existing file or folder of the same name is never
replaced (the run fails, naming it). Without one (a trainer built in Python) an older folder of the
same name is replaced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.permissions.write_paths import WriteArea
from engine.preference.pairs import PreferencePair
from engine.preference.reward_distribution import distribution_metrics, write_distribution
from engine.schema.folders import atomic_folder, atomic_text

DISTRIBUTION_FOLDER = "reward_distribution"


def _under(field: str, folder: str | None, output_dir: Path | None, area: WriteArea | None) -> Path | None:
    if not folder:
        return None
    if area is not None:
        return area.resolve(field, folder, output_dir)
    path = Path(folder).expanduser()
    return path if path.is_absolute() or output_dir is None else output_dir / path


@dataclass(frozen=True)
class IterationFiles:
    """Where the iteration files go (None: not written), and the area they must stay in (None: anywhere)."""

    policy_dir: Path | None = None
    pairs_dir: Path | None = None
    distribution_dir: Path | None = None
    area: WriteArea | None = None

    @classmethod
    def for_config(cls, config: Any, output_dir: Path | None, area: WriteArea | None = None) -> IterationFiles:
        """The folders ``config`` names; with ``area``, :class:`engine.permissions.write_paths.WritePathError` now
        when one lies outside it."""
        distribution = None
        if config.log_reward_distribution and output_dir is not None:
            distribution = output_dir / DISTRIBUTION_FOLDER
        return cls(_under("policy_checkpoint_dir", config.policy_checkpoint_dir, output_dir, area),
                   _under("preference_replay_dir", config.preference_replay_dir, output_dir, area), distribution, area)

    def _checked(self, field: str, path: Path) -> Path:
        """``path`` as it may be written now: inside the area, replacing nothing outside the run folder."""
        if self.area is None:
            return path
        path = self.area.target(field, path)
        self.area.check_new(field, path)
        return path

    def write_policy(self, iteration: int, weights: Sequence[Mapping[str, Any]], model_of_agent: Sequence[int]) -> None:
        """The policy at the start of 0-based ``iteration`` (a snapshot: one state dict per model)."""
        if self.policy_dir is None:
            return
        final = self._checked("policy_checkpoint_dir", self.policy_dir / f"iteration_{iteration + 1:03d}")
        from safetensors.torch import save_file

        with atomic_folder(final, "a policy snapshot") as folder:
            for u, state in enumerate(weights):
                save_file({k: v.contiguous() for k, v in state.items()}, str(folder / f"model_{u}.safetensors"))
            (folder / "meta.json").write_text(json.dumps({"iteration": iteration + 1,
                                                          "model_of_agent": list(model_of_agent)}), encoding="utf-8")

    def write_pairs(self, iteration: int, pairs: Sequence[PreferencePair]) -> None:
        """0-based ``iteration``'s collected pairs as JSON lines."""
        if self.pairs_dir is None:
            return
        final = self._checked("preference_replay_dir", self.pairs_dir / f"iteration_{iteration + 1:03d}.jsonl")
        final.parent.mkdir(parents=True, exist_ok=True)
        lines = "".join(json.dumps(p.to_state()) + "\n" for p in pairs)
        atomic_text(final, lines, "the iteration's pairs")

    def write_reward_distribution(self, iteration: int, series: Mapping[str, Sequence[float]]) -> dict[str, float]:
        """``iter/reward_dist/<series>/<stat>`` metrics of 0-based ``iteration``, and its two files."""
        if self.distribution_dir is not None:
            write_distribution(self.distribution_dir, iteration + 1, series)
        return {f"iter/{key}": value for key, value in distribution_metrics(series).items()}
