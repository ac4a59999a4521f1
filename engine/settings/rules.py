"""The rules that tie trainer settings together, written once for every config class.

Each rule reads only the settings it needs (a class without them skips it) and reports
``"field: message"``, naming the field to change.
"""

from __future__ import annotations

from typing import Any

from engine.settings.catalog import CATALOG

_MISSING = object()


def combination_problems(settings: Any) -> list[str]:
    """Problems of a combination of settings (pure function of the object's attributes)."""

    def get(name: str) -> Any:
        return getattr(settings, name, _MISSING)

    problems = []
    epochs, clip = get("num_inner_epochs"), get("clip_epsilon")
    if epochs is not _MISSING and clip is not _MISSING and epochs > 1 and clip is None:
        problems.append("num_inner_epochs: > 1 reuses rollouts off-policy; set clip_epsilon (e.g. 0.2) as well")
    if get("parallel_training") == "mp" and not get("agent_devices"):
        problems.append("agent_devices: parallel_training='mp' needs agent_devices, e.g. ['cuda:0', 'cuda:1']")
    if get("turn_order") == "sequential" and get("joint_mode") == "cross":
        problems.append("turn_order: 'sequential' works with joint_mode='aligned' only")
    if get("lora_rank") is None:
        for name in ("lora_alpha", "lora_dropout", "lora_target_modules"):
            if get(name) not in (_MISSING, CATALOG[name].default):
                problems.append(f"{name}: has no effect without lora_rank; set lora_rank (e.g. 8) or leave {name} out")
    problems += _comparator_problems(get)
    return problems


def _comparator_problems(get: Any) -> list[str]:
    """A checkpoint comparator needs comparator_policy='model' (the policy that samples fixed weights);
    each replay setting belongs to its replay mode (CoMLRL's rules)."""
    problems = []
    policy = get("comparator_policy")
    if get("comparator_checkpoint") not in (_MISSING, None) and policy is not _MISSING and policy != "model":
        problems.append(f"comparator_checkpoint: a checkpoint is the comparator of comparator_policy='model' "
                        f"(this config has {policy!r}); set comparator_policy to 'model' or leave "
                        f"comparator_checkpoint empty")
    mode = get("preference_replay_mode")
    if mode is _MISSING:
        return problems
    for name, owner in (("preference_replay_k", "nearest_k"), ("preference_replay_lambda", "lambda_decay")):
        value = get(name)
        if value is None and mode == owner:
            problems.append(f"{name}: preference_replay_mode='{owner}' needs it; set it")
        if value not in (_MISSING, None) and mode != owner:
            problems.append(f"{name}: only preference_replay_mode='{owner}' reads it (this config has {mode!r}); "
                            f"leave it empty")
    if get("preference_replay_sample_size") not in (_MISSING, None) and mode == "current":
        problems.append("preference_replay_sample_size: preference_replay_mode='current' trains on the iteration's "
                        "own pairs; choose nearest_k, all_history or lambda_decay, or leave it empty")
    return problems


def group_size_problem(algorithm: str, num_generations: int) -> str | None:
    """The MAGRPO family's baseline compares siblings: it needs at least two samples per node."""
    if num_generations < 2 and algorithm not in ("iac", "maac"):
        return f"must be >= 2 for {algorithm} (the group baseline needs siblings)"
    return None
