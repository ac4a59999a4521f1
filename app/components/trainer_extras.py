"""Form sections shown beside the trainer settings: IAC/MAAC critic settings and a system of trainers.

Both write into the draft the shape ``engine.schema.run_config`` reads (``trainer.actor_critic`` and
``system``), register an error slot under each widget, and report input they cannot read, so the
experiment form prints every problem next to its widget before saving.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from app import actor_critic_settings as ac
from app import system_draft
from app.components.model_form import render_fields
from app.escape import md_code, md_text


def render_actor_critic(trainer: dict[str, Any], before: dict[str, Any], *, key: str,
                        slots: dict[str, Any]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The critic settings of an iac/maac trainer (typed widgets with the trainers' own defaults).

    ``trainer`` is the section after this run's edits, ``before`` the one the run started with: when
    the algorithm changed, settings the new algorithm lacks are dropped (all of them when it is not
    actor-critic), so switching algorithms never leaves a stale, refused setting behind.
    """
    stage = st.session_state.get(f"{key}.trainer.rl_algorithm")  # MARLHF's stage, shown further down the form:
    if stage is not None and trainer.get("algorithm") == "marlhf":  # its widget's value on this rerun
        trainer = {**trainer, "rl_algorithm": stage}
    algorithm = ac.critic_algorithm(trainer)
    settings = trainer.get("actor_critic")
    settings = dict(settings) if isinstance(settings, dict) else settings
    changed = algorithm != ac.critic_algorithm(before)
    if algorithm is None:
        if changed or not settings:
            return {**trainer, "actor_critic": {}}, {}
        st.caption(f"`actor_critic` settings apply to iac/maac (and marlhf with rl_algorithm iac/maac) only: "
                   f"{md_code(settings)}")
        slots["trainer.actor_critic"] = st.empty()
        return trainer, {}
    if not isinstance(settings, dict):  # e.g. a list in an imported file: validation names it
        slots["trainer.actor_critic"] = st.empty()
        return trainer, {}
    known = ac.defaults(algorithm)
    if changed:
        settings = {k: v for k, v in settings.items() if k in known}
    owner = {"iac": "IACConfig", "maac": "MAACConfig"}.get(algorithm, "MARLHFConfig")
    label = algorithm.upper() if algorithm != "marlhf" else f"MARLHF's {str(trainer.get('rl_algorithm')).upper()} stage"
    st.markdown(f"**Critic settings ({md_text(label)})** · defaults as in CoMLRL's `{owner}`")
    shown, input_errors = render_fields(ac.forms(algorithm), {**known, **settings},
                                        key=f"{key}.trainer.ac.{algorithm}", path="trainer.actor_critic",
                                        slots=slots, columns=4)
    slots["trainer.actor_critic"] = st.empty()
    stored = ac.edited_settings(algorithm, {k: shown[k] for k in known}, settings)
    return {**trainer, "actor_critic": stored}, input_errors


def render_system(draft: dict[str, Any], agents: list[dict[str, Any]], *, key: str,
                  slots: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, list[str]]]:
    """The "System of trainers" switch and its YAML editor; returns the ``system`` value (None = off)."""
    current = draft.get("system")
    on = st.toggle("System of trainers", value=current is not None, key=f"{key}.system.on",
                   help="Train each agent (or sub-team) in its own trainer, updated on a schedule "
                        "(docs/systems.md).")
    if not on:
        return None, {}
    start = current if current is not None else system_draft.example_system(agents)
    text = st.text_area("system (YAML)", value=system_draft.to_text(start), height=220,
                        key=f"{key}.system.yaml",
                        help="trainers (name, agents, optional trainer overrides), schedule "
                             "(all_together, alternating, round_robin, every_k, custom), rounds, "
                             "items_per_round, transcripts_per_round, checkpoint_interval.")
    slots["system"] = st.empty()
    try:
        return system_draft.from_text(text), {}
    except system_draft.SystemTextError as exc:
        return (current if current is not None else start), {"system": [str(exc)]}
