"""The comparator of the iterative preference trainers (madpo_iter, marlhf_iter) in the experiment form.

One choice: a comparator policy (``current``, ``current_copy``, ``model`` = another model or the
initial policy, ``history``, ``api``) or a checkpoint of an earlier run of this experiment, which sets
``comparator_policy: model`` and ``comparator_checkpoint: <folder>`` (the engine loads that folder's
agent weights as the comparator). A folder that no longer exists is refused, next to this widget,
by the pre-flight check before the experiment can be saved or launched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from db.store import Store

ITERATIVE = ("madpo_iter", "marlhf_iter")
POLICIES = {
    "current": "current: the policy's own candidates",
    "current_copy": "current_copy: a second sample of a frozen copy",
    "model": "model: a fixed model (comparator_model_name / comparator_agents; empty: the initial policy)",
    "history": "history: the policy comparator_history_k iterations back",
    "api": "api: an HTTP LLM API (comparator_api_url and the comparator_api_* settings)",
}
CHECKPOINT = "checkpoint:"  # an option naming a checkpoint folder


@dataclass(frozen=True)
class CheckpointOption:
    """A checkpoint of an earlier run of the experiment, as the form lists it."""

    run_id: int
    step: int
    path: str

    @property
    def label(self) -> str:
        return f"checkpoint of run #{self.run_id} at step {self.step}"


def experiment_checkpoints(store: Store, experiment_id: int | None, *, runs: int = 20) -> list[CheckpointOption]:
    """The checkpoints of the experiment's latest ``runs`` runs, newest run first, latest step first."""
    if experiment_id is None:
        return []
    found = []
    for run in store.list_runs(experiment_id, limit=runs):
        found += sorted((CheckpointOption(run.id, c.step, c.path) for c in store.list_checkpoints(run.id)),
                        key=lambda c: -c.step)
    return found


def render_comparator(trainer: dict[str, Any], before: dict[str, Any], checkpoints: list[CheckpointOption], *,
                      key: str, slots: dict[str, Any]) -> dict[str, Any]:
    """The comparator widget of an iterative preference trainer; returns the trainer section with
    ``comparator_policy``/``comparator_checkpoint`` set from it. For other algorithms nothing is drawn,
    and the two settings are dropped when the algorithm was just changed away from an iterative one."""
    algorithm = trainer.get("algorithm")
    if algorithm not in ITERATIVE:
        if algorithm != before.get("algorithm"):
            return {k: v for k, v in trainer.items() if k not in ("comparator_policy", "comparator_checkpoint")}
        return trainer
    labels = dict(POLICIES)
    labels.update({CHECKPOINT + c.path: f"{c.label} ({c.path})" for c in checkpoints})
    chosen_path = trainer.get("comparator_checkpoint")
    if chosen_path:
        current = CHECKPOINT + str(chosen_path)
        labels.setdefault(current, f"checkpoint folder {chosen_path} (not among this experiment's checkpoints)")
    else:
        current = str(trainer.get("comparator_policy") or "current")
        labels.setdefault(current, current)
    options = list(labels)
    choice = st.selectbox(
        f"comparator ({algorithm})", options, index=options.index(current), format_func=labels.get,
        key=f"{key}.trainer.comparator",
        help="Whose candidates each iteration's are compared with: a policy of this run, or the agents' "
             "weights in a checkpoint of an earlier run of this experiment (the same team).",
    )
    slots["trainer.comparator_policy"] = st.empty()
    slots["trainer.comparator_checkpoint"] = st.empty()
    out = {k: v for k, v in trainer.items() if k != "comparator_checkpoint"}
    if choice.startswith(CHECKPOINT):
        out.update(comparator_policy="model", comparator_checkpoint=choice[len(CHECKPOINT):])
    else:
        out["comparator_policy"] = choice
    return out
