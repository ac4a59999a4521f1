"""The transcript of a rollout: one :class:`TurnRecord` per agent and turn, grouped into an :class:`Episode`.

One type end to end: the engine builds these and reports them through its sink, the job's database
sink hands them to ``db.store.Store.log_step`` unchanged, and the store's readers return the stored
turns as the same :class:`TurnRecord` (inside ``db.records.EpisodeView``). This module imports
nothing of the engine and no third-party library: it is the one module of the engine that ``db`` imports
(an import contract in pyproject.toml keeps it so), and every layer (engine, db, jobs, app) may use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TurnRecord:
    """What one agent saw and said at one turn of an episode, with the credit it got."""

    turn: int  # 1-based
    agent_index: int
    agent_name: str
    prompt: str
    completion: str
    reward: float  # team reward of the joint action at this turn
    ret: float  # (discounted) return from this turn on
    advantage: float
    credit: float | None = None  # team reward less the reward with this agent's reply left empty, when measured


@dataclass(frozen=True)
class Episode:
    """One branch of the rollout tree: every turn of every agent, in order.

    ``split`` is ``"train"`` or ``"eval"``; ``item_index`` is the dataset item the branch answered.
    """

    sample_index: int
    split: str = "train"
    item_index: int | None = None
    turns: tuple[TurnRecord, ...] = field(default_factory=tuple)
