"""The ``trainer.actor_critic`` settings of IAC/MAAC runs (and of MARLHF with an IAC/MAAC stage) for the
form: fields and defaults.

The widgets come from the run config's typed section (``engine.schema.run_config.ActorCriticSection``), the
defaults from the trainers' own config classes (``IACConfig``/``MAACConfig``, CoMLRL's names and
defaults): both read the one settings catalog, so the form always shows what a run would use. The
values are checked where the run checks them (:func:`engine.schema.configure.trainer_problems`, through
:func:`app.draft.validate`). None of these modules imports torch.
"""

from __future__ import annotations

from typing import Any

from app.fields import FieldForm, field_form
from engine.schema.algorithms import CONFIG_CLASSES
from engine.schema.catalog import ACTOR_CRITIC
from engine.schema.run_config import ActorCriticSection
from engine.schema.run_config_sections import has_critics

ACTOR_CRITIC_ALGORITHMS = (*ACTOR_CRITIC, "marlhf")  # marlhf: with rl_algorithm iac/maac
SETTINGS = tuple(ActorCriticSection.model_fields)


def critic_algorithm(trainer: dict[str, Any]) -> str | None:
    """Whose critic settings a trainer section has: ``iac``/``maac``, ``marlhf`` when its RL stage is one
    of them, else None."""
    algorithm = trainer.get("algorithm")
    if algorithm in ACTOR_CRITIC:
        return algorithm
    if algorithm == "marlhf" and has_critics(algorithm, trainer.get("rl_algorithm")):
        return algorithm
    return None


def config_class(algorithm: str) -> type:
    """``IACConfig`` for ``iac``, ``MAACConfig`` for ``maac``, ``MARLHFConfig`` for ``marlhf``."""
    if algorithm not in ACTOR_CRITIC_ALGORITHMS:
        raise ValueError(f"{algorithm!r} is not an actor-critic algorithm ({', '.join(ACTOR_CRITIC_ALGORITHMS)})")
    return CONFIG_CLASSES[algorithm]


def defaults(algorithm: str) -> dict[str, Any]:
    """The default of each actor-critic setting the algorithm has (MAAC has no separate-critic switch)."""
    found = {name: info.default for name, info in config_class(algorithm).__pydantic_fields__.items()}
    return {name: found[name] for name in SETTINGS if name in found}


def forms(algorithm: str) -> list[FieldForm]:
    """One widget description per setting of ``algorithm``, with the algorithm's defaults."""
    algorithm_defaults = defaults(algorithm)
    return [field_form(name, config_class(algorithm).__pydantic_fields__[name]) for name in algorithm_defaults
            if name in ActorCriticSection.model_fields]


def edited_settings(algorithm: str, shown: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """The mapping to store: settings that differ from the defaults or were already written, in order,
    plus keys the form does not show (kept so validation can name them)."""
    base = defaults(algorithm)
    out = {k: v for k, v in before.items() if k not in base}
    for name, default in base.items():
        if name in before or shown.get(name, default) != default:
            out[name] = shown.get(name, default)
    return out
