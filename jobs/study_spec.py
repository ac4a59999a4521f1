"""A study definition (what ``cooplab study CONFIG.yaml`` reads and the dashboard builds), validated
before anything is stored. Torch-free.

.. code-block:: yaml

    name: quickstart-lr-k
    base: engine/examples/quickstart.yaml    # a run-config file (relative to this file), or the mapping inline
    space:                                   # dotted run-config paths -> values (or ranges, random only)
      trainer.agent_learning_rate: [0.0003, 0.001]
      trainer.num_generations: [4, 8]
    method: grid                             # or random, with samples: N
    seeds: 3                                 # a count (seed, seed+1, ...) or a list
    seed: 0                                  # the study seed: random points and the seed count start here
    max_concurrent: 2                        # runs of this study in flight at once
    device: cpu                              # the queue its runs go to
    objective: train/reward_mean             # what results are ranked by (larger is better)
    early_stopping: {metric: train/reward_mean, min_steps: 3, min_trials: 3}   # median rule; optional
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from db.study_records import TrialInput
from engine.schema.errors import format_validation_error
from engine.schema.run_config import ConfigError, RunConfig, load_run_config, parse_run_config
from engine.schema.safe_yaml import YamlLimitError, load_yaml_file
from jobs.study_limits import StudyLimits
from jobs.study_space import StudySpaceError, generate, parse_space

DEFAULT_OBJECTIVE = "train/reward_mean"


class EarlyStopping(BaseModel):
    """The median stopping rule: at a step of at least ``min_steps``, a running child whose mean of
    ``metric`` so far is below the median of the completed children's means up to that step (at least
    ``min_trials`` of them reached it) is stopped."""

    model_config = ConfigDict(extra="forbid")

    metric: str = Field(DEFAULT_OBJECTIVE, min_length=1)
    min_steps: int = Field(3, ge=1, description="Never stop a child before this step.")
    min_trials: int = Field(3, ge=1, description="Other children that must have reached the step.")


class StudySpec(BaseModel):
    """A whole study: base config, space, method, seeds, scheduling and early stopping."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    base: dict[str, Any]
    space: dict[str, Any]
    method: Literal["grid", "random"] = "grid"
    samples: int = Field(0, ge=0, description="Random search: how many points.")
    seeds: int | list[int] = 1
    seed: int = 0
    max_concurrent: int = Field(1, ge=1)
    device: str = "cpu"
    objective: str = DEFAULT_OBJECTIVE
    early_stopping: EarlyStopping | None = None

    @field_validator("samples", "seeds", "seed", "max_concurrent", mode="before")
    @classmethod
    def _whole_numbers(cls, value: Any) -> Any:
        """Counts and seeds written as ``3.0``, ``1.0e+9`` or ``1e9`` (which YAML reads as text) are the
        whole numbers they stand for (the size limits then judge them); anything else is refused."""
        return [whole_number(v) for v in value] if isinstance(value, list) else whole_number(value)


def whole_number(value: Any) -> Any:
    """``value`` as an ``int`` when it is a whole number however written (``3``, ``3.0``, ``"1e9"``,
    ``"1_000"``); anything else (a fraction, a boolean, a text that is no number) raises ``ValueError``
    saying so."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    number = value
    if isinstance(value, str):
        text = value.strip().replace("_", "") if len(value) <= 40 else ""
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            number = None
    if isinstance(value, bool) or not isinstance(number, float) or not number.is_integer():
        shown = repr(value) if not isinstance(value, str) else repr(value[:40])
        raise ValueError(f"{shown} is not a whole number; write a count such as 3")
    return int(number)


def parse_study_spec(data: Mapping[str, Any]) -> StudySpec:
    """Validate a study mapping; :class:`StudySpaceError` names each bad field."""
    if not isinstance(data, Mapping):
        raise StudySpaceError(f"a study must be a mapping of fields, got {type(data).__name__}")
    try:
        return StudySpec.model_validate(dict(data))
    except ValidationError as exc:
        raise StudySpaceError(format_validation_error(exc, StudySpec)) from None


def load_study_file(path: str | Path, *, task_modules: tuple[str, ...] = ()) -> StudySpec:
    """Read a study YAML; a ``base`` given as a path is a run-config file relative to the study file
    (read and validated by :func:`engine.schema.run_config.load_run_config` under the operator's task module
    allowlist ``task_modules``)."""
    path = Path(path)
    try:
        data = load_yaml_file(path) or {}  # within the size and alias limits of engine.schema.safe_yaml
    except OSError as exc:
        raise StudySpaceError(f"study file {path} cannot be read: {exc.strerror or exc}") from None
    except YamlLimitError as exc:
        raise StudySpaceError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise StudySpaceError(f"{path}: not valid YAML: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("base"), str):
        base_path = path.parent / data["base"]  # an absolute base stays absolute
        try:
            data["base"] = load_run_config(base_path, task_modules=task_modules).model_dump(mode="json")
        except ConfigError as exc:
            raise StudySpaceError(f"base: {exc}") from None
    return parse_study_spec(data)


def study_trials(spec: StudySpec, validate: Callable[[dict[str, Any]], RunConfig] = parse_run_config, *,
                 limits: StudyLimits | None = None) -> list[TrialInput]:
    """Every child of the study, each config validated by ``validate``, once its size has been counted
    within ``limits`` (default :class:`jobs.study_limits.StudyLimits`; raises :class:`StudySpaceError`)."""
    # the base is validated inside, after the size is counted: a study over a limit is refused at once
    return generate(dict(spec.base), parse_space(spec.space), method=spec.method, samples=spec.samples,
                    seeds=spec.seeds, seed=spec.seed, validate=validate, limits=limits)
