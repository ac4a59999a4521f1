"""The ``trainer.actor_critic`` settings of IAC/MAAC runs (and of MARLHF with an IAC/MAAC stage) for the
form: fields, defaults, validation.

The widgets come from the run config's typed section (``engine.schema.run_config.ActorCriticSection``), the
defaults from the trainers' own config classes (``IACConfig``/``MAACConfig``, CoMLRL's names and
defaults), and which trainer settings an algorithm ignores from ``engine.schema.algorithms``: all of them
read the one settings catalog, so the form always shows what a run would use. None of these
modules imports torch.
"""

from __future__ import annotations

from typing import Any

from app.fields import FieldForm, field_form
from app.unused_settings import unused_setting_errors
from engine.schema.algorithms import CONFIG_CLASSES, unused_settings
from engine.schema.catalog import ACTOR_CRITIC
from engine.schema.run_config import ActorCriticSection, has_critics

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


def unused_trainer_fields(algorithm: str) -> list[str]:
    """``TrainerSpec`` fields the actor-critic trainers do not read (MAGRPO-only: ``clip_epsilon``, ...)."""
    return unused_settings(algorithm)


def validate(trainer: dict[str, Any]) -> dict[str, list[str]]:
    """Problems of an iac/maac trainer section by dotted path (empty for other algorithms).

    Checks what the run would refuse when it starts: unknown ``actor_critic`` keys, each setting's
    value (by the config class itself) and MAGRPO-only trainer fields changed from their defaults.
    """
    algorithm = critic_algorithm(trainer)
    if algorithm is None:
        return {}
    errors = unused_setting_errors(trainer)
    settings = trainer.get("actor_critic") or {}
    if not isinstance(settings, dict):
        errors["trainer.actor_critic"] = [f"must be a mapping of settings, got {type(settings).__name__}"]
        return errors
    cls = config_class(algorithm)
    known = set(cls.field_names())
    unknown = sorted(set(settings) - known)
    if unknown:
        errors["trainer.actor_critic"] = [
            f"unknown settings {unknown} for {algorithm}; known: {', '.join(s for s in SETTINGS if s in known)}"]
        return errors
    stage = {"rl_algorithm": trainer.get("rl_algorithm"), "num_generations": 1} if algorithm == "marlhf" else {}
    try:
        cls(**stage, **settings)
    except ValueError as exc:
        name, _, message = str(exc).partition(": ")
        path = f"trainer.actor_critic.{name}" if name in settings else "trainer.actor_critic"
        errors.setdefault(path, []).append(message if name in settings else str(exc))
    except TypeError as exc:
        errors.setdefault("trainer.actor_critic", []).append(f"a setting has the wrong type: {exc}")
    return errors


def edited_settings(algorithm: str, shown: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """The mapping to store: settings that differ from the defaults or were already written, in order,
    plus keys the form does not show (kept so validation can name them)."""
    base = defaults(algorithm)
    out = {k: v for k, v in before.items() if k not in base}
    for name, default in base.items():
        if name in before or shown.get(name, default) != default:
            out[name] = shown.get(name, default)
    return out
