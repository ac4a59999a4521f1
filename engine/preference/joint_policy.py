"""One model for every role: turning a trainer's CoMLRL arguments for a team into those of one
joint policy (:func:`centralize`), and the evaluation hooks that see the roles again
(:class:`CentralizedRoles`). Used by CentralizedMAGRPO and by MADPO with
``collaboration_mode="centralized"``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from engine.preference.centralized import CentralizedCollaboration, TaggedCentralizedComparatorAdapter
from engine.rewards.team_reward import TeamReward
from engine.schema.preference_configs import MADPOConfig, MARLHFConfig
from engine.trainer.evaluation import path_completions
from engine.trainer.rollout import normalize_formatters
from engine.trainer.setup import AgentSetup
from engine.transcripts import TurnRecord

JOINT_NAME = "joint"  # the one actor's name in metrics and transcripts
_PER_AGENT = ("agent_learning_rates", "agent_generation", "system_prompts")


def _one(value: Any, name: str, roles: int) -> Any:
    """A per-agent list given per role (the run-config path) or once: the actor's entry."""
    if isinstance(value, list | tuple):
        if len(value) not in (1, roles):
            raise ValueError(f"{name}: got {len(value)} entries; pass one (the joint model's) or one per role")
        return value[0]
    return value


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


def unread_adapter_problem(config: object, adapter: Any) -> None:
    """A ``centralized_adapter`` given to a decentralized team would be ignored: refuse it by name."""
    centralized = isinstance(config, MADPOConfig | MARLHFConfig) and config.collaboration_mode == "centralized"
    if adapter is not None and not centralized:
        raise ValueError("centralized_adapter: only collaboration_mode='centralized' reads it (one model writes every "
                         "role); set that, or leave the adapter out (a centralized comparator's protocol is "
                         "centralized_comparator_adapter)")


def centralize(a: dict[str, Any], config: Any, adapter: Any, *, explicit_roles: bool,
               role_check: Callable[[Callable], Callable]) -> tuple[CentralizedCollaboration, list[str]]:
    """Rewrite the bound constructor arguments ``a`` (MAGRPO's) for one joint policy; returns the
    collaboration (joint prompts, the task reward on split roles) and the role names.

    ``num_agents`` is the number of roles (it must match ``config.num_agents`` when given); ``agents``
    is one model, or the same model once per role, or one :class:`engine.trainer.setup.AgentSetup`
    record per role; ``formatters`` and ``agent_names`` are per role; per-agent settings are the joint
    model's (the first role's)."""
    roles = config.num_agents
    if explicit_roles and a["num_agents"] != roles:
        raise ValueError(f"num_agents: {a['num_agents']} roles, but args.num_agents is {roles}; they must match")
    records = a["agents"] if a["agents"] and isinstance(a["agents"][0], AgentSetup) else None
    if records is not None:
        actor = _actor(None, [r.model for r in records], roles)
        role_names, formatters = [r.name for r in records], [r.formatter for r in records]
    else:
        actor = _actor(a["agent_model"], a["agents"], roles)
        role_names = list(a["agent_names"] or config.agent_names or [f"agent_{i}" for i in range(roles)])
        formatters = a["formatters"]
    if len(role_names) != roles:
        raise ValueError(f"agent_names: got {len(role_names)} role names for {roles} roles")
    collaboration = CentralizedCollaboration(
        adapter if adapter is not None else TaggedCentralizedComparatorAdapter(),
        normalize_formatters(formatters, roles), TeamReward(a["reward_func"], a["reward_processor"]), roles)
    check = a["eval_check"]
    a.update(num_agents=1, args=config, reward_func=collaboration, reward_processor=None,
             eval_check=None if check is None else role_check(check))
    if records is not None:
        a["agents"] = [dataclasses.replace(records[0], name=JOINT_NAME, model=actor,
                                           formatter=collaboration.build_prompt)]
        return collaboration, role_names
    a.update(
        agent_model=None, agents=[actor], tokenizer=_one(a["tokenizer"], "tokenizer", roles),
        formatters=[collaboration.build_prompt], agent_names=[JOINT_NAME],
        **{name: None if a[name] is None else [_one(a[name], name, roles)] for name in _PER_AGENT},
    )
    return collaboration, role_names


class CentralizedRoles:
    """Evaluation of a joint policy as a team: CoMLRL's ``eval_logger`` and pass@k see the roles'
    answers. Inactive (``collaboration`` None) for a decentralized team."""

    collaboration: CentralizedCollaboration | None = None
    role_names: list[str]
    collection_unparsed_share: float | None = None  # the last pair collection's joint answers without sections
    if TYPE_CHECKING:  # set by the trainer it is mixed into
        num_agents: int

    def collect_counting(self, collect: Callable[[], Any]) -> Any:
        """Run a pair collection; for one joint model keep the share of its completions the protocol
        could not split (``centralized/unparsed_share``)."""
        if self.collaboration is None:
            return collect()
        self.collaboration.take_unparsed_share()  # count this collection's completions only
        try:
            return collect()
        finally:
            self.collection_unparsed_share = self.collaboration.take_unparsed_share()

    def role_turns(self, item: dict[str, Any], joint: TurnRecord) -> list[TurnRecord]:
        """The roles inside a joint turn, numbered after the joint actor (``agent_index`` 1, 2, ...):
        each role's name, its own prompt and its part of the joint completion (what the task's reward
        scored), with the joint turn's reward, return and advantage."""
        assert self.collaboration is not None  # role turns are a joint policy's (madpo.py asks only then)
        answers = self.collaboration.split(joint.completion, item)
        prompts = self.collaboration.role_prompts(item)
        return [dataclasses.replace(joint, agent_index=1 + r, agent_name=name, prompt=prompts[r], completion=answers[r])
                for r, name in enumerate(self.role_names)]

    def _role_check(self, check: Callable[[dict, list[str]], bool]) -> Callable[[dict, list[str]], bool]:
        """The task's pass@k check on the roles' answers of a joint completion."""

        def joint_check(item: dict, joint: list[str]) -> bool:
            assert self.collaboration is not None  # the check wraps a joint policy's (centralize sets it)
            return check(item, self.collaboration.split(joint[0], item))

        return joint_check

    def _eval_completions(self, paths: list[list[Any]]) -> list[list[list[str]]]:
        """``[role][item][turn]`` for a joint policy (the agents' own texts otherwise)."""
        texts = path_completions(paths, self.num_agents)
        if self.collaboration is None:
            return texts
        split = [[self.collaboration.split(text, path[0].item) for text in turns] for turns, path in zip(
            texts[0], paths, strict=True)]
        return [[[turn[r] for turn in item] for item in split] for r in range(self.collaboration.num_roles)]
