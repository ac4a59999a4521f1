"""The parameters of the built-in tasks: what a run config's ``task.params`` may say for each.

Pydantic models only, torch-free: the dashboard's form, the config check and the pre-flight read
them without building a task. The builders in :mod:`engine.tasks` receive a validated instance.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# the quick start's prompt topics: training prompts, and held-out evaluation prompts no training step samples
QUICKSTART_TOPICS = (
    "animals", "colours", "food", "music", "rivers", "stars", "tools", "games",
    "cities", "plants", "weather", "boats", "books", "birds", "stones", "clouds",
)
QUICKSTART_HELD_OUT_TOPICS = ("islands", "lamps", "bridges", "forests", "trains", "castles", "gardens", "oceans",
                              "deserts", "markets", "valleys", "kitchens")
SLICE = re.compile(r"^\s*(\d*)\s*:\s*(\d*)\s*$")  # HumanEval problems as start:end


class TaskParams(BaseModel):
    """Base class of task parameter models: unknown keys are rejected so typos surface as errors."""

    model_config = ConfigDict(extra="forbid")


class QuickstartParams(TaskParams):
    first_letters: str = Field("abcdefghijklm", min_length=1, description="Characters the first agent should write.")
    second_letters: str = Field("nopqrstuvwxyz", min_length=1, description="Characters the second agent should write.")
    num_items: int = Field(16, ge=1, le=len(QUICKSTART_TOPICS), description="Training prompts (topics) in the dataset.")
    eval_items: int = Field(4, ge=0, le=len(QUICKSTART_HELD_OUT_TOPICS), description="Held-out evaluation prompts "
                            "(topics never used for training; up to 12).")
    centralized_protocol: Literal["tags", "halves"] = Field(
        "tags", description="When one model writes both parts (centralized_magrpo, collaboration_mode centralized): "
        "'tags' (<agent_0>...</agent_0> sections, as CoMLRL) or 'halves' (the first half of its text is the first "
        "part; a tiny random model has no tags yet, so only halves gives it rewards to compare).")

    @field_validator("second_letters")
    @classmethod
    def _disjoint(cls, value: str, info) -> str:
        first = info.data.get("first_letters") or ""
        shared = sorted(set(first) & set(value))
        if shared:
            raise ValueError(f"the two halves must not share characters; both contain {''.join(shared)!r}")
        return value


class HumanEvalParams(TaskParams):
    train_slice: str = Field("0:133", description="Problems used for training, as start:end over the 164.")
    eval_slice: str = Field("133:164", description="Problems used for evaluation (CoMLRL uses the last 31).")
    helper_name: str = Field("aux", pattern=r"^[A-Za-z_]\w*$", description="Name of the helper function.")
    sandbox_timeout_s: float = Field(10.0, gt=0, le=120, description="Wall-clock limit per program run.")
    step_timeout_s: float = Field(3.0, gt=0, le=60, description="Time limit of each test statement.")
    workers: int | None = Field(None, ge=1, le=64, description="Programs tested in parallel (default: CPU cores).")
    feedback: bool = Field(True, description="Multi-turn: show test results (else only ask for a revision).")

    @field_validator("train_slice", "eval_slice")
    @classmethod
    def _valid_slice(cls, value: str) -> str:
        if not SLICE.match(value):
            raise ValueError(f"{value!r} is not a slice; write start:end, e.g. 0:133")
        return value


class WritingParams(TaskParams):
    dataset: str | None = Field(
        None, description="Your own data: a .json/.jsonl/.csv/.parquet file or a hub name (default: shipped set)."
    )
    text_column: str = Field("text", min_length=1, description="Column holding the text to write about.")
    max_items: int | None = Field(None, ge=1, description="Use at most this many items.")
    eval_items: int = Field(4, ge=0, description="Items held out for evaluation (taken from the end).")
    ratio_low: float = Field(1.6, gt=1.0, description="Elaboration/summary length ratio: lower end of full credit.")
    ratio_high: float = Field(3.2, gt=1.0, description="Elaboration/summary length ratio: upper end of full credit.")
    summary_words: tuple[int, int] = Field((8, 60), description="Word range of the summary.")
    elaboration_words: tuple[int, int] = Field((20, 200), description="Word range of the elaboration.")

    @model_validator(mode="after")
    def _ranges(self) -> WritingParams:
        if self.ratio_high < self.ratio_low:
            raise ValueError("ratio_high must be >= ratio_low")
        for name in ("summary_words", "elaboration_words"):
            low, high = getattr(self, name)
            if not 1 <= low <= high:
                raise ValueError(f"{name} must be (min, max) with 1 <= min <= max")
        return self


class SelfRefineParams(TaskParams):
    dataset: str | None = Field(None, description="Your own data file or hub name (default: shipped passages).")
    text_column: str = Field("text", min_length=1, description="Column holding the text to summarise.")
    max_items: int | None = Field(None, ge=1, description="Use at most this many items.")
    eval_items: int = Field(4, ge=0, description="Items held out for evaluation.")
    summary_words: tuple[int, int] = Field((8, 40), description="Word range of a good summary.")


class RoleSwitchParams(SelfRefineParams):
    elaboration_words: tuple[int, int] = Field((20, 120), description="Word range of a good elaboration.")
