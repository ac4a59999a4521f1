"""The docs' settings table, written from the catalog and the classes that use each setting.

``python -m engine.schema.settings_table > docs/settings.md`` regenerates it; a test checks the file is
current, so the docs cannot drift from the code.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic_core import PydanticUndefined

from engine.schema.catalog import CATALOG

_GROUPS = {
    "run": "What to train, and for how long", "optimisation": "Optimisation", "rollout": "Rollout and credit",
    "sampling": "Sampling", "devices": "Devices and models", "reporting": "Evaluation, checkpoints, reporting",
    "actor_critic": "Actor-critic (iac, maac)", "preference": "Preference (madpo, madpo_iter, marlhf, marlhf_iter)",
    "lora": "LoRA adapters (per agent)",
}


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    if typing.get_origin(annotation) is typing.Literal:
        return " \\| ".join(repr(a) for a in typing.get_args(annotation))
    parts = [_type_name(a) for a in typing.get_args(annotation)] if typing.get_origin(annotation) in (
        typing.Union, types.UnionType) else [repr(annotation).replace("typing.", "")]
    return " \\| ".join(p.replace("NoneType", "None") for p in parts)


def _bounds(info: Any) -> str:
    parts = []
    for item in info.metadata:
        for name, symbol in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            value = getattr(item, name, None)
            if value is not None:
                parts.append(f"{symbol} {value}")
        if getattr(item, "strict", None):
            parts.append("strict")
    return ", ".join(parts)


def _default(cls: Any, name: str) -> str:
    fields = getattr(cls, "__pydantic_fields__", None) or cls.model_fields
    if name not in fields:
        return ""
    value = fields[name].default
    unread = "†" if name in getattr(cls, "compat_only", ()) else ""
    return "" if value is PydanticUndefined else f"`{value!r}`{unread}"


def settings_table() -> str:
    """Markdown: one table per group, a row per setting with its default in each class that has it."""
    from engine.schema.actor_critic_configs import IACConfig, MAACConfig
    from engine.schema.configs import MAGRPOConfig
    from engine.schema.preference_configs import (
        CentralizedMAGRPOConfig,
        MADPOConfig,
        MADPOIterConfig,
        MARLHFConfig,
        MARLHFIterConfig,
    )
    from engine.schema.run_config import ActorCriticSection, AgentSpec, TrainerSpec

    columns = (("run config", TrainerSpec), ("MAGRPOConfig", MAGRPOConfig), ("IACConfig", IACConfig),
               ("MAACConfig", MAACConfig), ("MADPOConfig", MADPOConfig),
               ("CentralizedMAGRPOConfig", CentralizedMAGRPOConfig),
               ("MARLHFConfig", MARLHFConfig), ("MADPOIterConfig", MADPOIterConfig),
               ("MARLHFIterConfig", MARLHFIterConfig))
    lines = ["# Trainer settings", "",
             "Generated from `engine/schema/catalog.py` by `python -m engine.schema.settings_table`; do not edit by hand.",
             "Each setting is declared once there, with the algorithms that read it; a class without a "
             "default in its column does not have the setting, and † marks a setting the class accepts from "
             "CoMLRL scripts but its algorithm does not read (a run config refuses it changed for that "
             "algorithm). "
             "The run config's `trainer` section holds the actor-critic settings under "
             "`trainer.actor_critic` (only the ones given are stored; the others keep the algorithm's default); "
             "the LoRA settings are set per agent, in the run config's `agents` entries (see docs/lora.md).",
             ""]
    for group, title in _GROUPS.items():
        lines += [f"## {title}", "",
                  "| setting | type | bounds | " + " | ".join(label for label, _ in columns) + " | description |",
                  "|---" * (len(columns) + 4) + "|"]
        for name, setting in CATALOG.items():
            if setting.group != group:
                continue
            defaults = []
            for _, cls in columns:
                if cls is TrainerSpec and group == "lora":
                    defaults.append(f"per agent: {_default(AgentSpec, name)}")
                elif cls is TrainerSpec and group == "actor_critic":
                    defaults.append("(section)" if name in ActorCriticSection.model_fields else "")
                else:
                    defaults.append(_default(cls, name))
            lines.append(f"| `{name}` | {_type_name(setting.annotation)} | {_bounds(setting.field)} | "
                         + " | ".join(defaults) + f" | {setting.field.description} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(settings_table())
