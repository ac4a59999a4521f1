"""Trainer settings an algorithm does not read, as the form and the Config tab show them.

Every algorithm's config class reads the one settings catalog (``engine.schema.algorithms`` says which
run-config settings it lacks). The form hides the iterative trainers' settings from other algorithms
unless a draft changed one; a changed one is refused next to its field by the build's own check
(:func:`engine.schema.configure.trainer_problems`, through :func:`app.draft.validate`). Torch-free.
"""

from __future__ import annotations

from typing import Any

from engine.schema.algorithms import CONFIG_CLASSES, unused_settings
from engine.schema.run_config import TrainerSpec

# Settings only the iterative preference trainers read (comparators, replay, iteration files): the form
# shows them for madpo_iter/marlhf_iter, and for another algorithm only when a draft has changed one
# (so its refusal is shown next to it).
ITERATIVE = ("madpo_iter", "marlhf_iter")
ITERATIVE_ONLY = tuple(name for name in TrainerSpec.model_fields
                       if all(name in unused_settings(a) for a in CONFIG_CLASSES if a not in ITERATIVE)
                       and not all(name in unused_settings(a) for a in ITERATIVE))


def shown_for(name: str, trainer: dict[str, Any]) -> bool:
    """Whether the form shows trainer setting ``name`` for this draft (see :data:`ITERATIVE_ONLY`)."""
    if name not in ITERATIVE_ONLY or trainer.get("algorithm") in ITERATIVE:
        return True
    return name in trainer and trainer[name] != getattr(TrainerSpec(), name)


def split_by_use(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run config split in two: the settings its algorithm reads (everything but the trainer settings
    it does not read, order kept), and those it does not read (``{"trainer": {...}}``, empty when none).
    The run's Config tab shows the first and folds the second away."""
    trainer = config.get("trainer")
    algorithm = (trainer or {}).get("algorithm") or "magrpo" if isinstance(trainer, dict) else None
    if algorithm not in CONFIG_CLASSES:
        return dict(config), {}
    unread = set(unused_settings(algorithm))
    read = {**config, "trainer": {k: v for k, v in trainer.items() if k not in unread}}
    rest = {k: v for k, v in trainer.items() if k in unread}
    return read, ({"trainer": rest} if rest else {})


def unread_label(config: dict[str, Any], unread: dict[str, Any]) -> str:
    """The fold's title: how many settings the algorithm does not read, and whether any was changed."""
    algorithm = (config.get("trainer") or {}).get("algorithm") or "magrpo"
    settings = unread.get("trainer") or {}
    defaults = TrainerSpec()
    changed = [name for name, value in settings.items()
               if name in TrainerSpec.model_fields and value != getattr(defaults, name)]
    state = "at their defaults" if not changed else f"{len(changed)} changed, ignored by the run"
    return f"{len(settings)} settings not read by {algorithm} ({state})"
