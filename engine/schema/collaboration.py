"""Which algorithms train one joint model from a run config (``trainer.collaboration_mode``), and
the team such a run lists. Torch-free: the run config, the pre-flight and the dashboard read it.

``centralized_magrpo`` is always centralized; the preference trainers (``madpo``, ``madpo_iter``,
``marlhf``, ``marlhf_iter``) are decentralized unless ``collaboration_mode: centralized``; every other algorithm trains a team of separate agents. An
empty ``collaboration_mode`` is the algorithm's own. A centralized run lists one ``agents`` entry
per role (their names and prompt templates are the roles'); every role after the first shares the
first's weights and leaves its own sampling, optimizer, device and system-prompt settings empty
(the one joint model uses the first entry's); LoRA is refused (every sharing agent would get an
adapter of its own, so the roles would not be one model).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

ALWAYS_CENTRALIZED = ("centralized_magrpo",)
CAN_CENTRALIZE = ("madpo", "madpo_iter", "marlhf", "marlhf_iter")
CENTRALIZED_ALGORITHMS = (*CAN_CENTRALIZE, *ALWAYS_CENTRALIZED)
# an agent's own settings that a later role of a centralized team cannot have (the joint model's are the first's)
JOINT_SETTINGS = ("learning_rate", "temperature", "top_p", "top_k", "max_new_tokens", "device", "system_prompt")


def collaboration_problem(algorithm: str, mode: str | None) -> str | None:
    """Why ``collaboration_mode=mode`` does not fit ``algorithm`` (the message names the fix), or None."""
    supported = ", ".join(CENTRALIZED_ALGORITHMS[:-1]) + f" and {CENTRALIZED_ALGORITHMS[-1]}"
    if mode == "centralized" and algorithm not in CENTRALIZED_ALGORITHMS:
        return (f"'centralized' (one model writes every role) is supported by {supported}, not by {algorithm}, "
                f"which trains a team of separate agents; set trainer.algorithm to one of those, or leave "
                f"collaboration_mode empty (decentralized)")
    if mode == "decentralized" and algorithm in ALWAYS_CENTRALIZED:
        return (f"{algorithm} always trains one model for every role; leave collaboration_mode empty (or "
                f"'centralized'), or set trainer.algorithm to magrpo for a team of separate agents")
    return None


def is_centralized(algorithm: str, mode: str | None) -> bool:
    """Whether a run config of ``algorithm`` with ``collaboration_mode=mode`` trains one joint model."""
    return algorithm in ALWAYS_CENTRALIZED or (algorithm in CAN_CENTRALIZE and mode == "centralized")


def centralized_team_problems(agents: Sequence[Any], algorithm: str) -> list[str]:
    """``"field: message"`` for each way a centralized run's ``agents`` are not one model's roles."""
    what = algorithm if algorithm in ALWAYS_CENTRALIZED else f"{algorithm} with collaboration_mode='centralized'"
    undo = "" if algorithm in ALWAYS_CENTRALIZED else " (or set trainer.collaboration_mode to 'decentralized')"
    first = agents[0].name
    problems = []
    if len(agents) > 1 and agents[0].lora_rank is not None:
        problems.append(f"agents.0.lora_rank: {what} trains one model, but LoRA gives every role an adapter of its "
                        f"own; remove lora_rank from the agents")
    for i, agent in enumerate(agents[1:], start=1):
        if agent.share_weights_with != first:
            problems.append(f"agents.{i}.share_weights_with: {what} trains one model for every role; set it to "
                            f"{first!r}{undo}")
        for name in JOINT_SETTINGS:
            if getattr(agent, name) is not None:
                problems.append(f"agents.{i}.{name}: {what} samples and trains every role with the first agent's "
                                f"settings; leave it empty here and set it on agents.0 ({first!r})")
    return problems
