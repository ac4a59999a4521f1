"""``CentralizedMAGRPOTrainer``: the "one model does everything" baseline against a team.

One model reads a joint prompt built from every role's formatter and writes every role's answer in
one completion (tagged sections, :mod:`engine.preference.centralized`); the completion is split into
the roles' answers for the task's team reward, evaluation hooks and pass@k, and the model is trained
with MAGRPO on the whole joint completion (a single agent, K samples per item). Everything else
(loop, sinks, checkpoints, export) is the MAGRPO trainer's.
"""

from __future__ import annotations

import inspect
from typing import Any

from engine.preference.centralized import CentralizedCollaboration
from engine.preference.joint_policy import CentralizedRoles, centralize
from engine.schema.preference_configs import CentralizedMAGRPOConfig
from engine.sinks.base import Episode
from engine.trainer.magrpo import MAGRPOTrainer

_CONSTRUCTOR = inspect.signature(MAGRPOTrainer.__init__)


class CentralizedMAGRPOTrainer(CentralizedRoles, MAGRPOTrainer):
    """MAGRPO on one joint policy (see the module docstring).

    Takes :class:`MAGRPOTrainer`'s arguments plus ``centralized_adapter`` (CoMLRL's protocol:
    ``build_prompt(item, role_prompts)`` and ``parse_completion(text, item, num_roles)``; default
    the ``<agent_i>`` tags). ``num_agents`` is the number of roles (it must match
    ``args.num_agents`` when given); ``agents`` is one model, or the same model once per role;
    ``formatters`` and ``agent_names`` are per role; per-agent settings are the joint model's.
    """

    collaboration: CentralizedCollaboration  # always active: the constructor sets it before anything else

    def __init__(self, *args: Any, centralized_adapter: Any = None, **kwargs: Any) -> None:
        given = _CONSTRUCTOR.bind(self, *args, **kwargs)
        explicit_roles = "num_agents" in given.arguments
        given.apply_defaults()
        a = dict(given.arguments)
        del a["self"]
        config = a["args"] if a["args"] is not None else CentralizedMAGRPOConfig()
        if not isinstance(config, CentralizedMAGRPOConfig) or config.collaboration_mode != "centralized":
            raise ValueError(f"args: CentralizedMAGRPOTrainer takes a CentralizedMAGRPOConfig, got "
                             f"{type(config).__name__}")
        self.collaboration, self.role_names = centralize(a, config, centralized_adapter, explicit_roles=explicit_roles,
                                                         role_check=self._role_check)
        super().__init__(**a)

    def _default_config(self) -> CentralizedMAGRPOConfig:
        return CentralizedMAGRPOConfig()

    def train_step(self) -> tuple[dict[str, float], list[Episode]]:
        """MAGRPO's step, plus ``centralized/unparsed_share``: completions without any tagged section."""
        self.collaboration.take_unparsed_share()  # drop what evaluation scored
        metrics, episodes = super().train_step()
        share = self.collaboration.take_unparsed_share()
        if share is not None:
            metrics["centralized/unparsed_share"] = share
        return metrics, episodes
