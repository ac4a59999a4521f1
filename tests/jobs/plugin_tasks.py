"""A task plugin for the worker tests, loaded by import path (``tests.jobs.plugin_tasks:slow_quickstart``).

It is the quickstart task with one more reward term that sleeps, so a training step takes as long as
a test needs: long enough to check that the heartbeat keeps beating during a long step and that a
run ignoring its stop flag is terminated after the grace period.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from engine.rewards.reward_terms import RewardTerm, RewardTerms
from engine.tasks import build_task
from engine.tasks.base import Task


def slow_quickstart(sleep_s: float = 60.0, gate_file: str = "", num_agents: int = 2) -> Task:
    """Quickstart whose reward takes ``sleep_s`` seconds per call: always, or with ``gate_file`` only
    once that file exists (so a test lets a few steps pass, then makes the next one hang)."""
    base = build_task("quickstart", {"num_items": 4, "eval_items": 0}, num_agents)

    def slow(agent_completions, batch_items, prompts):
        if not gate_file or Path(gate_file).exists():
            time.sleep(sleep_s)
        return [0.0] * len(agent_completions[0])

    reward = RewardTerms(task="slow_quickstart", terms=[*base.reward_func.terms, RewardTerm("slow", slow, 0.0)])
    return dataclasses.replace(base, name="slow_quickstart", reward_func=reward)


def fail_once_quickstart(fail_file: str = "", num_agents: int = 2) -> Task:
    """Quickstart whose reward raises once: in the first job that finds ``fail_file`` (it removes the
    file, so among runs in parallel exactly one fails)."""
    base = build_task("quickstart", {"num_items": 4, "eval_items": 0}, num_agents)

    def fail_once(agent_completions, batch_items, prompts):
        try:
            Path(fail_file).unlink()
        except FileNotFoundError:
            return [0.0] * len(agent_completions[0])
        raise RuntimeError("forced failure of this study child")

    reward = RewardTerms(task="fail_once_quickstart",
                         terms=[*base.reward_func.terms, RewardTerm("fail_once", fail_once, 0.0)])
    return dataclasses.replace(base, name="fail_once_quickstart", reward_func=reward)
