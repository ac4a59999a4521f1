"""Which agent mattered: a trained team evaluated against variants with agents reset to their base models.

For a checkpoint of a team of N agents, :func:`analyze_team` evaluates on the held-out split (the
same evaluation as :mod:`engine.evaluation.evaluate`, same items, same seed for every variant):

- ``trained``: the checkpoint's team;
- ``base``: every agent at its base model (the run config's models, step 0);
- ``<agent> reset``: that agent reset to its base model, its partners trained;
- ``<agent> alone trained``: that agent trained, its partners reset to their base models (with two
  agents this is the other agent's ``reset`` row, shown once);
- ``roles swapped`` (two agents on the same base model and tokenizer): each agent's trained weights
  play the other's role.

An agent's **contribution** is the drop of the chosen metric when it alone is reset:
``metric(trained) - metric(<agent> reset)``, with the standard error of that difference taken as
``sqrt(se_trained^2 + se_reset^2)`` (the two evaluations draw separately). Agents that share one
model cannot be reset one at a time and are refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.evaluation.evaluate import EvalError, load_checkpoint_into
from engine.permissions.operator import LIBRARY, OperatorPermissions
from engine.schema.run_config import RunConfig

TRAINED, BASE = "trained", "base"


@dataclass(frozen=True)
class Variant:
    """One team to evaluate: a label and, per agent, whose weights it plays with:
    ``("trained", j)`` agent j's trained weights, ``("base", j)`` agent j's base model."""

    label: str
    weights: tuple[tuple[str, int], ...]


def analysis_variants(names: list[str], *, swappable: bool) -> list[Variant]:
    """The variants of a team of agents called ``names`` (see the module docstring), in table order."""
    n = len(names)
    trained = tuple((TRAINED, j) for j in range(n))
    variants = [Variant("trained", trained), Variant("base", tuple((BASE, j) for j in range(n)))]
    if n > 1:
        for i, name in enumerate(names):
            variants.append(Variant(f"{name} reset", tuple((BASE, j) if j == i else (TRAINED, j) for j in range(n))))
        seen = {v.weights for v in variants}
        for i, name in enumerate(names):  # with two agents these are the reset rows again: not repeated
            weights = tuple((TRAINED, j) if j == i else (BASE, j) for j in range(n))
            if weights not in seen:
                variants.append(Variant(f"{name} alone trained", weights))
    if n == 2 and swappable:
        variants.append(Variant("roles swapped", ((TRAINED, 1), (TRAINED, 0))))
    return variants


def contributions(rows: dict[str, tuple[float, float]], names: list[str]) -> dict[str, tuple[float, float]]:
    """Per agent: ``(drop, se)``, the metric of ``trained`` minus that of ``<agent> reset`` and its
    standard error; ``rows`` maps a variant's label to the metric's ``(mean, se)``."""
    value, se = rows["trained"]
    out = {}
    for name in names:
        reset = rows.get(f"{name} reset")
        if reset is not None:
            out[name] = (value - reset[0], math.sqrt(se ** 2 + reset[1] ** 2))
    return out


@dataclass
class TeamAnalysis:
    """The table: per variant its metrics and their standard errors; per agent its contribution."""

    metric: str
    checkpoint_step: int
    split: str
    items: int
    samples: int
    names: list[str]
    rows: list[tuple[Variant, dict[str, float], dict[str, float]]]
    contribution: dict[str, tuple[float, float]]
    outcomes: list[Any] = field(default_factory=list)  # per row: its EvalOutcome (items and episodes)

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "checkpoint_step": self.checkpoint_step, "split": self.split,
                "items": self.items, "samples": self.samples,
                "variants": [{"label": v.label, "weights": [f"{kind}:{self.names[j]}" for kind, j in v.weights],
                              "metrics": m, "standard_errors": se} for v, m, se in self.rows],
                "contribution": {name: {"drop": d, "se": s} for name, (d, s) in self.contribution.items()}}

    def table(self) -> str:
        """The table as text: variant | metric ± s.e., then each agent's contribution."""
        width = max(len(v.label) for v, _, _ in self.rows)
        lines = [f"{'configuration':<{width}}  {self.metric} ± s.e. (checkpoint step {self.checkpoint_step}, "
                 f"{self.split} split, {self.items} items x {self.samples})"]
        for variant, metrics, ses in self.rows:
            lines.append(f"{variant.label:<{width}}  {metrics[self.metric]:.4f} ± {ses.get(self.metric, 0.0):.4f}")
        for name, (drop, se) in self.contribution.items():
            lines.append(f"contribution of {name} (drop when it alone is reset): {drop:+.4f} ± {se:.4f}")
        return "\n".join(lines)


def _swappable(config: RunConfig) -> bool:
    """Two agents whose weights can play each other's role: the same base model and tokenizer."""
    agents = config.agents
    return (len(agents) == 2 and agents[0].model == agents[1].model and agents[0].tokenizer == agents[1].tokenizer
            and agents[0].lora_rank == agents[1].lora_rank)


def analyze_team(config: RunConfig, checkpoint: str | Path, *, metric: str = "eval/reward_mean", split: str = "eval",
                 items: int | None = None, samples: int | None = None, greedy: bool = False,
                 seed: int | None = None, permissions: OperatorPermissions = LIBRARY) -> TeamAnalysis:
    """Evaluate the variants of ``checkpoint``'s team (see the module docstring) under the operator's
    ``permissions`` (:mod:`engine.permissions.operator`)."""
    import torch

    from engine.build.run import build_trainer
    from engine.lora.weights import checkpoint_weights, load_checkpoint_weights
    from engine.trainer.checkpoint import model_groups

    if config.system is not None:
        raise EvalError("team analysis evaluates one trainer's team; this run config has a system of trainers")
    seed = config.trainer.seed if seed is None else seed
    trainer = build_trainer(config, output_dir=None, permissions=permissions)
    try:
        if not hasattr(trainer, "evaluate_items"):
            raise EvalError(f"algorithm {config.trainer.algorithm!r}: its trainer has no team evaluation yet")
        models, _ = model_groups([agent.model for agent in trainer.agents])
        if len(models) != len(trainer.agents):
            raise EvalError("team analysis resets agents one at a time; agents that share one model cannot be: "
                            "give each agent weights of its own (no share_weights_with)")
        names = list(trainer.agent_names)
        base = [checkpoint_weights(m) for m in models]
        step = load_checkpoint_into(trainer, Path(checkpoint))
        trained = [checkpoint_weights(m) for m in models]
        dataset = trainer.eval_dataset if split == "eval" else trainer.train_dataset
        if dataset is None:
            raise EvalError(f"task {config.task.name!r} has no eval split with these params; give it eval items")
        count = len(dataset) if items is None else min(items, len(dataset))
        rows, outcomes = [], []
        for variant in analysis_variants(names, swappable=_swappable(config)):
            for agent, (kind, j) in zip(trainer.agents, variant.weights, strict=True):
                load_checkpoint_weights(agent.model, (trained if kind == TRAINED else base)[j])
                agent.generator = torch.Generator(device=agent.device).manual_seed(seed * 1000 + agent.index)
            outcome = trainer.evaluate_items(dataset, count, greedy=greedy, samples_per_item=samples, split=split)
            if metric not in outcome.metrics:
                raise EvalError(f"--metric {metric!r} is not among this task's evaluation metrics "
                                f"({', '.join(sorted(outcome.metrics))}); choose one of them")
            rows.append((variant, outcome.metrics, outcome.standard_errors))
            outcomes.append(outcome)
        n = outcome.items[0].samples if outcome.items else 0
    finally:
        close = getattr(trainer, "close", None)
        if close is not None:
            close()
    by_label = {v.label: (m[metric], se.get(metric, 0.0)) for v, m, se in rows}
    return TeamAnalysis(metric, step, split, count, n, names, rows, contributions(by_label, names), outcomes)
