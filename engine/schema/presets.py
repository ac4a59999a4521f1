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

# CoMLRL's settings for its benchmarks (LLM_Collab_Code_Generation magrpo_che, LLM_Collab_Writing magrpo_tldr)
CODE_TRAINER: dict[str, Any] = {
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
}
WRITING_TRAINER: dict[str, Any] = {
    "algorithm": "magrpo",
    "num_train_epochs": 2,
    "agent_learning_rate": 5e-6,
    "num_generations": 4,
    "max_new_tokens": 256,
    "temperature": 0.7,
    "top_p": 0.9,
    "num_turns": 1,
    "rollout_buffer_size": 1,
    "eval_interval": 20,
    "eval_num_samples": 4,
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
    "coop_humaneval": {
        "title": "CoMLRL: CoopHumanEval (helper + main, two turns, level reward)",
        "description": (
            "CoMLRL's CoopHumanEval benchmark with its level reward (max 4.0) and level_feedback between the "
            "two turns; trainer settings from CoMLRL's magrpo_che configuration. Needs OpenMLRL/CoopHumanEval "
            "in the Hugging Face cache, or set task.params.dataset to a local .jsonl/.parquet file."
        ),
        "config": {
            "name": "coop-humaneval",
            "tags": ["code", "comlrl", "coop_humaneval"],
            "agents": [{"name": "helper", "model": SMOLLM}, {"name": "main", "model": SMOLLM}],
            "task": {"name": "coop_humaneval", "params": {"train_slice": "16:", "eval_slice": "0:16"}},
            "trainer": CODE_TRAINER,
        },
    },
    "mbpp": {
        "title": "CoMLRL: MBPP (helper + main, two turns, level reward)",
        "description": (
            "CoMLRL's MBPP benchmark in HumanEval's form with its level reward and level_feedback. Needs "
            "OpenMLRL/MBPP in the Hugging Face cache, or set task.params.dataset to a local file."
        ),
        "config": {
            "name": "mbpp-coop",
            "tags": ["code", "comlrl", "mbpp"],
            "agents": [{"name": "helper", "model": SMOLLM}, {"name": "main", "model": SMOLLM}],
            "task": {"name": "mbpp", "params": {"train_slice": "15:65", "eval_slice": "0:15"}},
            "trainer": CODE_TRAINER,
        },
    },
    "humaneval_level": {
        "title": "CoMLRL: HumanEval with the level reward (helper + main, two turns)",
        "description": (
            "The shipped HumanEval problems (offline) scored with CoMLRL's level reward (max 4.0) instead of "
            "CoopLab's tiered ladder, level_feedback between turns, the last 31 problems held out."
        ),
        "config": {
            "name": "humaneval-level",
            "tags": ["code", "comlrl", "humaneval"],
            "agents": [{"name": "helper", "model": SMOLLM}, {"name": "main", "model": SMOLLM}],
            "task": {"name": "humaneval", "params": {"train_slice": "0:133", "eval_slice": "133:164",
                                                     "reward": "level", "feedback_mode": "level_feedback"}},
            "trainer": CODE_TRAINER,
        },
    },
    "tldr": {
        "title": "CoMLRL: TLDR summary + expansion (level reward)",
        "description": (
            "CoMLRL's TLDR benchmark: a concise summary and a detailed expansion of a post, scored by its level "
            "reward (max 3.0); trainer settings from CoMLRL's magrpo_tldr configuration. Needs trl-lib/tldr in "
            "the Hugging Face cache, or set task.params.dataset (and eval_dataset) to local files."
        ),
        "config": {
            "name": "tldr-coop",
            "tags": ["writing", "comlrl", "tldr"],
            "agents": [{"name": "summary", "model": SMOLLM}, {"name": "expansion", "model": SMOLLM}],
            "task": {"name": "tldr", "params": {}},
            "trainer": WRITING_TRAINER,
        },
    },
    "arxiv": {
        "title": "CoMLRL: arXiv abstract to introduction (level reward)",
        "description": (
            "CoMLRL's arXiv benchmark: from an abstract, an introduction's background and its method paragraphs, "
            "scored by its level reward (max 3.0). Needs OpenMLRL/arXiv_abstract in the Hugging Face cache, or "
            "set task.params.dataset (and eval_dataset) to local files."
        ),
        "config": {
            "name": "arxiv-coop",
            "tags": ["writing", "comlrl", "arxiv"],
            "agents": [{"name": "background", "model": SMOLLM}, {"name": "method", "model": SMOLLM}],
            "task": {"name": "arxiv", "params": {}},
            "trainer": WRITING_TRAINER,
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
