"""The checks a run config passes before anything is stored, queued or trained.

``cooplab train``, ``cooplab submit``, :func:`jobs.client.submit_run` and the dashboard all call
:func:`check_run_config`: it applies the operator's settings to the engine (the task module
allowlist), validates the config (:func:`engine.spec.parse_run_config`) and runs the pre-flight
checks (:mod:`engine.preflight`: model sources, ``max_new_tokens`` against each model's context,
task parameters), looking for hub models in this machine's Hugging Face cache unless
``COOPLAB_REQUIRE_CACHED_MODELS=false``. Torch-free and Celery-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.preflight import Problem, preflight_problems
from engine.spec import ConfigError, RunConfig, parse_run_config
from jobs.settings import Settings, apply_engine_settings, get_settings


def run_config_problems(config: RunConfig, *, settings: Settings | None = None) -> list[Problem]:
    """The pre-flight problems of a parsed config under ``settings`` (applied to the engine first)."""
    settings = settings or get_settings()
    apply_engine_settings(settings)
    return preflight_problems(config, hub_cache_dirs=settings.preflight_hub_cache_dirs())


def check_run_config(config: RunConfig | Mapping[str, Any], *, settings: Settings | None = None) -> RunConfig:
    """Validate ``config`` and run the pre-flight checks; return the validated config.

    Raises :class:`engine.spec.ConfigError` with one ``field: message`` line per problem.
    """
    settings = settings or get_settings()
    apply_engine_settings(settings)
    if isinstance(config, RunConfig):
        config = config.model_dump(mode="json")  # validated again: the allowlist may differ from the caller's
    parsed = parse_run_config(dict(config))
    problems = run_config_problems(parsed, settings=settings)
    if problems:
        raise ConfigError("\n".join(str(p) for p in problems))
    return parsed


__all__ = ["check_run_config", "run_config_problems"]
