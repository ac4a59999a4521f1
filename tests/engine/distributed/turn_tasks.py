"""A task plugin for the fsdp multi-turn test, loaded by import path
(``tests.engine.distributed.turn_tasks:quickstart_turns``): the quickstart task with a transition that
asks every agent to revise its previous answer (``revise_with_feedback``), so a run can have two turns.
The run sets ``external_prompt_passthrough: true`` (the quickstart's formatters take no external prompt)."""

from __future__ import annotations

import dataclasses

from engine.tasks import build_task
from engine.tasks.base import Task
from engine.tasks.transitions import revise_with_feedback


def quickstart_turns(num_items: int = 4, num_agents: int = 2) -> Task:
    base = build_task("quickstart", {"num_items": num_items, "eval_items": 1}, num_agents)
    return dataclasses.replace(base, name="quickstart_turns", external_transition=revise_with_feedback(),
                               max_turns=None)
