"""``CentralizedMAGRPOTrainer``: the "one model does everything" baseline against a team.

One model reads a joint prompt built from every role's formatter and writes every role's answer in
one completion (tagged sections, :mod:`engine.preference.centralized`); the completion is split into
the roles' answers for the task's team reward, evaluation hooks and pass@k, and the model is trained
with MAGRPO on the whole joint completion (a single agent, K samples per item). Everything else
(loop, sinks, checkpoints, export) is the MAGRPO trainer's.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from engine.formatting import normalize_formatters
from engine.preference.centralized import CentralizedCollaboration, TaggedCentralizedComparatorAdapter
from engine.preference.config import CentralizedMAGRPOConfig
from engine.rewards import TeamReward
from engine.sinks.base import Episode
from engine.trainer.trainer import MAGRPOTrainer

_CONSTRUCTOR = inspect.signature(MAGRPOTrainer.__init__)
JOINT_NAME = "joint"  # the one actor's name in metrics and transcripts
_PER_AGENT = ("agent_learning_rates", "agent_generation", "system_prompts")


def _one(value: Any, name: str, roles: int) -> Any:
    """A per-agent list given per role (the run-config path) or once: the actor's entry."""
    if isinstance(value, list | tuple):
        if len(value) not in (1, roles):
            raise ValueError(f"{name}: got {len(value)} entries; pass one (the joint model's) or one per role")
        return value[0]
    return value


class CentralizedMAGRPOTrainer(MAGRPOTrainer):
    """MAGRPO on one joint policy (see the module docstring).

    Takes :class:`MAGRPOTrainer`'s arguments plus ``centralized_adapter`` (CoMLRL's protocol:
    ``build_prompt(item, role_prompts)`` and ``parse_completion(text, item, num_roles)``; default
    the ``<agent_i>`` tags). ``num_agents`` is the number of roles (it must match
    ``args.num_agents`` when given); ``agents`` is one model, or the same model once per role;
    ``formatters`` and ``agent_names`` are per role; per-agent settings are the joint model's.
    """

    def __init__(self, *args: Any, centralized_adapter: Any = None, **kwargs: Any) -> None:
        given = _CONSTRUCTOR.bind(self, *args, **kwargs)
        explicit_roles = "num_agents" in given.arguments
        given.apply_defaults()
        a = dict(given.arguments)
        del a["self"]
        config = a["args"] if a["args"] is not None else CentralizedMAGRPOConfig()
        if getattr(config, "collaboration_mode", None) != "centralized":
            raise ValueError(f"args: CentralizedMAGRPOTrainer takes a CentralizedMAGRPOConfig, got "
                             f"{type(config).__name__}")
        roles = config.num_agents
        if explicit_roles and a["num_agents"] != roles:
            raise ValueError(f"num_agents: {a['num_agents']} roles, but args.num_agents is {roles}; they must match")
        actor = self._actor(a["agent_model"], a["agents"], roles)
        self.role_names = list(a["agent_names"] or config.agent_names or [f"agent_{i}" for i in range(roles)])
        if len(self.role_names) != roles:
            raise ValueError(f"agent_names: got {len(self.role_names)} role names for {roles} roles")
        self.collaboration = CentralizedCollaboration(
            centralized_adapter if centralized_adapter is not None else TaggedCentralizedComparatorAdapter(),
            normalize_formatters(a["formatters"], roles), TeamReward(a["reward_func"], a["reward_processor"]), roles)
        check = a["eval_check"]
        a.update(
            agent_model=None, agents=[actor], num_agents=1, tokenizer=_one(a["tokenizer"], "tokenizer", roles),
            args=config, reward_func=self.collaboration, reward_processor=None,
            formatters=[self.collaboration.build_prompt], agent_names=[JOINT_NAME],
            eval_check=None if check is None else self._role_check(check),
            **{name: None if a[name] is None else [_one(a[name], name, roles)] for name in _PER_AGENT},
        )
        super().__init__(**a)

    def _default_config(self) -> CentralizedMAGRPOConfig:
        return CentralizedMAGRPOConfig()

    @staticmethod
    def _actor(agent_model: Any, agents: Sequence[Any] | None, roles: int) -> Any:
        if agents is None:
            if not isinstance(agent_model, str):
                raise ValueError("pass agent_model (a model id) or agents=[model]: the one joint model")
            return agent_model
        agents = list(agents)
        if len(agents) == 1 or (len(agents) == roles and all(
                m is agents[0] or (isinstance(m, str) and m == agents[0]) for m in agents)):
            return agents[0]
        raise ValueError(f"agents: centralized collaboration trains exactly one model; got {len(agents)} different "
                         f"ones (pass agents=[model], or the same model once per role)")

    def _role_check(self, check: Callable[[dict, list[str]], bool]) -> Callable[[dict, list[str]], bool]:
        """The task's pass@k check on the roles' answers of a joint completion."""
        return lambda item, joint: check(item, self.collaboration.split(joint[0], item))

    def _eval_completions(self, paths: list[list[Any]]) -> list[list[list[str]]]:
        """CoMLRL's ``eval_logger`` gets the roles' answers, ``[role][item][turn]``."""
        joint = super()._eval_completions(paths)[0]  # [item][turn]
        split = [[self.collaboration.split(text, path[0].item) for text in turns] for turns, path in zip(
            joint, paths, strict=True)]
        return [[[turn[r] for turn in item] for item in split] for r in range(self.collaboration.num_roles)]

    def train_step(self) -> tuple[dict[str, float], list[Episode]]:
        """MAGRPO's step, plus ``centralized/unparsed_share``: completions without any tagged section."""
        self.collaboration.take_unparsed_share()  # drop what evaluation scored
        metrics, episodes = super().train_step()
        share = self.collaboration.take_unparsed_share()
        if share is not None:
            metrics["centralized/unparsed_share"] = share
        return metrics, episodes
