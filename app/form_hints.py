"""Hints the experiment form shows under the trainer settings (pure functions, no Streamlit).

They are not errors (the config is valid) but say what a setting will do that a user may not want:
no best checkpoint kept for evaluating later, ``checkpoint_total_limit`` deleting checkpoints as
training goes, a learning rate far above what a pretrained model stands.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.escape import md_text

PRETRAINED_MAX_LR = 1e-4
"""Above this a pretrained model's fine-tuning usually diverges (SmolLM2-135M at 1e-3 collapsed by step 3);
the usual range is 1e-6 to 5e-5. The built-in tiny models start from random weights and learn at 1e-3."""

SUGGESTED_LR = 5e-6


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def checkpoints_written(trainer: Mapping[str, Any]) -> int | None:
    """How many ``checkpoint-<step>`` folders a run of ``trainer`` writes: one every
    ``checkpoint_interval`` steps and one at the end (None without ``max_steps``)."""
    steps, interval = _number(trainer.get("max_steps")), _number(trainer.get("checkpoint_interval")) or 0
    if steps is None or steps <= 0:
        return None
    if interval <= 0:
        return 1
    return int(steps // interval) + (1 if steps % interval else 0)


def checkpoint_hints(trainer: Mapping[str, Any]) -> list[str]:
    """What the checkpoint settings will keep: a warning when ``checkpoint_total_limit`` deletes some
    of the checkpoints the run writes, and a hint when no best checkpoint is kept."""
    hints = []
    limit = _number(trainer.get("checkpoint_total_limit"))
    written = checkpoints_written(trainer)
    if limit is not None and written is not None and written > limit:
        hints.append(f"**Checkpoints deleted as training goes**: this run writes {written} checkpoints (every "
                     f"{int(_number(trainer.get('checkpoint_interval')) or 0)} steps and at the end) but "
                     f"`checkpoint_total_limit` {int(limit)} keeps only the newest {int(limit)}: the "
                     f"{written - int(limit)} older ones are deleted. Raise the limit or clear it (Advanced trainer "
                     "settings) to keep the ones you want to evaluate or resume from.")
    if not trainer.get("best_checkpoint_metric"):
        hints.append("**No best checkpoint is kept**: only the newest checkpoints stay. To evaluate the best one "
                     "later, set `best_checkpoint_metric` (Advanced trainer settings; e.g. `eval/reward_mean`, with "
                     "`eval_interval` above 0): it is kept in `checkpoints/best` and never deleted.")
    return hints


def learning_rate_warnings(config: Mapping[str, Any]) -> list[str]:
    """A warning per agent whose learning rate (its own, else the trainer's ``agent_learning_rate``) is far
    above what its pretrained model stands; the built-in tiny models (random weights) are exempt."""
    trainer = config.get("trainer") or {}
    default = _number(trainer.get("agent_learning_rate"))
    warnings = []
    for index, agent in enumerate(config.get("agents") or ()):
        if not isinstance(agent, Mapping):
            continue
        model = str(agent.get("model") or "")
        own = _number(agent.get("learning_rate"))
        rate = own if own is not None else default
        if rate is None or rate <= PRETRAINED_MAX_LR or model.startswith("builtin:tiny"):
            continue
        where = f"`agents.{index}.learning_rate`" if own is not None else "`trainer.agent_learning_rate`"
        warnings.append(f"**Learning rate {rate:g} for agent '{md_text(agent.get('name') or index)}' "
                        f"({md_text(model)})** is far above "
                        f"what a pretrained model stands (usually 1e-6 to 5e-5; above {PRETRAINED_MAX_LR:g} its "
                        f"replies typically collapse within a few steps: SmolLM2 at 1e-3 did by step 3). The "
                        f"tiny models' 1e-3 is for random weights. Try {SUGGESTED_LR:g} ({where}).")
    return warnings
