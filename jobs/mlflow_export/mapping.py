"""How a CoopLab run reads in MLflow: params from its config, metric keys, tags, the run's status.

Pure functions, no MLflow import: MLflow takes param values of at most 6,000 characters, keys of at
most 250, and metric keys made of letters, digits, ``_ - . : /`` and spaces.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

MAX_PARAM_VALUE = 6000
MAX_KEY = 250
_BAD_KEY_CHARS = re.compile(r"[^A-Za-z0-9_\-.:/ ]")
_STATUS = {
    "succeeded": "FINISHED",
    "failed": "FAILED",
    "lost": "FAILED",
    "stopped": "KILLED",
    "cancelled": "KILLED",
}
TAG_PREFIX = "cooplab."


def clean_key(key: str) -> str:
    """A key MLflow accepts: other characters become ``_``, cut to 250 characters."""
    return _BAD_KEY_CHARS.sub("_", key)[:MAX_KEY]


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= MAX_PARAM_VALUE else text[: MAX_PARAM_VALUE - 1] + "…"


def flatten_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A run config as MLflow params: nested mappings and lists by dotted path (``trainer.seed``,
    ``agents.0.model``), values as text (JSON for non-strings), long values cut."""
    params: dict[str, str] = {}
    items: Iterable[tuple[Any, Any]] = config.items() if isinstance(config, Mapping) else enumerate(config)
    for name, value in items:
        path = f"{prefix}{name}"
        if isinstance(value, Mapping | list | tuple) and value:
            params.update(flatten_params(value, f"{path}."))
        else:
            params[clean_key(path)] = _text(value)
    return params


def mlflow_status(status: str) -> str | None:
    """The MLflow status a finished CoopLab run ends with; None while it is still active."""
    return _STATUS.get(status)


def config_seed(config: Mapping[str, Any]) -> Any:
    """The seed a run config trains with (``trainer.seed``), or None."""
    trainer = config.get("trainer")
    return trainer.get("seed") if isinstance(trainer, Mapping) else config.get("seed")


def run_tags(
    *,
    run_id: int,
    database_id: str,
    experiment: str,
    status: str,
    attempt: int,
    lineage: Iterable[int],
    resumed_from: int | None,
    seed: Any,
    worker: str | None,
    tags: Iterable[str],
    study: Mapping[str, Any] | None,
) -> dict[str, str]:
    """The MLflow tags of an exported run: where it came from (database id and run id, so an export
    is found again), its lineage (the attempts it belongs to, oldest first), seed and study point."""
    found = {
        "run_id": str(run_id),
        "database_id": database_id,
        "experiment": experiment,
        "status": status,
        "attempt": str(attempt),
        "lineage": ",".join(str(r) for r in lineage),
        "resumed_from": "" if resumed_from is None else str(resumed_from),
        "seed": "" if seed is None else str(seed),
        "worker": worker or "",
        "tags": ",".join(tags),
    }
    if study:
        found.update(
            {
                "study": str(study["name"]),
                "study_point": str(study["point"]),
                "study_seed_index": str(study["seed_index"]),
                "study_params": _text(dict(study["params"])),
            }
        )
        found["seed"] = str(study["seed"])
    return {f"{TAG_PREFIX}{name}": _text(value) for name, value in found.items() if value != ""}
