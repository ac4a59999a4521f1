"""Evaluation of record: a run's team, at one of its checkpoints or from model folders, on a split.

:func:`evaluate_run` builds the trainer of a run config through the one build path
(:func:`engine.build.run.build_trainer`, no output folder), puts the chosen weights in it (a
checkpoint's, or the agents' models replaced by folders such as a run's exported ``model/agent_i``)
and evaluates with the same code the trainer runs during training
(:func:`engine.trainer.evaluation.evaluate_items`): per-turn team reward and return,
the task's own metrics, unbiased pass@k for every k up to the samples per item, avg@K, and a
standard error over items for each. It is deterministic given the seed (the trainer is seeded with
it before anything samples); greedy evaluation does not depend on the seed at all.

Every refusal is an :class:`EvalError` whose one-line message names the bad input and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.permissions.operator import LIBRARY, OperatorPermissions
from engine.schema.run_config import RunConfig, agents_from_folders

SPLITS = ("eval", "train")
CHECKPOINTS_DIR = "checkpoints"
CHECKPOINT_PREFIX = "checkpoint-"


class EvalError(ValueError):
    """An evaluation that cannot run as asked; the message names the input and the fix."""


@dataclass
class EvalReport:
    """One evaluation: what was evaluated (config, checkpoint or model folders, split, settings), the
    metrics and their standard errors over items, every item's outcome and the evaluated episodes."""

    config_name: str
    split: str
    seed: int
    greedy: bool
    samples: int
    items: int
    metrics: dict[str, float]
    standard_errors: dict[str, float]
    per_item: list[dict[str, Any]]
    checkpoint: str | None = None
    checkpoint_step: int | None = None
    models: list[str] = field(default_factory=list)
    episodes: list[Any] = field(default_factory=list)
    baseline: str | None = None  # a test-time protocol (engine.evaluation.baselines), None: the team as trained

    def to_json(self) -> dict[str, Any]:
        """Everything but the episodes, as plain JSON values (``cooplab eval --json`` prints this)."""
        return {"config": self.config_name, "split": self.split, "checkpoint": self.checkpoint,
                "checkpoint_step": self.checkpoint_step, "models": self.models, "seed": self.seed,
                "greedy": self.greedy, "samples": self.samples, "items": self.items, "metrics": self.metrics,
                "standard_errors": self.standard_errors, "per_item": self.per_item, "baseline": self.baseline}


def run_checkpoints(run_dir: str | Path) -> dict[int, Path]:
    """A run folder's checkpoints by step (``checkpoints/checkpoint-<step>``)."""
    root = Path(run_dir) / CHECKPOINTS_DIR
    found: dict[int, Path] = {}
    if root.is_dir():
        for folder in root.glob(f"{CHECKPOINT_PREFIX}*"):
            step = folder.name.removeprefix(CHECKPOINT_PREFIX)
            if step.isdigit() and folder.is_dir():
                found[int(step)] = folder
    return found


def find_checkpoint(run_dir: str | Path, which: str | int) -> Path:
    """The checkpoint folder ``which`` names: ``last`` (the highest step), ``best`` (the one kept by
    ``best_checkpoint_metric``) or a step number."""
    if str(which) == "best":
        from engine.trainer.checkpoint import BEST_FOLDER, read_record

        if read_record(Path(run_dir) / CHECKPOINTS_DIR) is None:
            raise EvalError(f"run folder {run_dir} kept no best checkpoint; train with best_checkpoint_metric "
                            "(e.g. eval/reward_mean), or choose --checkpoint last or a step")
        return Path(run_dir) / CHECKPOINTS_DIR / BEST_FOLDER
    found = run_checkpoints(run_dir)
    if not found:
        raise EvalError(f"run folder {run_dir} has no checkpoints (expected {CHECKPOINTS_DIR}/{CHECKPOINT_PREFIX}"
                        "<step>/); train with checkpoint_interval, or evaluate model folders with --models")
    steps = sorted(found)
    if str(which) == "last":
        return found[steps[-1]]
    if not str(which).isdigit():
        raise EvalError(f"--checkpoint {which!r}: give 'last', 'best' or a step number (this run has steps "
                        f"{', '.join(map(str, steps))})")
    if int(which) not in found:
        raise EvalError(f"--checkpoint {which}: run folder {run_dir} has no checkpoint at that step; it has steps "
                        f"{', '.join(map(str, steps))}")
    return found[int(which)]


def with_model_folders(config: RunConfig, folders: list[str | Path], task_modules: tuple[str, ...] = ()) -> RunConfig:
    """``config`` with agent i's model (and tokenizer) read from ``folders[i]``: each folder is a whole
    model, so weight sharing and LoRA adapters are dropped from the agents."""
    if len(folders) != len(config.agents):
        raise EvalError(f"--models: {len(folders)} folder(s) for a team of {len(config.agents)} agents "
                        f"({', '.join(a.name for a in config.agents)}); give one folder per agent, in order")
    for folder in folders:
        if not (Path(folder) / "config.json").is_file():
            raise EvalError(f"--models: {folder} is not a model folder (no config.json); give a folder written by "
                            "save_pretrained, such as a run's model/agent_<i>")
    data = agents_from_folders(config.model_dump(mode="json"), [Path(f).resolve() for f in folders])
    return RunConfig.model_validate(data, context={"task_modules": task_modules})


def load_checkpoint_into(trainer: Any, folder: Path) -> int:
    """The model weights of a checkpoint folder into ``trainer`` (no optimizer or RNG state); its step."""
    from engine.trainer.checkpoint import CheckpointMismatch, load_team_weights

    try:
        return load_team_weights(trainer.agents, Path(folder))
    except CheckpointMismatch as exc:
        raise EvalError(str(exc)) from None


def evaluate_run(config: RunConfig, *, checkpoint: str | Path | None = None,
                 models: list[str | Path] | None = None, split: str = "eval", items: int | None = None,
                 samples: int | None = None, greedy: bool = False, seed: int | None = None,
                 permissions: OperatorPermissions = LIBRARY, baseline: str | None = None) -> EvalReport:
    """Evaluate ``config``'s team on ``split`` (see the module docstring).

    ``checkpoint``: a checkpoint folder whose weights replace the freshly built ones; ``models``: one
    model folder per agent instead of the config's models (not both). ``items``: the first N items
    of the split (default all); ``samples``: joint answers per item (default the config's
    ``eval_samples_per_item``; 1 when ``greedy``); ``seed``: default the config's seed. ``permissions``: the
    operator's (:mod:`engine.permissions.operator`), for the task, the models and the code sandbox.
    ``baseline``: a test-time protocol of :mod:`engine.evaluation.baselines` instead of the team's own
    evaluation, played by the config's base models (or ``models``), never a checkpoint: the untrained
    comparison CoMLRL's paper reports (``single`` plays the first agent alone: the first model folder).
    """
    if split not in SPLITS:
        raise EvalError(f"--split {split!r}: choose one of {', '.join(SPLITS)}")
    if samples is not None and samples < 1:
        raise EvalError(f"--samples {samples}: give at least 1 joint answer per item")
    if items is not None and items < 1:
        raise EvalError(f"--items {items}: give at least 1 item (or leave it out for the whole split)")
    if checkpoint is not None and models:
        raise EvalError("give a checkpoint or model folders, not both")
    if config.system is not None:
        raise EvalError("cooplab eval evaluates one trainer's team; this run config has a system of several "
                        "trainers: evaluate each trainer's config on its own")
    if baseline is not None:
        config, models = _baseline_team(config, baseline, checkpoint, models, permissions)
    if models:
        config = with_model_folders(config, list(models), permissions.task_modules)
    seed = config.trainer.seed if seed is None else seed
    data = config.model_dump(mode="json")
    data["trainer"]["seed"] = seed
    config = RunConfig.model_validate(data, context={"task_modules": permissions.task_modules})

    from engine.build.run import build_trainer

    trainer = build_trainer(config, output_dir=None, permissions=permissions)
    try:
        if not hasattr(trainer, "evaluate_items"):
            raise EvalError(f"algorithm {config.trainer.algorithm!r}: its trainer has no team evaluation yet; "
                            "cooplab eval covers the MAGRPO family and the preference trainers")
        step = load_checkpoint_into(trainer, Path(checkpoint)) if checkpoint is not None else None
        dataset = trainer.eval_dataset if split == "eval" else trainer.train_dataset
        if dataset is None:
            raise EvalError(f"task {config.task.name!r} has no eval split with these params; give the task "
                            "eval items (e.g. task.params.eval_items) or evaluate --split train")
        count = len(dataset) if items is None else min(items, len(dataset))
        if baseline is not None:
            from engine.evaluation.baselines import run_protocol

            n = 1 if greedy else (samples or config.trainer.eval_samples_per_item)
            means, ses, rows = run_protocol(trainer, dataset, count, baseline, samples=n, greedy=greedy)
            return EvalReport(config_name=config.name, split=split, seed=seed, greedy=greedy, samples=n, items=count,
                              metrics=means, standard_errors=ses, per_item=rows,
                              checkpoint=str(checkpoint) if checkpoint is not None else None, checkpoint_step=step,
                              models=[str(m) for m in models or []], baseline=baseline)
        outcome = trainer.evaluate_items(dataset, count, greedy=greedy, samples_per_item=samples, split=split)
    finally:
        close = getattr(trainer, "close", None)
        if close is not None:
            close()
    n = outcome.items[0].samples if outcome.items else 0
    return EvalReport(config_name=config.name, split=split, seed=seed, greedy=greedy, samples=n, items=count,
                      metrics=outcome.metrics, standard_errors=outcome.standard_errors,
                      per_item=[o.to_json() for o in outcome.items],
                      checkpoint=str(checkpoint) if checkpoint is not None else None, checkpoint_step=step,
                      models=[str(m) for m in models or []], episodes=outcome.episodes)


def _baseline_team(config: RunConfig, baseline: str, checkpoint: Any, models: list[str | Path] | None,
                   permissions: OperatorPermissions) -> tuple[RunConfig, list[str | Path] | None]:
    """The config (and model folders) a test-time baseline runs, refusing a checkpoint: the base models
    play it. ``single`` keeps only the first agent."""
    from engine.evaluation.baselines import BASELINES
    from engine.schema.task_registry import get_task_info

    if baseline not in BASELINES:
        raise EvalError(f"--baseline {baseline!r}: choose one of {', '.join(BASELINES)}")
    if checkpoint is not None:
        raise EvalError(f"--baseline {baseline} plays the config's base models (the untrained comparison), not a "
                        "checkpoint's weights; evaluate the checkpoint without --baseline")
    if baseline != "single":
        if len(config.agents) < 2:
            raise EvalError(f"--baseline {baseline}: a protocol between agents needs a team of two or more; this "
                            f"config has {len(config.agents)} agent(s)")
        return config, models
    info = get_task_info(config.task.name, permissions.task_modules)
    if 1 not in info.team_sizes:
        raise EvalError(f"--baseline single: task {config.task.name!r} has no one-agent form (team sizes "
                        f"{', '.join(map(str, info.team_sizes))})")
    data = config.model_dump(mode="json")
    data["agents"] = data["agents"][:1]
    return RunConfig.model_validate(data, context={"task_modules": permissions.task_modules}), (
        list(models)[:1] if models else None)
