"""``System``: several trainers (each with its own agents) playing one task together.

Each round the system hands the round's items to every trainer, which samples its agents' K
replies (``trainer.rollout``); joint action j of the system is sample j of every trainer's agents
(aligned). The system scores the joint outcome with the team reward, writes the rewards into each
trainer's rollout (returns recomputed by the trainer's own credit code), and the trainers the
schedule picks take one update (``trainer.update``). The others stay frozen. Advantages, losses
and optimizer steps are entirely the trainers' own.

The trainers roll out without scoring (``trainer.rollout(..., score=False)``), so their own
``reward_func`` is never called (:func:`deferred_reward` is the placeholder a trainer is built
with); the system's rewards reach them through ``trainer.credit``.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from engine.rewards.team_reward import TeamReward
from engine.schema.folders import atomic_folder, written_folder
from engine.schema.system_spec import system_trainer_problems
from engine.sinks.base import BaseSink, Episode, Sink, TurnRecord
from engine.systems.schedule import Schedule, check_schedule
from engine.trainer.core import LoopSchedule, TrainResult, run_loop, step_items
from engine.trainer.magrpo import MAGRPOTrainer
from engine.trainer.rollout import Rollout
from engine.trainer.setup import dataset_length

STATE_FILE = "system_state.json"
RNG_FILE = "system_rng.pt"


def deferred_reward(*agent_completions: list[str], batch_items: list[dict] | None = None) -> list[float]:
    """The placeholder ``reward_func`` of a system's trainers (never called: the system scores)."""
    return [0.0] * len(agent_completions[0])


deferred_reward.batched = True  # type: ignore[attr-defined]


@dataclass
class SystemRollout:
    """One round: every trainer's scored rollout, plus the system's joint rewards per item."""

    rollouts: dict[str, Rollout]
    rewards: list[list[float]]  # [item][joint action]
    terms: dict[str, list[float]]
    env_steps: int


class System:
    """Coordinates named trainers (see the module docstring).

    ``trainers`` maps names to :class:`engine.trainer.MAGRPOTrainer` objects built single-turn with
    ``joint_mode="aligned"`` and the same ``num_generations``. ``reward_func`` scores the whole team
    (agents in trainer order, then each trainer's agent order) with any reward the MAGRPO trainer
    accepts. ``rounds`` defaults to ``num_epochs`` passes over ``train_dataset``.
    """

    def __init__(
        self,
        trainers: Mapping[str, MAGRPOTrainer],
        *,
        reward_func: Any,
        train_dataset: Any,
        schedule: Schedule,
        rounds: int | None = None,
        num_epochs: int = 1,
        items_per_round: int = 1,
        reward_processor: Callable[[float], float] | None = None,
        seed: int = 0,
        shuffle: bool = False,
        transcripts_per_round: int = 2,
        checkpoint_interval: int = 0,
        checkpoint_total_limit: int | None = 3,
        sink: Sink | None = None,
        output_dir: str | Path | None = None,
        config: dict[str, Any] | None = None,
        eval_dataset: Any = None,
        eval_interval: int = 0,
        eval_num_samples: int = 4,
    ) -> None:
        if not trainers:
            raise ValueError("trainers: a system needs at least one trainer")
        self.trainers = dict(trainers)
        self.names = list(self.trainers)
        check_schedule(schedule, self.names)
        first = self.trainers[self.names[0]].args.num_generations  # the run's K: the first trainer's
        problems = system_trainer_problems({n: t.args for n, t in self.trainers.items()}, first)
        if problems:
            name, field_name, message = problems[0]
            raise ValueError(f"trainer {name!r}: {field_name}: {message}")
        models: dict[int, str] = {}  # id of a model object -> the trainer holding it
        for name, trainer in self.trainers.items():
            for agent in trainer.agents:
                other = models.setdefault(id(agent.model), name)
                if other != name:
                    raise ValueError(f"trainers {other!r} and {name!r} share a model object; a frozen trainer's "
                                     f"weights would change. Share weights only inside one trainer")
        self.num_items = dataset_length(train_dataset, "train_dataset")
        if self.num_items == 0:
            raise ValueError("train_dataset is empty")
        if items_per_round < 1:
            raise ValueError(f"items_per_round must be >= 1, got {items_per_round}")
        self.reward = TeamReward(reward_func, reward_processor)
        self.train_dataset = train_dataset
        self.schedule = schedule
        self.items_per_round = items_per_round
        self.rounds_per_epoch = -(-self.num_items // items_per_round)
        self.total_rounds = rounds if rounds is not None else num_epochs * self.rounds_per_epoch
        self.seed = seed
        self.shuffle = shuffle
        self.loop_schedule = LoopSchedule(total=self.total_rounds, eval_interval=eval_interval, logging_steps=1,
                                          checkpoint_interval=checkpoint_interval,
                                          checkpoint_total_limit=checkpoint_total_limit)
        self.transcripts_per_round = transcripts_per_round
        self.eval_dataset = eval_dataset
        self.eval_num_samples = eval_num_samples
        self.sink = sink
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.config = dict(config or {})
        self.round = 0
        self.env_step = 0
        self.last_checkpoint: str | None = None
        self._report_rng = random.Random(seed + 7)
        self._plan_trainer_steps()

    def _plan_trainer_steps(self) -> None:
        """Tell each trainer how many updates the schedule gives it, so its LR schedule spans the run."""
        counts = dict.fromkeys(self.names, 0)
        for r in range(self.total_rounds):
            for name in self.schedule.trainers_to_update(r, self.names):
                counts[name] += 1
        for name, trainer in self.trainers.items():
            trainer.total_steps = max(counts[name], 1)

    # -- data ------------------------------------------------------------------------------------
    def items_for_round(self, round_index: int) -> list[int]:
        """Dataset indices of a round: the trainers' data order, ``items_per_round`` items a round."""
        return step_items(round_index, num_items=self.num_items, per_step=self.items_per_round, seed=self.seed,
                          shuffle=self.shuffle)

    # -- one round -------------------------------------------------------------------------------
    def play(self, items: Sequence[dict], item_indices: Sequence[int]) -> SystemRollout:
        """Every trainer samples for ``items``; the joint outcome is scored and credited to each."""
        rollouts = {name: trainer.rollout(items, item_indices, score=False) for name, trainer in self.trainers.items()}
        rewards: list[list[float]] = []
        item_terms: list[dict[str, list[float]]] = []
        terms: dict[str, list[float]] = {}
        env_steps = 0
        for n, item in enumerate(items):
            roots = [rollouts[name].roots[n] for name in self.names]
            num_joint = len(roots[0].joint_actions)
            completions = [[root.joint_completions(j)[i] for j in range(num_joint)]
                           for root in roots for i in range(len(root.agents))]
            prompts = [[root.joint_prompts(j)[i] for j in range(num_joint)]
                       for root in roots for i in range(len(root.agents))]
            totals, node_terms = self.reward.score(completions, [item] * num_joint, prompts)
            for key, values in node_terms.items():
                terms.setdefault(key, []).extend(values)
            rewards.append(list(totals))
            item_terms.append(dict(node_terms))
            env_steps += num_joint
        for name, rollout in rollouts.items():
            self.trainers[name].credit(rollout, rewards, item_terms)
        return SystemRollout(rollouts=rollouts, rewards=rewards, terms=terms, env_steps=env_steps)

    def step(self) -> tuple[dict[str, float], list[Episode]]:
        """Play one round and update the scheduled trainers. Returns metrics and joint episodes."""
        t0 = time.perf_counter()
        indices = self.items_for_round(self.round)
        played = self.play([dict(self.train_dataset[i]) for i in indices], indices)
        chosen = self.schedule.trainers_to_update(self.round, self.names)
        t_update = time.perf_counter()
        metrics: dict[str, float] = {}
        for name, trainer in self.trainers.items():
            updated = name in chosen
            metrics[f"trainer/{name}/updated"] = 1.0 if updated else 0.0
            rollout = played.rollouts[name]
            trainer.env_step += rollout.env_steps
            if updated:
                stats = trainer.update([rollout], advance_step=True)
                metrics.update({f"trainer/{name}/{k}": v for k, v in stats.items()})
            metrics[f"trainer/{name}/updates"] = float(trainer.step)
        self.round += 1
        self.env_step += played.env_steps
        flat = [r for row in played.rewards for r in row]
        mean = sum(flat) / len(flat)
        metrics.update({
            "system/reward_mean": mean,
            "system/round": float(self.round),
            "system/trainers_updated": float(len(chosen)),
            "train/reward_mean": mean,
            "turn_1/reward_mean": mean,
            "perf/step_time_s": time.perf_counter() - t0,
            "perf/update_s": time.perf_counter() - t_update,
            "perf/generate_s": sum(r.timings.get("generate_s", 0.0) for r in played.rollouts.values()),
        })
        for term, values in played.terms.items():
            metrics[f"reward/{term}"] = sum(values) / len(values)
        return metrics, self._episodes(played, indices)

    def _episodes(self, played: SystemRollout, indices: Sequence[int]) -> list[Episode]:
        pairs = [(n, j) for n in range(len(indices)) for j in range(len(played.rewards[n]))]
        chosen = self._report_rng.sample(pairs, min(self.transcripts_per_round, len(pairs)))
        episodes = []
        for sample_index, (n, j) in enumerate(chosen):
            turns: list[TurnRecord] = []
            for name in self.names:
                root = played.rollouts[name].roots[n]
                for i, k in enumerate(root.joint_actions[j]):
                    samples = root.agents[i]
                    turns.append(TurnRecord(
                        turn=1, agent_index=len(turns), agent_name=f"{name}/{self.trainers[name].agent_names[i]}",
                        prompt=samples.prompts[k], completion=samples.texts[k], reward=float(root.rewards[j]),
                        ret=float(root.returns[j]),
                        advantage=float(samples.advantages[k]) if samples.advantages else 0.0,
                    ))
            episodes.append(Episode(sample_index=sample_index, split="train", item_index=int(indices[n]),
                                    turns=tuple(turns)))
        return episodes

    def evaluate(self, *, sink: Sink | None = None) -> dict[str, float]:
        """Play the first ``eval_num_samples`` eval items (no updates): ``eval/reward_mean`` and terms."""
        if self.eval_dataset is None:
            return {}
        count = min(self.eval_num_samples, dataset_length(self.eval_dataset, "eval_dataset"))
        if count <= 0:
            return {}
        played = self.play([dict(self.eval_dataset[i]) for i in range(count)], list(range(count)))
        flat = [r for row in played.rewards for r in row]
        metrics = {"eval/reward_mean": sum(flat) / len(flat)}
        metrics["eval/turn_1/reward_mean"] = metrics["eval/reward_mean"]
        for term, values in played.terms.items():
            metrics[f"eval/reward/{term}"] = sum(values) / len(values)
        if sink is not None:
            sink.log_metrics(self.round, self.env_step, metrics)
        return metrics

    # -- the loop --------------------------------------------------------------------------------
    def train(self, resume_from_checkpoint: str | Path | None = None, checkpoint_dir: str | Path | None = None, *,
              sink: Sink | None = None) -> TrainResult:
        """Play ``total_rounds`` rounds or until the sink asks to stop; checkpoint on the way out
        (the trainers' loop, :func:`engine.trainer.core.run_loop`, counting rounds)."""
        root = Path(checkpoint_dir) if checkpoint_dir else (self.output_dir / "checkpoints" if self.output_dir else None)
        if resume_from_checkpoint is not None:
            self.load_checkpoint(resume_from_checkpoint)
        run_config = {"system": self.config, "trainers": {name: t.args.to_dict() for name, t in self.trainers.items()}}
        return run_loop(self, position=lambda: self.round, advance=self.step, schedule=self.loop_schedule,
                        sink=sink or self.sink or BaseSink(), checkpoint_root=root, run_config=run_config)

    # -- checkpoints -----------------------------------------------------------------------------
    def save_checkpoint(self, path: str | Path) -> Path:
        """Write ``<path>/`` atomically: a checkpoint folder per trainer plus the system's counters."""
        with atomic_folder(path, "checkpoint") as tmp:
            for name, trainer in self.trainers.items():
                trainer.save_checkpoint(tmp / f"trainer_{name}")
            version, internal, gauss = self._report_rng.getstate()
            state = {"round": self.round, "env_step": self.env_step, "trainers": self.names,
                     "report_rng": [version, list(internal), gauss]}
            (tmp / STATE_FILE).write_text(json.dumps(state), encoding="utf-8")
            torch.save({"torch_rng": torch.get_rng_state()}, tmp / RNG_FILE)
        return Path(path)

    def load_checkpoint(self, path: str | Path) -> None:
        """Restore a folder written by :meth:`save_checkpoint` into this (identically built) system."""
        folder = written_folder(path, STATE_FILE, "a system checkpoint")
        state = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
        if state["trainers"] != self.names:
            raise ValueError(f"the checkpoint's trainers {state['trainers']} differ from this system's {self.names}")
        for name, trainer in self.trainers.items():
            trainer.load_checkpoint(folder / f"trainer_{name}")
        self.round = int(state["round"])
        self.env_step = int(state["env_step"])
        version, internal, gauss = state["report_rng"]
        self._report_rng.setstate((version, tuple(internal), gauss))
        torch.set_rng_state(torch.load(folder / RNG_FILE, weights_only=True)["torch_rng"])
        self.last_checkpoint = str(folder)

    def save_model(self, output_dir: str | Path) -> None:
        """Each trainer's agents under ``<output_dir>/<trainer>/agent_{i}/``."""
        for name, trainer in self.trainers.items():
            trainer.save_model(Path(output_dir) / name)

    def close(self) -> None:
        for trainer in self.trainers.values():
            trainer.close()
