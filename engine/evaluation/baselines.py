"""Test-time baselines: the same agents on the same items under other ways of working together.

CoMLRL's paper reports trained teams beside four test-time protocols (no training involved):

- ``single``: one agent alone (the first agent's model) plays the task's one-agent form (a coder
  writing everything, a writer producing both parts around the split marker); evaluated as a team
  of one.
- ``parallel`` (naive concatenation): each agent answers its own role prompt independently, the
  parts are joined by the task as they are.
- ``pipeline`` (sequential pipeline): agent 0 answers first; each later agent sees the replies before
  it in its prompt.
- ``discussion`` (one round of discussion): every agent answers, then sees its partners' answers and
  writes its final answer once; the final answers are scored.

Every protocol scores the final joint answers with the task's reward and, where the task has a
check, gives unbiased pass@k; every metric comes with its standard error over items
(:func:`engine.trainer.evaluation.summarize`). :func:`run_protocol` is the loop (pure over the
trainer's agents, reward and check); :func:`engine.evaluation.evaluate.evaluate_run` with
``baseline=`` calls it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.schema.eval_baselines import BASELINES  # the protocols, and which a team can run (torch-free)

DISCUSSION_TEMPLATE = (
    "{prompt}\n\nYour first answer:\n{own}\n\nYour partners' answers:\n{peers}\n\n"
    "Taking your partners' answers into account, write your final answer."
)


def discussion_prompt(prompt: Any, own: str, peers: Sequence[tuple[str, str]]) -> Any:
    """The second-round prompt of one agent: its task, its first answer and its partners' answers. A
    chat conversation (a formatter's list of messages) gets them in its last user message."""
    blocks = "\n\n".join(f"[{name}]\n{reply}" for name, reply in peers)
    if isinstance(prompt, list | tuple):
        messages = [dict(m) for m in prompt]
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        if users:
            last = messages[users[-1]]
            last["content"] = DISCUSSION_TEMPLATE.format(prompt=last.get("content", ""), own=own, peers=blocks)
            return messages
        return [*messages, {"role": "user", "content": DISCUSSION_TEMPLATE.format(prompt="", own=own,
                                                                                  peers=blocks).strip()}]
    return DISCUSSION_TEMPLATE.format(prompt=prompt, own=own, peers=blocks)


def _sample(agent: Any, prompts: list[str], n: int, greedy: bool) -> list[list[str]]:
    sampled, _ = agent.sample(prompts, n, greedy=greedy)
    return [list(s.texts) for s in sampled]


def joint_answers(agents: Sequence[Any], item: dict, protocol: str, n: int, greedy: bool) -> list[list[str]]:
    """``[agent][j]``: each agent's final text in joint answer j (n joint answers) under ``protocol``."""
    from engine.trainer.rollout import call_formatter, render_prompt, with_peer_replies

    values = [call_formatter(agent.formatter, item) for agent in agents]

    def render(agent: Any, value: Any) -> str:
        return render_prompt(value, agent.tokenizer, system_prompt=agent.system_prompt)

    if protocol == "pipeline":
        texts = [_sample(agents[0], [render(agents[0], values[0])], n, greedy)[0]]
        for i in range(1, len(agents)):
            prompts = [render(agents[i], with_peer_replies(values[i], [(agents[p].name, texts[p][j])
                                                                        for p in range(i)])) for j in range(n)]
            texts.append([replies[0] for replies in _sample(agents[i], prompts, 1, greedy)])
        return texts
    first = [_sample(agent, [render(agent, value)], n, greedy)[0] for agent, value in zip(agents, values, strict=True)]
    if protocol in ("parallel", "single") or len(agents) == 1:
        return first
    if protocol != "discussion":
        raise ValueError(f"unknown protocol {protocol!r}; choose one of {', '.join(BASELINES)}")
    final = []
    for i, agent in enumerate(agents):
        prompts = []
        for j in range(n):
            peers = [(agents[p].name, first[p][j]) for p in range(len(agents)) if p != i]
            prompts.append(render(agent, discussion_prompt(values[i], first[i][j], peers)))
        final.append([replies[0] for replies in _sample(agent, prompts, 1, greedy)])
    return final


def item_metrics(rewards: Sequence[float], terms: dict[str, Sequence[float]], correct: int | None) -> dict[str, float]:
    """One item's values: mean team reward and terms over its joint answers, and pass@k with a check."""
    from engine.trainer.evaluation import pass_at_ks

    n = len(rewards)
    row = {"eval/reward_mean": sum(rewards) / n}
    row.update({f"eval/reward/{name}": sum(values) / n for name, values in terms.items()})
    if correct is not None:
        row.update({f"eval/pass@{k}": v for k, v in pass_at_ks(n, correct).items()})
    return row


def run_protocol(trainer: Any, dataset: Any, count: int, protocol: str, *, samples: int,
                 greedy: bool) -> tuple[dict[str, float], dict[str, float], list[dict[str, float]]]:
    """The trainer's agents under ``protocol`` on the first ``count`` items of ``dataset``: (means,
    standard errors, per-item rows)."""
    from engine.trainer.evaluation import summarize

    if protocol not in BASELINES:
        raise ValueError(f"unknown protocol {protocol!r}; choose one of {', '.join(BASELINES)}")
    n = 1 if greedy else samples
    rows = []
    for index in range(min(count, len(dataset))):
        item = dict(dataset[index])
        texts = joint_answers(trainer.agents, item, protocol, n, greedy)
        rewards, terms = trainer.reward.score(texts, [item] * n, [[""] * n for _ in texts])
        correct = None
        if trainer.eval_check is not None:
            correct = sum(bool(trainer.eval_check(item, [texts[i][j] for i in range(len(texts))])) for j in range(n))
        rows.append(item_metrics(list(rewards), dict(terms or {}), correct))
    means, ses = summarize(rows)
    return means, ses, rows
