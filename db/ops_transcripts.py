"""Episodes and turns (:class:`TranscriptOps`, part of :class:`db.store.Store`): batch writes of a step's
transcripts, filtered reads, export.

Each prompt and completion is stored capped (:func:`db.text_cap.cap_text`, 64 KiB with a marker
naming the cap), an agent name cut to its column's 200 characters. A turn's credit (the team reward
less the reward with that agent's reply left empty) is stored where the step measured it and NULL
otherwise (not measured, not finite, or a turn of a writer from before credit existed)."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import exists, func, insert, or_, select
from sqlalchemy.orm import Session

from db import convert
from db.engine import StoreBase
from db.models import EpisodeRow, TurnRow
from db.ops_experiments import like_pattern
from db.records import EpisodesSince, EpisodeView
from db.text_cap import cap_text
from engine.transcripts import Episode

SPLITS = ("train", "eval")
AGENT_NAME_CHARS = 200
"""The width of ``turns.agent_name`` (pre-flight keeps names far shorter, see ``COOPLAB_MAX_NAME_LENGTH``)."""


def episode_totals(turns: Sequence[Any]) -> tuple[float, float]:
    """``(reward, ret)`` of an episode from its turns: the sum over turns of the team reward (the mean
    over agents of a turn, which all carry the same team reward) and the first turn's return."""
    by_turn: dict[int, list[Any]] = defaultdict(list)
    for t in turns:
        by_turn[int(t.turn)].append(t)
    if not by_turn:
        return 0.0, 0.0
    reward = sum(sum(float(t.reward) for t in group) / len(group) for group in by_turn.values())
    first = by_turn[min(by_turn)]
    ret = sum(float(t.ret) for t in first) / len(first)
    return reward, ret


def turn_credit(turn: Any) -> float | None:
    """A turn's credit as stored: a finite float, or None when it was not measured (a turn record
    without the field, ``None``, or a non-finite value)."""
    value = getattr(turn, "credit", None)
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _check_episode(ep: Any) -> None:
    for name in ("sample_index", "split", "turns"):
        if not hasattr(ep, name):
            raise TypeError(f"episode {ep!r} has no {name!r}; pass a transcripts.Episode")
    if ep.split not in SPLITS:
        raise ValueError(f"episode split must be one of {SPLITS}, got {ep.split!r}")


def _with_turns(session: Session, rows: Sequence[EpisodeRow]) -> list[EpisodeView]:
    if not rows:
        return []
    turns: dict[int, list[TurnRow]] = defaultdict(list)
    turn_query = (select(TurnRow).where(TurnRow.episode_id.in_([r.id for r in rows]))
                  .order_by(TurnRow.episode_id, TurnRow.turn, TurnRow.agent_index, TurnRow.id))
    for t in session.scalars(turn_query):
        turns[t.episode_id].append(t)
    return [convert.episode(r, turns[r.id]) for r in rows]


def episode_filters(split: str | None, min_reward: float | None, max_reward: float | None,
                    text: str | None) -> list[Any]:
    """The conditions on episodes of :meth:`TranscriptOps.episodes`' filters: the split, the total reward's
    range, and some prompt or completion containing ``text`` (case-insensitive)."""
    conditions: list[Any] = []
    if split is not None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        conditions.append(EpisodeRow.split == split)
    if min_reward is not None:
        conditions.append(EpisodeRow.reward >= min_reward)
    if max_reward is not None:
        conditions.append(EpisodeRow.reward <= max_reward)
    if text:
        pattern = like_pattern(text)
        conditions.append(exists().where(
            TurnRow.episode_id == EpisodeRow.id,
            or_(func.lower(TurnRow.prompt).like(pattern, escape="\\"),
                func.lower(TurnRow.completion).like(pattern, escape="\\"))))
    return conditions


def jsonl_batch(session: Session, run_id: int, *, after_id: int, batch_size: int,
                steps: tuple[int | None, int | None] = (None, None)) -> tuple[str, int]:
    """The next ``batch_size`` episodes (id above ``after_id``, step within ``steps``, inclusive, None
    unbounded) as JSON lines, and the last id read (``after_id`` when none is left, with an empty text)."""
    query = select(EpisodeRow).where(EpisodeRow.run_id == run_id, EpisodeRow.id > after_id)
    if steps[0] is not None:
        query = query.where(EpisodeRow.step >= steps[0])
    if steps[1] is not None:
        query = query.where(EpisodeRow.step <= steps[1])
    rows = session.scalars(query.order_by(EpisodeRow.id).limit(batch_size)).all()
    lines = [json.dumps({
        "step": ep.step, "split": ep.split, "sample_index": ep.sample_index, "item_index": ep.item_index,
        "reward": ep.reward, "return": ep.ret,
        "turns": [{"turn": t.turn, "agent_index": t.agent_index, "agent_name": t.agent_name,
                   "prompt": t.prompt, "completion": t.completion, "reward": t.reward, "return": t.ret,
                   "advantage": t.advantage, "credit": t.credit} for t in ep.turns],
    }) + "\n" for ep in _with_turns(session, rows)]
    return "".join(lines), (rows[-1].id if rows else after_id)


class TranscriptOps(StoreBase):
    """Episodes and turns: the operations of :class:`db.store.Store` on them, each one transaction."""

    def log_episodes(self, run_id: int, step: int, episodes: Sequence[Episode]) -> None:
        """Write episodes outside a training step (evaluation transcripts); a training step's episodes
        go in with its metrics (:meth:`db.store.Store.log_step`). Two batched INSERTs: the episodes, then
        all their turns."""
        with self._write() as session:
            if not episodes:
                return
            episode_rows = []
            for ep in episodes:
                _check_episode(ep)
                reward, ret = episode_totals(ep.turns)
                episode_rows.append({"run_id": run_id, "step": step, "split": ep.split,
                                     "sample_index": int(ep.sample_index), "item_index": getattr(ep, "item_index", None),
                                     "reward": reward, "ret": ret})
            ids = session.execute(insert(EpisodeRow).returning(EpisodeRow.id, sort_by_parameter_order=True),
                                  episode_rows).scalars().all()
            turn_rows = [
                {"episode_id": episode_id, "run_id": run_id, "step": step, "turn": int(t.turn),
                 "agent_index": int(t.agent_index), "agent_name": str(t.agent_name)[:AGENT_NAME_CHARS],
                 "prompt": cap_text(str(t.prompt)), "completion": cap_text(str(t.completion)),
                 "reward": float(t.reward), "ret": float(t.ret), "advantage": float(t.advantage),
                 "credit": turn_credit(t)}
                for episode_id, ep in zip(ids, episodes, strict=True)
                for t in ep.turns
            ]
            if turn_rows:
                session.execute(insert(TurnRow), turn_rows)

    def episodes(self, run_id: int, step: int | None = None, split: str | None = None,
                 min_reward: float | None = None, max_reward: float | None = None,
                 text: str | None = None, limit: int = 50, *, offset: int = 0) -> list[EpisodeView]:
        """Stored episodes with their turns, newest step first then by sample index. ``text`` keeps
        episodes where some prompt or completion contains it (case-insensitive); rewards filter on
        the episode's total reward."""
        with self._read() as session:
            query = select(EpisodeRow).where(EpisodeRow.run_id == run_id,
                                             *episode_filters(split, min_reward, max_reward, text))
            if step is not None:
                query = query.where(EpisodeRow.step == step)
            query = query.order_by(EpisodeRow.step.desc(), EpisodeRow.split, EpisodeRow.sample_index, EpisodeRow.id)
            rows = session.scalars(query.limit(limit).offset(offset)).all()
            return _with_turns(session, rows)

    def episodes_since(self, run_id: int, *, after_id: int = 0, step_from: int = 0, limit: int = 50,
                       split: str | None = None, min_reward: float | None = None, max_reward: float | None = None,
                       text: str | None = None) -> EpisodesSince:
        """What a live view of a run's newest step has not seen yet: among the episodes whose id is above
        ``after_id`` at steps ``>= step_from``, how many match the filters (as :meth:`episodes`), the
        newest step among those, its matching episodes (at most ``limit``, by split and sample index)
        with their turns, and the highest episode id now (``after_id`` when none is newer: the next
        call's cursor). A run's training episodes are written by its one job in step order, a step's all
        at once, so ``(newest step seen, highest id seen)`` marks exactly the episodes still to fetch;
        the step bound keeps the read on the ``(run_id, step)`` index. Nothing new: one read."""
        matching = episode_filters(split, min_reward, max_reward, text)
        newer = (EpisodeRow.run_id == run_id, EpisodeRow.step >= int(step_from), EpisodeRow.id > int(after_id))
        with self._read() as session:
            top = session.execute(select(func.max(EpisodeRow.id), func.max(EpisodeRow.step)).where(*newer)).one()
            if top[0] is None:
                return EpisodesSince((), 0, None, int(after_id), int(step_from))
            matching = [*newer, *matching]
            count, newest = session.execute(select(func.count(EpisodeRow.id), func.max(EpisodeRow.step))
                                            .where(*matching)).one()
            rows: Sequence[EpisodeRow] = ()
            if count:
                rows = session.scalars(select(EpisodeRow).where(*matching, EpisodeRow.step == newest)
                                       .order_by(EpisodeRow.split, EpisodeRow.sample_index, EpisodeRow.id)
                                       .limit(int(limit))).all()
            return EpisodesSince(tuple(_with_turns(session, rows)), int(count), None if newest is None else int(newest),
                                 int(top[0]), int(top[1]))

    def episode_steps(self, run_id: int, split: str | None = None) -> list[int]:
        """The steps that have stored episodes, ascending."""
        with self._read() as session:
            query = select(EpisodeRow.step).where(EpisodeRow.run_id == run_id).distinct().order_by(EpisodeRow.step)
            if split is not None:
                query = query.where(EpisodeRow.split == split)
            return [int(s) for s in session.scalars(query)]

    def export_episodes_jsonl(self, run_id: int, *, batch_size: int = 500) -> str:
        """Every episode with its turns as JSON lines (one episode per line), read ``batch_size``
        episodes at a time in one transaction."""
        with self._read() as session:
            parts: list[str] = []
            last_id = -1
            while True:
                text, last_id = jsonl_batch(session, run_id, after_id=last_id, batch_size=batch_size)
                if not text:
                    return "".join(parts)
                parts.append(text)

    def stream_episodes_jsonl(self, run_id: int, *, batch_size: int = 200) -> Iterator[str]:
        """The same JSON lines in chunks of ``batch_size`` episodes, each read in its own short session
        (for downloads: the whole export is never in memory, no connection waits on a slow client)."""
        last_id = -1
        while True:
            with self._read() as session:
                text, last_id = jsonl_batch(session, run_id, after_id=last_id, batch_size=batch_size)
            if not text:
                return
            yield text
