"""Ready-made run configs for the built-in tasks (the dashboard's presets and the README's examples).

Each entry of :data:`PRESETS` has a ``title``, a ``description`` and a ``config``: a plain dict
that :func:`engine.schema.run_config.parse_run_config` accepts. The quick start is measured to learn on a
2-core CPU in about a minute; the others use SmolLM2-135M-Instruct (offline) and want a GPU for
real training, though they run on a CPU too.
"""

from __future__ import annotations

import copy
from typing import Any

SMOLLM = "builtin:smollm2-135m"

# Settings measured on a 2-core CPU: the team reward rises from about 0.3 to above 0.6 within
# 60 steps (see docs/tasks.md).
QUICKSTART_TRAINER: dict[str, Any] = {
    "algorithm": "magrpo",
    "max_steps": 60,
    "num_generations": 8,
    "agent_learning_rate": 1e-3,
    "max_new_tokens": 12,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 50,
    "num_turns": 1,
    "items_per_step": 1,
    "rollout_buffer_size": 1,
    "eval_interval": 20,
    "eval_num_samples": 4,
    "transcripts_per_step": 2,
    "seed": 0,
}

PRESETS: dict[str, dict[str, Any]] = {
    "quickstart": {
        "title": "Quick start: two tiny agents split the alphabet (CPU, about a minute)",
        "description": (
            "Two tiny random models learn to cooperate: one writes letters a-m, the other n-z, and the team "
            "scores only when both parts fit. Expect train/reward_mean to climb from about 0.3 to above 0.6 "
            "within 60 steps on a laptop CPU."
        ),
        "config": {
            "name": "quickstart",
            "description": "Two tiny agents learn to split the alphabet.",
            "tags": ["quickstart", "cpu"],
            "agents": [
                {"name": "first", "model": "builtin:tiny-llama"},
                {"name": "second", "model": "builtin:tiny-llama"},
            ],
            "task": {"name": "quickstart", "params": {}},
            "trainer": QUICKSTART_TRAINER,
        },
    },
    "humaneval": {
        "title": "Cooperative coding on HumanEval (helper + main, two turns)",
        "description": (
            "A helper author and a main-function author solve HumanEval problems; the second turn shows each "
            "agent its team's test results. Tiered reward (structure, syntax, tests, cooperation) with tests "
            "run in the sandbox; pass@k in evaluation. Settings follow CoMLRL's code configuration."
        ),
        "config": {
            "name": "humaneval-coop",
            "tags": ["code", "humaneval"],
            "agents": [
                {"name": "helper", "model": SMOLLM},
                {"name": "main", "model": SMOLLM},
            ],
            "task": {"name": "humaneval", "params": {"train_slice": "0:133", "eval_slice": "133:164"}},
            "trainer": {
                "algorithm": "magrpo",
                "num_train_epochs": 8,
                "agent_learning_rate": 2e-5,
                "num_generations": 4,
                "max_new_tokens": 256,
                "temperature": 0.6,
                "top_p": 0.6,
                "num_turns": 2,
                "rollout_buffer_size": 4,
                "eval_interval": 4,
                "eval_num_samples": 4,
            },
        },
    },
    "writing": {
        "title": "Cooperative writing: summary + elaboration",
        "description": (
            "One agent writes a concise summary, the other an elaboration of the same passage; transparent "
            "heuristics score length ratio, word ranges, diversity, shared vocabulary and relevance."
        ),
        "config": {
            "name": "writing-coop",
            "tags": ["writing"],
            "agents": [
                {"name": "summary", "model": SMOLLM},
                {"name": "elaboration", "model": SMOLLM},
            ],
            "task": {"name": "writing", "params": {}},
            "trainer": {
                "algorithm": "magrpo",
                "num_train_epochs": 2,
                "agent_learning_rate": 5e-6,
                "num_generations": 4,
                "max_new_tokens": 128,
                "temperature": 0.7,
                "top_p": 0.9,
            },
        },
    },
    "self_refine": {
        "title": "Self-refinement: one agent revises its summary with feedback",
        "description": (
            "GRPO over revision trees: one agent summarises a passage, the transition shows it feedback from "
            "the reward's heuristics and asks for a revision; both turns are scored."
        ),
        "config": {
            "name": "self-refine",
            "tags": ["self-play", "multi-turn"],
            "agents": [{"name": "writer", "model": SMOLLM}],
            "task": {"name": "self_refine", "params": {}},
            "trainer": {
                "algorithm": "grpo",
                "num_train_epochs": 2,
                "agent_learning_rate": 5e-6,
                "num_generations": 4,
                "max_new_tokens": 96,
                "temperature": 0.7,
                "top_p": 0.9,
                "num_turns": 2,
            },
        },
    },
}


def preset_config(name: str) -> dict[str, Any]:
    """A deep copy of one preset's run config (safe to edit)."""
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    return copy.deepcopy(PRESETS[name]["config"])
