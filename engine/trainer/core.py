"""What every trainer shares (:class:`TrainerCore`), and the training loop that every trainer and every
system of trainers runs (:func:`run_loop`).

:class:`TrainerCore` holds the config, datasets, agents and hooks its constructor sets up, the data
order, the step schedule, the step's timing metrics, model export, and the training loop and
checkpoints (:mod:`engine.trainer.checkpoint`) through thin methods. :class:`engine.trainer.MAGRPOTrainer`,
the actor-critic trainers and MADPO differ in how a step rolls out and updates; everything around
that is here, once.

The loop (:func:`run_loop`) goes step by step, reports through the sink, evaluates and checkpoints
on schedule, and stops (with a checkpoint) when the sink asks. Its owner is a trainer or a system of
trainers (:class:`engine.systems.System`); a trainer's ``train()`` is :func:`train_trainer`.
"""

from __future__ import annotations

import math
import random
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from engine.sinks.base import BaseSink, Episode, Sink
from engine.trainer.agents import announce, sampling_notes
from engine.trainer.checkpoint import (
    BestCheckpoint,
    load_weights,
    model_groups,
    read_checkpoint,
    restore_training_state,
    training_state,
    with_weights,
    write_checkpoint,
)
from engine.trainer.host_memory import keep_freed_memory
from engine.trainer.setup import (
    AgentSetup,
    check_datasets,
    draw_seed,
    generator_seed,
    load_agents,
    report_seed,
    seed_everything,
    seed_note,
    seeded_config,
    update_seed,
)


def data_order(num_items: int, epoch: int, *, seed: int, shuffle: bool) -> list[int]:
    """Item order of an epoch: as stored, or a seeded permutation with ``shuffle``."""
    if not shuffle:
        return list(range(num_items))
    gen = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(num_items, generator=gen).tolist()


def step_items(step: int, *, num_items: int, per_step: int, seed: int, shuffle: bool) -> list[int]:
    """Dataset indices that step ``step`` consumes when each step takes the next ``per_step`` items in
    epoch order, epoch after epoch (a pure function of the step number)."""
    epoch, pos = divmod(step, math.ceil(num_items / per_step))
    return data_order(num_items, epoch, seed=seed, shuffle=shuffle)[pos * per_step:(pos + 1) * per_step]


def items_per_call(items_per_step: int | None, rollout_buffer_size: int, samples_per_item: int) -> int:
    """Dataset items sampled together in one call: ``items_per_step`` when set, else every item a
    step needs to fill the rollout buffer (``samples_per_item`` buffer entries per item), so a step
    samples in as few calls as it can. The items per update are the same either way."""
    if items_per_step is not None:
        return items_per_step
    return max(1, math.ceil(rollout_buffer_size / samples_per_item))


def step_timing(started: float, updating: float, ended: float, *, generate_s: float, reward_s: float,
                tokens: int) -> dict[str, float]:
    """The ``perf/...`` metrics of a step from its three timestamps (pure function)."""
    return {
        "perf/step_time_s": ended - started,
        "perf/generate_s": generate_s,
        "perf/reward_s": reward_s,
        "perf/update_s": ended - updating,
        "perf/tokens_per_s": tokens / generate_s if generate_s > 0 else 0.0,
    }


class TrainerCore:
    """The shared part of a trainer (see the module docstring). A subclass's constructor resolves its
    config (:meth:`_configured`) and agents (:func:`engine.trainer.setup.comlrl_agents`), calls
    :meth:`_setup` and :meth:`_schedule`, and provides ``train_step``, ``evaluate`` and its updates;
    one with more state to keep extends :meth:`_training_state` and :meth:`_restore_training_state`,
    one with more seeded streams :meth:`_reseed`.

    A config without a seed gets one drawn from torch's global RNG (:mod:`engine.trainer.setup`):
    when the trainer is built and again when ``train()`` starts a fresh run."""

    seed_drawn = False  # the config gave no seed: self.args.seed was drawn from torch's global RNG
    _seed_settled = False  # train() has drawn (or kept) the run's seed

    def _default_config(self) -> Any:
        raise TypeError(f"{type(self).__name__} must define _default_config")

    def _configured(self, args: Any, model_config: dict[str, Any] | None) -> Any:
        """CoMLRL's ``args`` (default: the trainer's config class) with its ``model_config`` argument; a
        copy with a seed drawn from torch's global RNG when it gives none."""
        config, self.seed_drawn = seeded_config(args if args is not None else self._default_config())
        if model_config is not None:
            config.model_config = dict(model_config)
        return config

    def _setup(
        self, config: Any, agents: Sequence[AgentSetup], *, train_dataset: Any, eval_dataset: Any,
        external_transition: Callable | None, eval_logger: Callable | None, eval_aggregator: Callable | None,
        sink: Sink | None, wandb_config: dict[str, Any] | None, output_dir: str | Path | None,
    ) -> None:
        """Config, datasets, the team (loaded, placed, with optimizers), hooks and where reports go."""
        self.args = config
        # CoMLRL's constructors take no train_dataset (train() needs one): zero items until then
        self.num_train_items = 0 if train_dataset is None else check_datasets(train_dataset, eval_dataset)
        if config.num_turns > 1 and external_transition is None:
            raise ValueError("num_turns > 1 needs external_transition to build each turn's next prompts")
        self.num_agents = len(agents)
        self.agent_names = [agent.name for agent in agents]
        if not self.seed_drawn:  # a given seed seeds everything; a drawn one leaves the global RNGs to continue
            seed_everything(config.seed)
        self.agents = load_agents(agents, config)
        if any(agent.device.type == "cpu" for agent in self.agents):
            keep_freed_memory()  # a CPU step re-allocates its gradients and activations: reuse them
        self.train_dataset = train_dataset
        self.eval_dataset = eval_dataset
        self.external_transition = external_transition
        self.eval_logger = eval_logger
        self.eval_aggregator = eval_aggregator
        self.wandb_config = wandb_config
        self.sink = sink if sink is not None or wandb_config is None else wandb_sink(wandb_config)
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.last_checkpoint: str | None = None

    def _schedule(self, samples_per_item: int, *, update_streams: int) -> None:
        """A step consumes enough items to fill the rollout buffer (CoMLRL's update trigger), sampled
        ``items_per_step`` at a time (unset: all of them in one call); the run lasts ``max_steps``
        exactly (cycling the data) or ``num_train_epochs`` passes."""
        cfg = self.args
        self.items_per_step = items_per_call(cfg.items_per_step, cfg.rollout_buffer_size, samples_per_item)
        rollouts_per_step = max(1, math.ceil(cfg.rollout_buffer_size / (self.items_per_step * samples_per_item)))
        self.items_per_update = self.items_per_step * rollouts_per_step
        self.steps_per_epoch = math.ceil(self.num_train_items / self.items_per_update)
        self.total_steps = cfg.max_steps or cfg.num_train_epochs * self.steps_per_epoch
        self.step = 0
        self.env_step = 0
        self.update_rngs = [random.Random(update_seed(cfg.seed, i)) for i in range(update_streams)]
        self.report_rng = random.Random(report_seed(cfg.seed))

    # -- the seed (engine.trainer.setup) -------------------------------------------------------
    def _settle_seed(self, *, resuming: bool) -> None:
        """At the start of ``train()``, which needs a ``train_dataset``: a fresh run whose config gives no
        seed draws it now from torch's global RNG (a script may have seeded it after building the trainer)
        and announces it; a resumed run takes its checkpoint's. Once per trainer."""
        if self.train_dataset is None:  # every train() starts here
            raise ValueError("Trainer: training requires a train_dataset (pass train_dataset= to the constructor)")
        if self._seed_settled:
            return
        self._seed_settled = True
        if self.seed_drawn and not resuming and self.step == 0:
            self._reseed(draw_seed())
            announce([seed_note(self.args.seed)])

    def _reseed(self, seed: int) -> None:
        """Make ``seed`` the run's seed: every stream derived from it is seeded again, in place (as the
        constructor seeded it). Subclasses with streams of their own extend this."""
        self.args.seed = seed
        for agent in self.agents:
            if agent.generator is not None:
                agent.generator.manual_seed(generator_seed(seed, agent.index))
        for i, rng in enumerate(self.update_rngs):
            rng.seed(update_seed(seed, i))
        self.report_rng.seed(report_seed(seed))

    def train_step(self) -> tuple[dict[str, float], list[Episode]]:
        """One training step: its metrics and the episodes to report (each trainer defines it)."""
        raise NotImplementedError(f"{type(self).__name__} must define train_step")

    # -- data ------------------------------------------------------------------------------------
    def items_for_step(self, step: int) -> list[int]:
        """Dataset indices a training step consumes (a pure function of the step number)."""
        return step_items(step, num_items=self.num_train_items, per_step=self.items_per_update, seed=self.args.seed,
                          shuffle=self.args.shuffle)

    def epoch_of_last_step(self) -> int:
        """The 1-based epoch of the step just taken (``train/epoch``)."""
        return (self.step - 1) // self.steps_per_epoch + 1

    # -- the loop (engine.trainer.core) ----------------------------------------------------------
    def train(self, resume_from_checkpoint: str | Path | None = None, checkpoint_dir: str | Path | None = None,
              checkpoint_interval: int | None = None, checkpoint_total_limit: int | None = None, *,
              sink: Sink | None = None) -> TrainResult:
        """Train until ``total_steps`` or until the sink asks to stop
        (:func:`engine.trainer.core.train_trainer`)."""
        self._settle_seed(resuming=resume_from_checkpoint is not None)
        return train_trainer(self, resume_from_checkpoint, checkpoint_dir, checkpoint_interval,
                             checkpoint_total_limit, sink=sink)

    def start_notes(self) -> list[str]:
        """The lines ``train()`` announces before the first step: how each agent samples (the dtype
        and why, the rollout correction). Trainers with more to say at the start extend this."""
        return sampling_notes(self.agents, self.args)

    # -- state, in memory and in checkpoint folders (engine.trainer.checkpoint) -------------------
    def _training_state(self) -> dict[str, Any]:
        """Everything besides the weights that continues training exactly; subclasses add theirs."""
        return {**training_state(self.agents, step=self.step, env_step=self.env_step, update_rngs=self.update_rngs,
                                 report_rng=self.report_rng), "seed": self.args.seed}

    def _restore_training_state(self, state: dict[str, Any]) -> None:
        self.step, self.env_step = restore_training_state(state, self.agents, self.update_rngs, self.report_rng)
        if self.seed_drawn and state.get("seed") is not None:
            self.args.seed = int(state["seed"])  # the run's drawn seed (the data order derives from it)
        self._seed_settled = True

    def _model_groups(self) -> tuple[list[Any], list[int]]:
        """Distinct model objects and, per agent, the index of its model."""
        return model_groups([agent.model for agent in self.agents])

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: model weights, optimizers, counters, RNG states."""
        return with_weights(self._training_state(), self.agents)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        load_weights(state, self.agents)
        self._restore_training_state(state)

    def save_checkpoint(self, path: str | Path) -> Path:
        """Write a checkpoint folder atomically (temporary folder, then rename). Returns its path."""
        meta = {"step": self.step, "env_step": self.env_step, "agent_names": self.agent_names,
                "config": self.args.to_dict()}
        return write_checkpoint(path, self.agents, self._training_state(), meta)

    def load_checkpoint(self, path: str | Path) -> None:
        """Restore a folder written by :meth:`save_checkpoint` into this (identically built) trainer."""
        folder, state = read_checkpoint(path, self.agents)
        self._restore_training_state(state)
        self.last_checkpoint = str(folder)

    # -- export ----------------------------------------------------------------------------------
    def save_model(self, output_dir: str | Path) -> None:
        """Write each agent as ``<output_dir>/agent_{i}/`` (``save_pretrained`` model + tokenizer; a LoRA
        agent's merged weights, and its adapter under ``adapter/``)."""
        from engine.lora.weights import save_agent_export

        out = Path(output_dir)
        for agent in self.agents:
            save_agent_export(agent.model, agent.tokenizer, out / f"agent_{agent.index}")

    @property
    def agents_in_threads(self) -> bool:
        """Whether the agents sample and update concurrently, one thread each (``parallel_training``
        ``mp``, or ``auto`` where every agent has compute of its own)."""
        return getattr(self, "_pool", None) is not None

    def close(self) -> None:
        """Release what the trainer runs in the background (nothing by default)."""
        return None


def wandb_sink(wandb_config: dict[str, Any]) -> Sink:
    """A WandbSink from CoMLRL's ``wandb_config`` (project, entity, name/run_name, dir, tags, id,
    resume, config_sections); raises ImportError with the install command when wandb is missing."""
    from engine.sinks import WandbSink

    cfg = dict(wandb_config)
    init = {k: cfg[k] for k in ("project", "entity", "dir", "tags", "id", "resume", "mode") if cfg.get(k) is not None}
    name = cfg.get("name") or cfg.get("run_name")
    if name:
        init["name"] = name
    if cfg.get("config_sections"):
        init["config"] = dict(cfg["config_sections"])
    return WandbSink(**init)


# -- the training loop ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainResult:
    """How a ``train()`` call ended."""

    status: str  # "completed" or "stopped"
    step: int
    env_step: int
    last_checkpoint: str | None


@dataclass(frozen=True)
class LoopSchedule:
    """When the loop evaluates, reports and checkpoints (0 = never / at the end only)."""

    total: int
    eval_interval: int
    logging_steps: int
    checkpoint_interval: int
    checkpoint_total_limit: int | None


def run_loop(owner: Any, *, position: Callable[[], int], advance: Callable[[], tuple[dict, list]],
             schedule: LoopSchedule, sink: Sink, checkpoint_root: Path | None, run_config: dict,
             best: BestCheckpoint | None = None) -> TrainResult:
    """Advance ``owner`` until ``schedule.total`` or until the sink asks to stop (see the module doc).

    ``position()`` is the owner's step counter and ``advance()`` one step (its metrics and
    episodes); ``owner`` provides ``env_step``, ``eval_dataset``, ``evaluate(sink=)``,
    ``save_checkpoint(path)`` and ``last_checkpoint``. Evaluation runs before steps 0, N, 2N, ... of
    ``eval_interval`` N (CoMLRL's schedule) and once more on the final weights when this call
    completes a run it advanced, after the final checkpoint, so its random draws never reach a
    resumed run. With ``best``, each evaluation's weights are offered to it
    (:mod:`engine.trainer.checkpoint`), which keeps the best of them apart from the rolling
    checkpoints.
    """
    sink.start(schedule.total, run_config)
    status, saved_at, first = "completed", -1, position()
    evaluates = owner.eval_dataset is not None and schedule.eval_interval > 0
    try:
        while position() < schedule.total:
            if sink.should_stop():
                status = "stopped"
                break
            if evaluates and position() % schedule.eval_interval == 0:
                _evaluate(owner, position(), sink, best)
            metrics, episodes = advance()
            step = position()
            log_now = step % schedule.logging_steps == 0 or step in (1, schedule.total)
            sink.log_step(step, owner.env_step, metrics if log_now else {}, episodes if log_now else [])
            if checkpoint_root is not None and schedule.checkpoint_interval and step % schedule.checkpoint_interval == 0:
                _checkpoint(owner, checkpoint_root, step, schedule.checkpoint_total_limit, sink)
                saved_at = step
        if checkpoint_root is not None and saved_at != position():
            _checkpoint(owner, checkpoint_root, position(), schedule.checkpoint_total_limit, sink)
        if status == "completed" and evaluates and position() > first:
            _evaluate(owner, position(), sink, best)
    except BaseException:
        sink.finish("failed")
        raise
    sink.finish(status)
    return TrainResult(status=status, step=position(), env_step=owner.env_step, last_checkpoint=owner.last_checkpoint)


def _evaluate(owner: Any, step: int, sink: Sink, best: BestCheckpoint | None) -> None:
    metrics = owner.evaluate(sink=sink)
    if best is not None:
        best.offer(owner, step, metrics)


def _checkpoint(owner: Any, root: Path, step: int, limit: int | None, sink: Sink) -> None:
    """``checkpoint-<step>`` under ``root``, reported to the sink; only the newest ``limit`` are kept,
    and each one removed is reported too."""
    path = owner.save_checkpoint(root / f"checkpoint-{step}")
    owner.last_checkpoint = str(path)
    sink.log_checkpoint(step, str(path))
    if limit:
        existing = sorted((p for p in root.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
                          key=lambda p: int(p.name.split("-")[-1]))
        for old in existing[:-limit]:
            shutil.rmtree(old, ignore_errors=True)
            if not old.exists():
                sink.log_checkpoint_pruned(int(old.name.split("-")[-1]), str(old))


def train_trainer(
    trainer: TrainerCore,
    resume_from_checkpoint: str | Path | None = None,
    checkpoint_dir: str | Path | None = None,
    checkpoint_interval: int | None = None,
    checkpoint_total_limit: int | None = None,
    *,
    sink: Sink | None = None,
) -> TrainResult:
    """A trainer's ``train()``: :func:`run_loop` over its ``train_step()`` until ``total_steps`` (epochs
    or ``max_steps``) or until the sink asks to stop.

    Checkpoints go to ``checkpoint_dir`` (default ``<output_dir>/checkpoints``) every
    ``checkpoint_interval`` steps (default from the config) and when training ends or stops.
    Evaluation follows :func:`run_loop`; with ``best_checkpoint_metric`` the best evaluated weights
    are also kept in ``<checkpoint_dir>/best`` (:mod:`engine.trainer.checkpoint`).
    """
    cfg = trainer.args
    announce(trainer.start_notes())
    root = Path(checkpoint_dir) if checkpoint_dir else (
        trainer.output_dir / "checkpoints" if trainer.output_dir else None)
    if resume_from_checkpoint is not None:
        trainer.load_checkpoint(resume_from_checkpoint)
    schedule = LoopSchedule(
        total=trainer.total_steps, eval_interval=cfg.eval_interval, logging_steps=cfg.logging_steps,
        checkpoint_interval=cfg.checkpoint_interval if checkpoint_interval is None else checkpoint_interval,
        checkpoint_total_limit=cfg.checkpoint_total_limit if checkpoint_total_limit is None
        else checkpoint_total_limit,
    )
    best = None
    metric = cfg.best_checkpoint_metric
    if metric and root is not None:
        earlier = Path(resume_from_checkpoint).parent if resume_from_checkpoint is not None else None
        best = BestCheckpoint.restored(metric, cfg.best_checkpoint_mode, root, earlier_root=earlier)
    return run_loop(trainer, position=lambda: trainer.step, advance=trainer.train_step, schedule=schedule,
                    sink=sink or trainer.sink or BaseSink(), checkpoint_root=root, run_config=cfg.to_dict(),
                    best=best)
