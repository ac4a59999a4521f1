"""The checks a run config passes before anything is stored, queued or trained.

``cooplab train``, ``cooplab submit``, :func:`jobs.client.submit_run` and the dashboard all call
:func:`check_run_config`: it builds the operator's permissions from the settings
(:func:`jobs.settings.operator_permissions`), validates the config under their task module allowlist (:func:`engine.schema.run_config.parse_run_config`) and runs the pre-flight
checks (:mod:`engine.schema.preflight`: model sources, ``max_new_tokens`` against each model's context,
task parameters), looking for hub models in this machine's Hugging Face cache unless
``COOPLAB_REQUIRE_CACHED_MODELS=false``, and the operator's resource budget (``COOPLAB_MAX_*``,
:mod:`engine.schema.budget`) and write area (a folder the config names must lie in the run's folder or the
data directory, :mod:`engine.permissions.write_paths`) and read roots (a file or folder it names for reading
must lie in the data directory, the bundled data, the Hugging Face cache or ``COOPLAB_DATA_ROOTS``,
:mod:`engine.permissions.read_paths`), and what only the operator allows (``COOPLAB_API_HOSTS``,
``COOPLAB_ALLOW_REMOTE_CODE``, :mod:`engine.permissions.run_permissions`). Torch-free and Celery-free.

Whether a CUDA device exists is known here only when the run's queue is: a job on a ``cuda:N`` queue
sees that one GPU as ``cuda:0`` (the worker pins it), a job on a GPU set's queue ``cuda:0,1,2,3`` sees
its 4 GPUs as ``cuda:0`` to ``cuda:3`` (an fsdp run there may have up to 4 ranks, and one rank per GPU
when ``fsdp_ranks`` is empty, which the memory check accounts), a job on ``cpu`` sees none. Without a queue
(``cooplab train``, a config checked before its device is chosen) pre-flight checks only the device
names, and the worker checks existence when the run starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.permissions.read_paths import ReadArea
from engine.permissions.write_paths import WriteArea
from engine.schema.budget import Budget, RunLimits
from engine.schema.preflight import Problem, preflight_problems
from engine.schema.run_config import ConfigError, RunConfig, parse_run_config
from jobs.devices import device_gpus
from jobs.settings import Settings, get_settings, operator_permissions


def run_budget(settings: Settings) -> Budget:
    """The operator's resource budget (``COOPLAB_MAX_*``)."""
    return Budget(**{name: getattr(settings, name) for name in Budget.__dataclass_fields__})


def run_limits(settings: Settings, device: str | None = None) -> RunLimits:
    """Budget, write area (a new run's folder ``<data dir>/runs/run-N`` and the data directory) and,
    when the run's queue ``device`` is known, the CUDA devices its job will see (one per GPU its worker
    owns) and, on a GPU queue, the memory of one (``COOPLAB_DEVICE_MEMORY_GIB``, when set)."""
    cuda = None if device is None else len(device_gpus(device))
    place = "in the job" if device is None else (
        "in a job on the cpu queue" if device == "cpu" else
        f"in a job on the {device} queue (the worker pins that GPU as cuda:0)" if cuda == 1 else
        f"in a job on the {device} queue (the worker shows its {cuda} GPUs as cuda:0 to cuda:{(cuda or 1) - 1})")
    memory = None if settings.device_memory_gib is None or not cuda else int(settings.device_memory_gib * 1024**3)
    return RunLimits(run_budget(settings), WriteArea.of(settings.runs_dir / "run-N", [settings.data_dir]), cuda,
                     place, queue_sets_device=True, device_memory_bytes=memory)


def run_config_problems(config: RunConfig, *, settings: Settings | None = None,
                        device: str | None = None) -> list[Problem]:
    """The pre-flight problems of a parsed config under ``settings`` (the operator's permissions built from
    them), for a run on ``device``'s queue (None: not known yet)."""
    settings = settings or get_settings()
    return preflight_problems(config, hub_cache_dirs=settings.preflight_hub_cache_dirs(),
                              limits=run_limits(settings, device), permissions=operator_permissions(settings),
                              read_area=ReadArea.of(settings.read_roots))


def check_run_config(config: RunConfig | Mapping[str, Any], *, settings: Settings | None = None,
                     device: str | None = None) -> RunConfig:
    """Validate ``config`` and run the pre-flight checks for a run on ``device``'s queue (None: not
    known yet; the worker then checks that its devices exist); return the validated config.

    A :class:`RunConfig` is already validated and is returned as it is when it passes: it is not parsed
    again. What depends on the operator's settings is checked here under ``settings`` whoever parsed
    it: the task and a custom system schedule against the task module allowlist, the budget, the write
    area and the permissions (:func:`run_config_problems`).

    Raises :class:`engine.schema.run_config.ConfigError` with one ``field: message`` line per problem.
    """
    settings = settings or get_settings()
    modules = operator_permissions(settings).task_modules
    parsed = config if isinstance(config, RunConfig) else parse_run_config(dict(config), task_modules=modules)
    problems = run_config_problems(parsed, settings=settings, device=device)
    if problems:
        raise ConfigError("\n".join(str(p) for p in problems))
    return parsed


__all__ = ["check_run_config", "run_budget", "run_config_problems", "run_limits"]
