"""The bases of the run config's sections: the rules each section checks, declared by hand.

:mod:`engine.schema.run_config` builds the sections on them from the catalog (``create_model``), and
:mod:`engine.schema.run_config_types` shows the same sections to the type checker; both import these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import JsonDict

from engine.schema.catalog import ACTOR_CRITIC, OPERATOR_SETTINGS
from engine.schema.collaboration import collaboration_problem
from engine.schema.rules import combination_problems
from engine.schema.secrets import (
    key_variable_problem,
    run_config_body_problem,
    run_config_header_problem,
    run_config_url_problem,
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


_MORE: JsonDict = {"form": "more"}  # under "More agent settings" (the other fields have widgets of their own)


class _CombinationRules(_Strict):
    """A section checked by the catalog's cross-setting rules (:mod:`engine.schema.rules`)."""

    @model_validator(mode="after")
    def _check_combinations(self) -> _CombinationRules:
        problems = combination_problems(self)
        if problems:
            raise ValueError(problems[0])
        return self


class _AgentIdentity(_CombinationRules):
    name: str = Field("agent", min_length=1, description="Role name shown in transcripts and metrics.")
    model: str = Field(
        "builtin:tiny-llama",
        min_length=1,
        description="Hugging Face id, local folder, or a built-in offline model "
        "(builtin:tiny-llama, builtin:tiny-qwen2, builtin:smollm2-135m).",
    )
    tokenizer: str | None = Field(None, description="Tokenizer source; defaults to the model's own.",
                                  json_schema_extra=_MORE)
    share_weights_with: str | None = Field(
        None, description="Name of an earlier agent whose weights this agent shares (own optimizer state)."
    )
    system_prompt: str | None = Field(None, description="System message when the tokenizer has a chat template.")
    prompt_template: str | None = Field(
        None, description="Python format string over the dataset item, e.g. 'Write a helper for: {prompt}'."
    )


class _GivenOnly(_Strict):
    """A section that stores only the settings given (the others keep the algorithm's defaults)."""

    @model_serializer(mode="wrap")
    def _only_given(self, handler: Any) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if k in self.model_fields_set}

    def given(self) -> dict[str, Any]:
        """The settings this config sets explicitly."""
        return {name: getattr(self, name) for name in type(self).model_fields if name in self.model_fields_set}


class _TrainerRules(_CombinationRules):
    """The cross-setting rules of the catalog, applied to the run config's trainer section."""

    @model_validator(mode="before")
    @classmethod
    def _stored_operator_defaults(cls, data: Any) -> Any:
        """Configs stored before an operator's setting (``vllm_python``) left the run config hold its default:
        that value is dropped; any other is refused as an unknown field naming the operator's variable."""
        if isinstance(data, dict) and any(data.get(k) == default for k, (_, default) in OPERATOR_SETTINGS.items()):
            data = {k: v for k, v in data.items() if k not in OPERATOR_SETTINGS or v != OPERATOR_SETTINGS[k][1]}
        return data

    @field_validator("comparator_api_headers", "comparator_api_key_env", "comparator_api_url",
                     "comparator_api_extra_body", check_fields=False)
    @classmethod
    def _no_credentials(cls, value: Any, info: ValidationInfo) -> Any:
        """A run config is stored: no credential in a header, the URL or the extra body, and only
        COOPLAB_API_KEY_* variables for a key."""
        checks: dict[str | None, Callable[[Any], str | None]] = {
            "comparator_api_headers": run_config_header_problem, "comparator_api_key_env": key_variable_problem,
            "comparator_api_url": run_config_url_problem, "comparator_api_extra_body": run_config_body_problem}
        problem = checks[info.field_name](value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("collaboration_mode", check_fields=False)
    @classmethod
    def _collaboration_of_the_algorithm(cls, value: str | None, info: ValidationInfo) -> str | None:
        problem = collaboration_problem(info.data.get("algorithm", "magrpo"), value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("actor_critic", check_fields=False)
    @classmethod
    def _actor_critic_only(cls, value: Any, info: ValidationInfo) -> Any:
        algorithm = info.data.get("algorithm", "magrpo")
        if value.model_fields_set and not has_critics(algorithm, info.data.get("rl_algorithm")):
            what = f"marlhf with rl_algorithm {info.data.get('rl_algorithm')!r}" if algorithm == "marlhf" else algorithm
            raise ValueError(f"applies to iac/maac (and marlhf with rl_algorithm iac/maac) only, not to {what}")
        return value


def has_critics(algorithm: str, rl_algorithm: str | None) -> bool:
    """Whether a run of ``algorithm`` trains critics: iac/maac, or marlhf whose RL stage is one of them."""
    return algorithm in ACTOR_CRITIC or (algorithm == "marlhf" and rl_algorithm in ACTOR_CRITIC)
