"""Evaluation during training and of a saved team, and its statistics over items.

Evaluation: one path per eval item (greedy or sampled), per-turn reward and expected return,
CoMLRL's ``eval_logger``/``eval_aggregator`` hooks, and unbiased pass@k for every k up to the samples
per item when a ``check`` is given. A trainer's ``evaluate()`` during training (:func:`evaluate`) and
``cooplab eval`` (:mod:`engine.evaluation.evaluate`) share :func:`evaluate_items`: every item's outcome,
the metrics and their standard errors over items.

The statistics of an evaluation over items: means with their standard errors, and pass@k.

Pure functions over plain numbers. An evaluation's items are its independent draws, so a metric's
standard error is the sample standard deviation of its per-item values over the square root of
their count (``0.0`` for a single item, where no spread can be estimated).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.sinks.base import Sink
from engine.trainer.reporting import branch_episode
from engine.trainer.rollout import RolloutSettings, TreeBuilder, assign_returns


def _call_with_accepted(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` passing only the keywords its signature accepts (CoMLRL loggers vary)."""
    params = inspect.signature(fn).parameters.values()
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        names = {p.name for p in inspect.signature(fn).parameters.values()}
        kwargs = {k: v for k, v in kwargs.items() if k in names}
    return fn(*args, **kwargs)


@dataclass
class ItemOutcome:
    """One evaluated item: its position in the split, the mean team reward of each turn on its path,
    the return from its first turn, how many of its ``samples`` joint answers solve it (``None``
    without a check) and the task's own per-item metrics (``eval_logger``)."""

    index: int
    turn_rewards: list[float]
    episode_return: float
    samples: int
    correct: int | None = None
    task_metrics: dict[str, float] = field(default_factory=dict)

    def values(self) -> dict[str, float]:
        """This item's value of every ``eval/...`` metric it contributes to."""
        row = {"eval/reward_mean": sum(self.turn_rewards) / len(self.turn_rewards)}
        for t, reward in enumerate(self.turn_rewards):
            row[f"eval/turn_{t + 1}/reward_mean"] = reward
        row["eval/turn_1/expected_return"] = self.episode_return
        if self.correct is not None:
            row.update({f"eval/pass@{k}": v for k, v in pass_at_ks(self.samples, self.correct).items()})
            row[f"eval/avg@{self.samples}"] = self.correct / self.samples
        row.update(self.task_metrics)
        return row

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "turn_rewards": self.turn_rewards, "return": self.episode_return,
                "samples": self.samples, "correct": self.correct, "task_metrics": self.task_metrics}


@dataclass
class EvalOutcome:
    """An evaluation: its ``eval/...`` metrics, their standard errors over items (same keys), every
    item's outcome and the evaluated episodes (one path per item)."""

    metrics: dict[str, float]
    standard_errors: dict[str, float]
    items: list[ItemOutcome]
    episodes: list[Any]


def evaluate(trainer: Any, num_eval_samples: int | None = None, *, greedy: bool | None = None,
             samples_per_item: int | None = None, sink: Sink | None = None) -> dict[str, float]:
    """A trainer's ``evaluate()``: the first ``num_eval_samples`` eval items (default ``eval_num_samples``).

    Each agent draws ``samples_per_item`` completions per turn (1 when greedy); the per-turn
    reward averages all of them, the episode follows the first joint action, and pass@k uses
    all of them at the last turn. Returns ``eval/...`` metrics (also sent to ``sink``), with
    ``eval/reward_mean_se``, the standard error of the reward over items.

    ``trainer`` is one that grows rollout trees (a :class:`engine.trainer.MAGRPOTrainer` or
    :class:`engine.preference.madpo.MADPOTrainer`): its config, agents, ``reward``, ``tree`` (whose
    pool of agent threads is used), eval hooks and counters are read.
    """
    cfg = trainer.args
    if trainer.eval_dataset is None:
        return {}
    count = cfg.eval_num_samples if num_eval_samples is None else num_eval_samples
    outcome = evaluate_items(trainer, trainer.eval_dataset, count, greedy=greedy, samples_per_item=samples_per_item)
    if outcome is None:
        return {}
    metrics = dict(outcome.metrics)
    metrics["eval/reward_mean_se"] = outcome.standard_errors["eval/reward_mean"]
    if sink is not None:
        sink.log_metrics(trainer.step, trainer.env_step, metrics)
        sink.log_transcripts(trainer.step, outcome.episodes)
    return metrics


def evaluate_items(trainer: Any, dataset: Any, count: int, *, greedy: bool | None = None,
                   samples_per_item: int | None = None, split: str = "eval") -> EvalOutcome | None:
    """The team on the first ``count`` items of ``dataset`` (None when there are none): see
    :func:`evaluate`. Draws come from the agents' own generators."""
    cfg = trainer.args
    greedy = cfg.eval_greedy if greedy is None else greedy
    n = 1 if greedy else (samples_per_item or cfg.eval_samples_per_item)
    count = min(count, len(dataset))
    if count <= 0:
        return None
    items = [dict(dataset[i]) for i in range(count)]
    builder = TreeBuilder(trainer.agents, trainer.reward, trainer.external_transition, RolloutSettings(
        samples_per_node=n, num_turns=cfg.num_turns, joint_mode="aligned", turn_order=cfg.turn_order,
        early_termination_threshold=None, external_prompt_passthrough=cfg.external_prompt_passthrough,
        greedy=greedy, expand_first_only=True,
    ), pool=trainer.tree.pool)
    rollout = builder.build(items, list(range(count)))
    assign_returns(rollout, cfg.discount)
    metrics: dict[str, float] = {}
    all_rewards = [x for node in rollout.nodes for x in node.rewards]
    metrics["eval/reward_mean"] = sum(all_rewards) / len(all_rewards)
    for t in range(rollout.num_turns):
        nodes = rollout.nodes_at_turn(t)
        rewards = [x for node in nodes for x in node.rewards]
        metrics[f"eval/turn_{t + 1}/reward_mean"] = sum(rewards) / len(rewards)
        metrics[f"eval/turn_{t + 1}/expected_return"] = sum(node.returns[0] for node in nodes) / len(nodes)
    # one path per item: root, then each node's child through joint action 0
    paths = []
    for root in rollout.roots:
        path = [root]
        while 0 in path[-1].children:
            path.append(path[-1].children[0])
        paths.append(path)
    outcomes = [ItemOutcome(index=i, turn_rewards=[sum(node.rewards) / len(node.rewards) for node in path],
                            episode_return=path[0].returns[0], samples=n) for i, path in enumerate(paths)]
    if trainer.eval_check is not None:
        correct: list[int] = []  # per item: how many of its samples pass
        for outcome, path, item in zip(outcomes, paths, items, strict=True):
            leaf = path[-1]
            outcome.samples = len(leaf.joint_actions)
            outcome.correct = sum(bool(trainer.eval_check(item, leaf.joint_completions(j)))
                                  for j in range(outcome.samples))
            correct.append(outcome.correct)
        per_k, _ = summarize([{f"eval/pass@{k}": v for k, v in pass_at_ks(o.samples, c).items()}
                              for o, c in zip(outcomes, correct, strict=True)])
        metrics.update(per_k)
        metrics[f"eval/avg@{n}"] = mean_and_se([c / o.samples for o, c in zip(outcomes, correct, strict=True)])[0]
    if trainer.eval_logger is not None:
        rows, reduced = hook_metrics(trainer.eval_logger, trainer.eval_aggregator, cfg.num_turns,
                                     trainer._eval_completions(paths), items)
        metrics.update(reduced)
        if len(rows) == len(outcomes):
            for outcome, row in zip(outcomes, rows, strict=True):
                outcome.task_metrics = row
    _, standard_errors = summarize([o.values() for o in outcomes])
    episodes = [branch_episode(path[-1], 0, trainer.agent_names, idx, split=split)
                for idx, path in enumerate(paths)]
    return EvalOutcome(metrics, {k: v for k, v in standard_errors.items() if k in metrics}, outcomes, episodes)


def path_completions(paths: list[list[Any]], num_agents: int) -> list[list[list[str]]]:
    """``[agent][item][turn]``: each agent's text in joint action 0 along every eval path."""
    return [[[node.agents[i].texts[node.joint_actions[0][i]] for node in path] for path in paths]
            for i in range(num_agents)]


def hook_metrics(eval_logger: Any, eval_aggregator: Any, num_turns: int, completions: list[list[list[str]]],
                 items: list[dict]) -> tuple[list[dict[str, float]], dict[str, float]]:
    """CoMLRL's hooks: ``eval_logger(agent_completions_turns=[agent][item][turn], batch_items=,
    prompts=)`` gives one dict per item; ``eval_aggregator(metrics, num_turns=)`` reduces them
    (without an aggregator numeric values are averaged). Keys are logged under ``eval/``.
    Returns the per-item rows' numeric values (under ``eval/``) and the reduced metrics."""
    prompts = [str(item.get("prompt", "")) for item in items]
    per_item = _call_with_accepted(eval_logger, agent_completions_turns=completions,
                                   batch_items=items, prompts=prompts) or []
    if eval_aggregator is not None:
        reduced = _call_with_accepted(eval_aggregator, per_item, num_turns=num_turns) or {}
    else:
        sums: dict[str, list[float]] = {}
        for row in per_item:
            for key, value in row.items():
                if _is_number(value):
                    sums.setdefault(key, []).append(float(value))
        reduced = {k: sum(v) / len(v) for k, v in sums.items()}
    rows = [{_eval_key(k): float(v) for k, v in row.items() if _is_number(v)} for row in per_item]
    return rows, {_eval_key(k): float(v) for k, v in reduced.items() if isinstance(v, int | float)}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _eval_key(key: str) -> str:
    return key if key.startswith("eval/") else f"eval/{key}"


# -- The statistics of an evaluation over items: means with their standard errors, and pass@k ----------------
def mean_and_se(values: Sequence[float]) -> tuple[float, float]:
    """The mean of ``values`` and its standard error ``s / sqrt(n)`` (``s``: the n-1 standard deviation)."""
    n = len(values)
    if n == 0:
        raise ValueError("mean_and_se needs at least one value")
    mean = sum(values) / n
    if n == 1:
        return mean, 0.0
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(variance / n)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimator: probability that at least one of k draws (without replacement)
    from n samples, c of them correct, is correct: ``1 - C(n-c, k) / C(n, k)``."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prob_all_wrong = 1.0
    for i in range(n - c + 1, n + 1):
        prob_all_wrong *= 1.0 - k / i
    return 1.0 - prob_all_wrong


def pass_at_ks(n: int, c: int) -> dict[int, float]:
    """Unbiased pass@k for every k from 1 to ``n``, for one item with ``c`` of ``n`` samples correct."""
    return {k: pass_at_k(n, c, k) for k in range(1, n + 1)}


def summarize(per_item: Sequence[dict[str, float]]) -> tuple[dict[str, float], dict[str, float]]:
    """Means and standard errors of every key over the items that report it (``(means, ses)``)."""
    keys: dict[str, list[float]] = {}
    for row in per_item:
        for key, value in row.items():
            keys.setdefault(key, []).append(float(value))
    means, ses = {}, {}
    for key, values in keys.items():
        means[key], ses[key] = mean_and_se(values)
    return means, ses
