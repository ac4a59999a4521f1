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
FeedbackMode = Literal["level_feedback", "level_passed", "passed", "plain"]


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
    reward: Literal["tiered", "level"] = Field(
        "tiered", description="'tiered': CoopLab's ladder (max 3.0); 'level': CoMLRL's level reward (max 4.0: "
        "structure read per part, syntax, tests, cooperation bonus +0.5 / +1.0 / -0.5).")
    feedback_mode: FeedbackMode | None = Field(
        None, description="Multi-turn feedback, CoMLRL's modes: level_feedback (structure, syntax and test "
        "results), level_passed (yes/no per level), passed (one bit), plain (previous code and 'revise'). "
        "Default: level_feedback, or plain when feedback is off.")

    @field_validator("train_slice", "eval_slice")
    @classmethod
    def _valid_slice(cls, value: str) -> str:
        if not SLICE.match(value):
            raise ValueError(f"{value!r} is not a slice; write start:end, e.g. 0:133")
        return value

    @field_validator("feedback_mode", mode="before")
    @classmethod
    def _no_external_model(cls, value):
        if value == "expert_edits":
            raise ValueError("feedback_mode 'expert_edits' needs an external model proposing edits, which CoopLab does "
                             "not call; use level_feedback, level_passed, passed or plain")
        return value

    @model_validator(mode="after")
    def _one_feedback_setting(self) -> HumanEvalParams:
        if not self.feedback and self.feedback_mode not in (None, "plain"):
            raise ValueError(f"feedback is off but feedback_mode is {self.feedback_mode!r}; drop one of the two")
        return self

    def resolved_feedback_mode(self) -> str:
        """The feedback mode a run uses: ``feedback_mode``, else level_feedback (plain with feedback off)."""
        return self.feedback_mode or ("level_feedback" if self.feedback else "plain")


class CodeBenchParams(HumanEvalParams):
    """A CoMLRL coding benchmark read from a dataset in HumanEval's form (prompt, entry_point, test)."""

    dataset: str = Field(..., description="Problems: a .jsonl/.parquet/.json file or a hub name:split, with the "
                         "columns prompt, entry_point and test.")
    reward: Literal["tiered", "level"] = Field("level", description="'level': CoMLRL's level reward (max 4.0); "
                                               "'tiered': CoopLab's ladder.")


class CoopHumanEvalParams(CodeBenchParams):
    dataset: str = Field("OpenMLRL/CoopHumanEval:train", description="Problems (CoMLRL: "
                         "OpenMLRL/CoopHumanEval:train, 82) or your file with prompt, entry_point, test.")
    train_slice: str = Field("16:", description="Training problems as start:end (CoMLRL: train[16:]).")
    eval_slice: str = Field("0:16", description="Held-out problems as start:end (CoMLRL: train[:16]).")


class MbppParams(CodeBenchParams):
    dataset: str = Field("OpenMLRL/MBPP:test", description="Problems (CoMLRL: OpenMLRL/MBPP:test) or your file "
                         "with prompt, entry_point, test.")
    train_slice: str = Field("15:65", description="Training problems as start:end (CoMLRL: test[15:65]).")
    eval_slice: str = Field("0:15", description="Held-out problems as start:end (CoMLRL: test[:15]).")


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


class ComlrlWritingParams(TaskParams):
    """CoMLRL's writing benchmarks (``tldr``, ``arxiv``): its data by hub name (used when the machine has it
    cached or can reach the hub) or your own file."""

    dataset: str = Field(..., description="Training data: a .jsonl/.parquet/.json/.csv file or a hub name "
                         "(name:split, e.g. trl-lib/tldr:train[:1100]).")
    eval_dataset: str | None = Field(None, description="Held-out data (a file or name:split); none: hold out the "
                                     "last eval_items of the training data.")
    text_column: str = Field("prompt", min_length=1, description="Column holding the text to write about.")
    max_items: int | None = Field(None, ge=1, description="Use at most this many training items.")
    max_eval_items: int | None = Field(None, ge=1, description="Use at most this many evaluation items.")
    eval_items: int = Field(4, ge=0, description="Without eval_dataset: items held out from the end of the data.")


class TldrParams(ComlrlWritingParams):
    dataset: str = Field("trl-lib/tldr:train[:1100]", description="Training data: a .jsonl/.parquet file or a "
                         "hub name:split (CoMLRL: trl-lib/tldr:train[:1100]).")
    eval_dataset: str | None = Field("trl-lib/tldr:test[:1100]", description="Held-out data (CoMLRL: "
                                     "trl-lib/tldr:test[:1100]); none: hold out the last eval_items.")


class ArxivParams(ComlrlWritingParams):
    dataset: str = Field("OpenMLRL/arXiv_abstract:train[:1100]", description="Training data: a .jsonl/.parquet "
                         "file or a hub name:split (CoMLRL: OpenMLRL/arXiv_abstract:train[:1100]).")
    eval_dataset: str | None = Field("OpenMLRL/arXiv_abstract:val[:1100]", description="Held-out data (CoMLRL: "
                                     "OpenMLRL/arXiv_abstract:val[:1100]); none: hold out the last eval_items.")
    text_column: str = Field("abstract", min_length=1, description="Column holding the abstract.")
