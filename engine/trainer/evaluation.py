"""Evaluation: one path per eval item (greedy or sampled), per-turn reward and expected return,
CoMLRL's ``eval_logger``/``eval_aggregator`` hooks, and unbiased pass@k when a ``check`` is given."""

from __future__ import annotations

import inspect
from typing import Any

from engine.sinks.base import Sink
from engine.trainer.advantages import pass_at_k
from engine.trainer.credit import assign_returns
from engine.trainer.reporting import branch_episode
from engine.trainer.rollout import RolloutSettings, TreeBuilder

PASS_AT = (1, 3, 5, 10)


def _call_with_accepted(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` passing only the keywords its signature accepts (CoMLRL loggers vary)."""
    params = inspect.signature(fn).parameters.values()
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        names = {p.name for p in inspect.signature(fn).parameters.values()}
        kwargs = {k: v for k, v in kwargs.items() if k in names}
    return fn(*args, **kwargs)


class EvaluationMixin:
    """``evaluate()`` for :class:`engine.trainer.MAGRPOTrainer`."""

    def evaluate(
        self,
        num_eval_samples: int | None = None,
        *,
        greedy: bool | None = None,
        samples_per_item: int | None = None,
        sink: Sink | None = None,
    ) -> dict[str, float]:
        """Evaluate on the first ``num_eval_samples`` eval items (default ``eval_num_samples``).

        Each agent draws ``samples_per_item`` completions per turn (1 when greedy); the per-turn
        reward averages all of them, the episode follows the first joint action, and pass@k uses
        all of them at the last turn. Returns ``eval/...`` metrics (also sent to ``sink``).
        """
        cfg = self.args
        if self.eval_dataset is None:
            return {}
        greedy = cfg.eval_greedy if greedy is None else greedy
        n = 1 if greedy else (samples_per_item or cfg.eval_samples_per_item)
        count = min(cfg.eval_num_samples if num_eval_samples is None else num_eval_samples, len(self.eval_dataset))
        if count <= 0:
            return {}
        items = [dict(self.eval_dataset[i]) for i in range(count)]
        builder = TreeBuilder(self.agents, self.reward, self.external_transition, RolloutSettings(
            num_generations=n, num_turns=cfg.num_turns, joint_mode="aligned", turn_order=cfg.turn_order,
            early_termination_threshold=None, external_prompt_passthrough=cfg.external_prompt_passthrough,
            greedy=greedy, expand_first_only=True,
        ), pool=self.tree.pool)
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
        if self.eval_check is not None:
            for k in PASS_AT:
                if k <= n:
                    scores = []
                    for path, item in zip(paths, items, strict=True):
                        leaf = path[-1]
                        correct = sum(bool(self.eval_check(item, leaf.joint_completions(j)))
                                      for j in range(len(leaf.joint_actions)))
                        scores.append(pass_at_k(len(leaf.joint_actions), correct, k))
                    metrics[f"eval/pass@{k}"] = sum(scores) / len(scores)
        if self.eval_logger is not None:
            metrics.update(self._hook_metrics(paths, items))
        episodes = [branch_episode(path[-1], 0, self.agent_names, idx, split="eval")
                    for idx, path in enumerate(paths)]
        if sink is not None:
            sink.log_metrics(self.step, self.env_step, metrics)
            sink.log_transcripts(self.step, episodes)
        return metrics

    def _eval_completions(self, paths: list[list[Any]]) -> list[list[list[str]]]:
        """``[agent][item][turn]``: each agent's text in joint action 0 along every eval path."""
        return [[[node.agents[i].texts[node.joint_actions[0][i]] for node in path] for path in paths]
                for i in range(self.num_agents)]

    def _hook_metrics(self, paths: list[list[Any]], items: list[dict]) -> dict[str, float]:
        """CoMLRL's hooks: ``eval_logger(agent_completions_turns=[agent][item][turn], batch_items=,
        prompts=)`` gives one dict per item; ``eval_aggregator(metrics, num_turns=)`` reduces them
        (without an aggregator numeric values are averaged). Keys are logged under ``eval/``."""
        completions = self._eval_completions(paths)
        prompts = [str(item.get("prompt", "")) for item in items]
        per_item = _call_with_accepted(self.eval_logger, agent_completions_turns=completions,
                                       batch_items=items, prompts=prompts) or []
        if self.eval_aggregator is not None:
            reduced = _call_with_accepted(self.eval_aggregator, per_item, num_turns=self.args.num_turns) or {}
        else:
            sums: dict[str, list[float]] = {}
            for row in per_item:
                for key, value in row.items():
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        sums.setdefault(key, []).append(float(value))
            reduced = {k: sum(v) / len(v) for k, v in sums.items()}
        return {(k if k.startswith("eval/") else f"eval/{k}"): float(v) for k, v in reduced.items()
                if isinstance(v, int | float)}
