"""One run of the credit-assignment bench: its run config, its training and its held-out measurement.

A run trains a run config through the one build path (:func:`engine.build.run.run_training`, into a
temporary folder, metrics into a :class:`engine.sinks.MemorySink`) and is then measured outside the
trainer with ``cooplab eval``'s code (:func:`engine.evaluation.evaluate.evaluate_run` on the exported
``model/agent_<i>`` folders): ``eval/reward_mean`` on the task's held-out items, ``samples`` joint
answers per item, a fixed evaluation seed. The evaluation config is the same for every arm: the
noiseless reward (``noise_std: 0``), sampling from the float32 weights (``rollout_dtype: float32``,
whatever the default) and none of the credit or correction settings,
so only the trained weights differ. The models before training are measured the same way
(:func:`measure_before`), once per task and seed, since every arm starts from the same weights.

The tasks (``TASKS``): ``quickstart`` (the engine's quick start), ``noisy_parts`` and ``feedback``
(:mod:`bench.training.credit_tasks`); each agent is a ``builtin:tiny-llama`` whose initial weights
depend on the seed (``model_kwargs.seed = 100 * seed + agent``), so seeds differ in the start as well
as in the draws.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.training.credit_tasks import FEEDBACK, NOISY_PARTS, register_credit_tasks

METRIC = "eval/reward_mean"
EVAL_SEED = 1234


@dataclass(frozen=True)
class TaskSetup:
    """A bench task: the run config's task section and the trainer settings it differs in."""

    task: str
    params: dict[str, Any]
    steps: int
    trainer: dict[str, Any] = field(default_factory=dict)

    @property
    def num_turns(self) -> int:
        return int(self.trainer.get("num_turns", 1))


TASKS: dict[str, TaskSetup] = {
    "quickstart": TaskSetup("quickstart", {"eval_items": 12}, 40),
    "noisy_parts": TaskSetup(NOISY_PARTS, {"parts": "digits_capitals", "noise_std": 0.1}, 60),
    "feedback": TaskSetup(FEEDBACK, {"parts": "digits_capitals"}, 10, {"num_turns": 2, "num_generations": 4}),
}
# the quick start's trainer settings (engine/examples/quickstart.yaml) without evaluation or checkpoints, and
# the credit probes on (off by default): each arm's agent/<name>/credit is part of the comparison
BASE_TRAINER: dict[str, Any] = {
    "algorithm": "magrpo", "num_generations": 8, "agent_learning_rate": 1e-3, "max_new_tokens": 12,
    "temperature": 1.0, "top_p": 1.0, "top_k": 50, "num_turns": 1, "rollout_buffer_size": 1, "eval_interval": 0,
    "checkpoint_interval": 0, "transcripts_per_step": 0, "logging_steps": 1, "credit_samples": 8,
}  # fmt: skip
# sampling from the trained float32 weights, whatever rollout_dtype's default is (it may pick a bfloat16 copy)
FLOAT32_SAMPLING: dict[str, Any] = {"rollout_dtype": "float32"}
# settings an arm may change; the evaluation config leaves them all out but FLOAT32_SAMPLING
ARM_SETTINGS = ("credit_assignment", "credit_samples", "per_agent_normalization", "rollout_dtype",
                "rollout_correction", "tis_cap")


def run_config(name: str, seed: int, *, steps: int | None = None, arm: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run config of task ``name``, ``seed`` and an arm's trainer settings (``steps``: the task's own
    when None)."""
    setup = TASKS[name]
    params = dict(setup.params)
    if setup.task in (NOISY_PARTS, FEEDBACK):
        params["noise_seed"] = seed
    return {
        "name": f"credit-{name}-seed{seed}",
        "agents": [{"name": role, "model": "builtin:tiny-llama", "model_kwargs": {"seed": 100 * seed + i}}
                   for i, role in enumerate(("first", "second"))],
        "task": {"name": setup.task, "params": params},
        "trainer": {**BASE_TRAINER, **setup.trainer, "max_steps": steps or setup.steps, "seed": seed, **(arm or {})},
    }


def eval_config(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` as every arm is evaluated: no noise, no arm setting, sampling from the float32 weights."""
    out = json.loads(json.dumps(config))
    if "noise_std" in out["task"]["params"]:
        out["task"]["params"]["noise_std"] = 0.0
    for key in ARM_SETTINGS:
        out["trainer"].pop(key, None)
    out["trainer"].update(FLOAT32_SAMPLING)
    return out


def _parse(config: dict[str, Any]) -> Any:
    from engine.schema.run_config import parse_run_config

    register_credit_tasks()
    return parse_run_config(config)


def _evaluate(config: dict[str, Any], models: list[Path] | None, samples: int, seed: int) -> dict[str, Any]:
    from engine.evaluation.evaluate import evaluate_run

    config = eval_config(config)
    if models:  # a folder is a whole model: the built-in's size/seed do not apply to it (from_pretrained refuses them)
        for agent in config["agents"]:
            agent.pop("model_kwargs", None)
    report = evaluate_run(_parse(config), models=models, samples=samples, seed=seed)
    return {"value": report.metrics[METRIC], "se_items": report.standard_errors[METRIC], "items": report.items,
            "metrics": report.metrics}


def measure_before(config: dict[str, Any], *, samples: int, seed: int = EVAL_SEED) -> dict[str, Any]:
    """The held-out metric of the untrained team of ``config``."""
    return _evaluate(config, None, samples, seed)


@dataclass
class RunResult:
    """One trained run: its held-out metric after training, its training rewards and its costs."""

    after: dict[str, Any]
    rewards: list[float]
    wall_s: float
    status: str
    sums: dict[str, float]  # perf/* counters summed over the steps
    means: dict[str, float]  # other logged metrics of interest, averaged over the steps that logged them

    @property
    def last_fifth(self) -> float:
        """The team reward averaged over the last fifth of the steps (at least one)."""
        n = max(1, len(self.rewards) // 5)
        return sum(self.rewards[-n:]) / n

    def to_json(self) -> dict[str, Any]:
        return {"after": self.after, "rewards": self.rewards, "last_fifth": self.last_fifth, "wall_s": self.wall_s,
                "status": self.status, "sums": self.sums, "means": self.means}


SUMMED = ("perf/credit_reward_calls",)


def averaged(key: str) -> bool:
    """Whether the bench averages metric ``key`` over the steps: the sampler mismatch
    (``perf/sampler_kl``, ``perf/tis_*``, a ``perf/`` clipped share) and each agent's credit."""
    return (key.startswith(("perf/sampler_kl", "perf/tis_")) or key.startswith("perf/") and "clip" in key
            or key.startswith("agent/") and key.endswith("/credit"))


def collect(steps: list[dict[str, float]]) -> tuple[dict[str, float], dict[str, float]]:
    """From each step's metrics: the sums of the ``SUMMED`` counters and the means of the sampler
    mismatch (``perf/sampler_kl``, ``perf/tis_*``) and the per-agent credit (``agent/<name>/credit``),
    over the steps that logged them. Pure."""
    sums: dict[str, float] = {}
    totals: dict[str, list[float]] = {}
    for metrics in steps:
        for key, value in metrics.items():
            if key in SUMMED:
                sums[key] = sums.get(key, 0.0) + value
            elif averaged(key):
                totals.setdefault(key, []).append(value)
    return sums, {key: sum(v) / len(v) for key, v in totals.items()}


def train_and_measure(config: dict[str, Any], *, samples: int, seed: int = EVAL_SEED) -> RunResult:
    """Train ``config`` into a temporary folder and measure its exported team on the held-out items."""
    from engine.build.run import run_training
    from engine.sinks import MemorySink

    run = _parse(config)
    sink = MemorySink()
    with tempfile.TemporaryDirectory(prefix="credit-bench-") as tmp:
        started = time.perf_counter()
        result = run_training(run, output_dir=tmp, sink=sink)
        wall = time.perf_counter() - started
        if result.status != "completed":
            raise RuntimeError(f"run {config['name']} ended {result.status!r} at step {result.step}")
        models = [Path(tmp) / "model" / f"agent_{i}" for i in range(len(config["agents"]))]
        after = _evaluate(config, models, samples, seed)
    steps = [s.metrics for s in sink.steps]
    sums, means = collect(steps)
    return RunResult(after=after, rewards=[m["train/reward_mean"] for m in steps], wall_s=wall,
                     status=result.status, sums=sums, means=means)
