"""The ``trainer.actor_critic`` settings of IAC/MAAC runs for the form: fields, defaults, validation.

The defaults and the validation come from the trainers' own config dataclasses
(``engine.actor_critic.config``: ``IACConfig``/``MAACConfig``, CoMLRL's names and defaults), so
the form always shows what a run would use. That module is plain dataclasses (the trainers, and
torch, load lazily), so the dashboard can import it.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from app.fields import FieldForm
from engine.actor_critic.config import IACConfig, MAACConfig
from engine.spec import TrainerSpec

ACTOR_CRITIC_ALGORITHMS = ("iac", "maac")
SETTINGS = (
    "critic_type", "critic_learning_rate", "value_clip_range", "value_loss_coef", "use_separate_critic",
    "critic_value_head_hidden_dim", "value_head_hidden_dim", "critic_devices",
)
_HELP = {
    "critic_type": "v: value of the history (read before the reply); q: value of history and reply.",
    "critic_learning_rate": "AdamW learning rate of the critics (empty = the agents' learning rate).",
    "value_clip_range": "Clip each value's move from its rollout-time estimate (empty = unclipped).",
    "value_loss_coef": "Weight of the value loss when actor and value head share one optimizer.",
    "use_separate_critic": "On: a separate critic model per agent; off: a value head on the agent's backbone.",
    "critic_value_head_hidden_dim": "Hidden width of the critic's value head (empty = a linear head).",
    "value_head_hidden_dim": "Hidden width of a value head on the agent's backbone (empty = linear).",
    "critic_devices": "Device per critic, comma-separated (one is used for all; empty = the agent's device).",
}
_CRITIC_TYPES = ("v", "q")
_SPEC_ONLY = {"algorithm", "device", "torch_dtype", "actor_critic"}


def config_class(algorithm: str) -> type:
    """``IACConfig`` for ``iac``, ``MAACConfig`` for ``maac``."""
    if algorithm not in ACTOR_CRITIC_ALGORITHMS:
        raise ValueError(f"{algorithm!r} is not an actor-critic algorithm ({', '.join(ACTOR_CRITIC_ALGORITHMS)})")
    return IACConfig if algorithm == "iac" else MAACConfig


def defaults(algorithm: str) -> dict[str, Any]:
    """The default of each actor-critic setting the algorithm has (MAAC has no separate-critic switch)."""
    found = {f.name: f.default for f in fields(config_class(algorithm)) if f.default is not MISSING}
    return {name: found[name] for name in SETTINGS if name in found}


def forms(algorithm: str) -> list[FieldForm]:
    """One widget description per setting of ``algorithm``, typed from the dataclass annotations."""
    types = {f.name: str(f.type) for f in fields(config_class(algorithm))}
    out = []
    for name, default in defaults(algorithm).items():
        annotation = types[name]
        optional = "None" in annotation
        common = {"name": name, "optional": optional, "help": _HELP.get(name), "default": default}
        if name == "critic_type":
            out.append(FieldForm(kind="choice", choices=_CRITIC_TYPES, **common))
        elif "list[str]" in annotation:
            out.append(FieldForm(kind="list_str", **common))
        elif annotation.startswith("bool"):
            out.append(FieldForm(kind="bool", **common))
        elif annotation.startswith("int"):
            out.append(FieldForm(kind="int", **common))
        elif annotation.startswith("float"):
            out.append(FieldForm(kind="float", **common))
        else:
            out.append(FieldForm(kind="str", **common))
    return out


def unused_trainer_fields(algorithm: str) -> list[str]:
    """``TrainerSpec`` fields the actor-critic trainers do not read (MAGRPO-only: ``clip_epsilon``, ...)."""
    known = {f.name for f in fields(config_class(algorithm))}
    return [name for name in TrainerSpec.model_fields if name not in known and name not in _SPEC_ONLY]


def validate(trainer: dict[str, Any]) -> dict[str, list[str]]:
    """Problems of an iac/maac trainer section by dotted path (empty for other algorithms).

    Checks what the run would refuse when it starts: unknown ``actor_critic`` keys, each setting's
    value (by the config class itself) and MAGRPO-only trainer fields changed from their defaults.
    """
    algorithm = trainer.get("algorithm")
    if algorithm not in ACTOR_CRITIC_ALGORITHMS:
        return {}
    errors: dict[str, list[str]] = {}
    spec_defaults = TrainerSpec()
    for name in unused_trainer_fields(algorithm):
        if name in trainer and trainer[name] != getattr(spec_defaults, name):
            errors.setdefault(f"trainer.{name}", []).append(
                f"not used by {algorithm}; leave it at its default ({getattr(spec_defaults, name)!r}) "
                f"or use a MAGRPO-family algorithm")
    settings = trainer.get("actor_critic") or {}
    if not isinstance(settings, dict):
        errors["trainer.actor_critic"] = [f"must be a mapping of settings, got {type(settings).__name__}"]
        return errors
    cls = config_class(algorithm)
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(settings) - known)
    if unknown:
        errors["trainer.actor_critic"] = [
            f"unknown settings {unknown} for {algorithm}; known: {', '.join(s for s in SETTINGS if s in known)}"]
        return errors
    try:
        cls(**settings)
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
