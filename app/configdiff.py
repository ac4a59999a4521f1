"""Config comparison for the Compare view: flatten nested run configs and keep only what differs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

MISSING = "—"


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts and lists into dotted paths: ``{"agents.0.name": "writer", ...}``.

    Empty dicts and lists stay as leaves so that "set to empty" still shows up in a diff.
    """
    out: dict[str, Any] = {}
    if isinstance(config, Mapping) and config:
        for key, value in config.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(config, list | tuple) and config:
        for index, value in enumerate(config):
            out.update(flatten(value, f"{prefix}.{index}" if prefix else str(index)))
    else:
        out[prefix or "config"] = config
    return out


def _empty(value: Any) -> bool:
    """An empty mapping or list: the same as a setting that is not there."""
    return isinstance(value, Mapping | list | tuple) and not value


def diff_configs(configs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows ``{"field": path, <label>: value, ...}`` for every path whose value is not the same in all.

    A path absent from a config shows as ``—``; an empty section (``{}`` or ``[]``) counts as absent,
    so it never differs from a config that lacks it. Other values are shown as JSON text (one column
    type, so the table renders). Rows are sorted by path; with fewer than two configs nothing can
    differ and the result is empty.
    """
    if len(configs) < 2:
        return []
    flat = {label: {p: v for p, v in flatten(cfg).items() if not _empty(v)} for label, cfg in configs.items()}
    paths = sorted({path for values in flat.values() for path in values})
    rows = []
    for path in paths:
        values = [flat[label].get(path, MISSING) for label in flat]
        if any(v != values[0] for v in values[1:]):
            row: dict[str, Any] = {"field": path}
            for label, value in zip(flat, values, strict=True):
                row[label] = value if isinstance(value, str) else json.dumps(value)
            rows.append(row)
    return rows


def changed_fields(saved: Mapping[str, Any], edited: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``(field, saved value, edited value)`` for each setting the edit changes: a real diff, so an
    untouched experiment has none. Both configs should be filled with their defaults first
    (:func:`app.draft.normalise` plus the task's parameter defaults), so a default the form shows is
    not mistaken for a change."""
    rows = diff_configs({"saved": saved, "edited": edited})
    return [(row["field"], row["saved"], row["edited"]) for row in rows]
