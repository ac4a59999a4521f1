"""CoMLRL's ``comlrl.utils.wandb_utils``: a launcher's ``wandb_config`` as ``wandb.init`` arguments."""

from __future__ import annotations

import os
from typing import Any


def wandb_init_kwargs(wandb_config: Any, run_config: dict[str, Any]) -> dict[str, Any]:
    """``wandb.init`` keyword arguments; every ``config_sections`` entry is added to ``run_config``
    (plus ``dataset_name``/``dataset_type`` from its ``dataset`` section), which becomes ``config``."""
    sections = wandb_config.get("config_sections") if isinstance(wandb_config, dict) else None
    if isinstance(sections, dict):
        run_config.update(sections)
        dataset = sections.get("dataset")
        if isinstance(dataset, dict):
            for key in ("name", "type"):
                if dataset.get(key):
                    run_config[f"dataset_{key}"] = dataset[key]
    kwargs: dict[str, Any] = {"project": wandb_config.get("project"), "entity": wandb_config.get("entity"),
                              "name": wandb_config.get("name") or wandb_config.get("run_name"), "config": run_config}
    if wandb_config.get("dir") is not None:
        os.makedirs(wandb_config["dir"], exist_ok=True)
        kwargs["dir"] = wandb_config["dir"]
    if isinstance(wandb_config.get("tags"), list):
        kwargs["tags"] = wandb_config["tags"]
    for key in ("id", "resume"):
        if key in wandb_config:
            kwargs[key] = wandb_config[key]
    return kwargs


def verbose_from_wandb_config(wandb_config: Any) -> bool:
    """``config_sections.output.verbose`` (default True)."""
    if not isinstance(wandb_config, dict):
        return True
    sections = wandb_config.get("config_sections", {})
    output = sections.get("output", {}) if isinstance(sections, dict) else {}
    return bool(output.get("verbose", True)) if isinstance(output, dict) else True
