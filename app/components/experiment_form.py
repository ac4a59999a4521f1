"""The experiment editor: team (one row per agent), task with its own parameters, trainer settings
(with critic settings for IAC/MAAC) and an optional system of trainers.

Everything is generated from the schemas (``AgentSpec``, ``TrainerSpec``, the task's params model),
laid out as they say (the settings catalog's ``form="main"`` trainer settings first, the agent fields
by their ``form`` place), edited as a plain draft dict, validated on every rerun (with the pre-flight checks: model sources,
context lengths, task parameters; a custom task path must be in an allowed module), and each problem
is printed next to the field it concerns before anything can be saved. A changed task names the role
names and lengths kept from the previous one and offers its own (``app.task_switch``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from app import context
from app import draft as drafts
from app.components.comparator_choice import CheckpointOption, render_comparator
from app.components.model_form import place_errors, render_fields, show_errors
from app.components.trainer_extras import render_actor_critic, render_system
from app.escape import md_code, md_text
from app.fields import FieldForm, model_forms, named_forms, placed_forms
from app.task_switch import carried_over, task_defaults, task_preset, with_task_defaults
from app.unused_settings import shown_for
from engine.schema.catalog import FORM_MAIN
from engine.schema.run_config import AgentSpec, RunConfig, TrainerSpec

BUILTIN_MODELS = ("builtin:tiny-llama", "builtin:tiny-qwen2", "builtin:smollm2-135m")
BLANK_NAME = "the experiment name is empty (or only spaces); type a name"
MAX_NAME = 200  # what the store keeps


def name_problem(name: str) -> str | None:
    """Why ``name`` (already trimmed) cannot name an experiment, or None: said at the field instead of
    failing in the store on Save."""
    if not name:
        return BLANK_NAME
    if len(name) > MAX_NAME:
        return f"the experiment name is {len(name)} characters long; keep it within {MAX_NAME}"
    return None


@dataclass
class EditorResult:
    """What the editor produced this run: the edited draft, its config when valid, and its errors."""

    draft: dict[str, Any]
    config: RunConfig | None
    errors: dict[str, list[str]]
    add_agent: bool = False
    remove_agent: int | None = None
    reload: dict[str, Any] | None = None  # a draft to load instead (the new task's defaults taken)


def _agent_row(index: int, agent: dict[str, Any], earlier: list[str], key: str, slots: dict,
               can_remove: bool) -> tuple[dict[str, Any], dict[str, list[str]], bool]:
    """One agent: role name, model source, sharing, sampling, prompts. Returns (agent, input errors, remove)."""
    path = f"agents.{index}"
    out = dict(agent)
    with st.container(border=True):
        head, remove_col = st.columns([6, 1])
        title = head.empty()  # filled below with the role name as typed (it follows edits at once)
        remove = remove_col.button("Remove", key=f"{key}.remove", disabled=not can_remove,
                                   help="Remove this agent from the team")
        c1, c2, c3 = st.columns([1, 2, 1])
        with c1:
            out["name"] = st.text_input("role name", value=str(agent.get("name") or ""), key=f"{key}.name",
                                        help=AgentSpec.model_fields["name"].description)
            slots[f"{path}.name"] = st.empty()
        title.markdown(f"**Agent {index}** · {md_code(out['name'])}")
        with c2:
            model = str(agent.get("model") or "")
            options = list(BUILTIN_MODELS) + ([model] if model and model not in BUILTIN_MODELS else [])
            out["model"] = st.selectbox(
                "model source", options, index=options.index(model) if model in options else None,
                key=f"{key}.model", accept_new_options=True,
                help=AgentSpec.model_fields["model"].description,
            )
            slots[f"{path}.model"] = st.empty()
        with c3:
            share = agent.get("share_weights_with")
            choices = [None, *earlier] + ([share] if share and share not in earlier else [])
            out["share_weights_with"] = st.selectbox(
                "share weights with", choices, index=choices.index(share), key=f"{key}.share",
                format_func=lambda v: "(own weights)" if v is None else str(v),
                help=AgentSpec.model_fields["share_weights_with"].description,
            )
            slots[f"{path}.share_weights_with"] = st.empty()
        values, input_errors = render_fields(placed_forms(AgentSpec, "main"), out, key=key, path=path,
                                             slots=slots, columns=6)
        out.update(values)
        for column, name in zip(st.columns(2), ("system_prompt", "prompt_template"), strict=True):
            with column:  # an empty box means None: the tokenizer's chat template / the item's prompt as is
                text = st.text_area(name.replace("_", " "), value=agent.get(name) or "", height=68,
                                    key=f"{key}.{name}", help=AgentSpec.model_fields[name].description)
                out[name] = text or None
                slots[f"{path}.{name}"] = st.empty()
        with st.expander("More agent settings"):
            extra, extra_errors = render_fields(placed_forms(AgentSpec, "more"), out, key=key, path=path,
                                                slots=slots, columns=2)
        out.update(extra)
        input_errors.update(extra_errors)
        slots[path] = st.empty()
    return out, input_errors, remove


def duplicate_role_errors(agents: list[dict[str, Any]]) -> dict[str, list[str]]:
    """An error beside each role name that another agent of the team also uses."""
    names = [str(a.get("name") or "") for a in agents]
    errors: dict[str, list[str]] = {}
    for index, name in enumerate(names):
        others = [str(i) for i, other in enumerate(names) if other == name and i != index]
        if name and others:
            errors[f"agents.{index}.name"] = [f"role name '{name}' is also used by agent {', '.join(others)}; "
                                              "each agent needs its own role name"]
    return errors


def render_editor(draft: dict[str, Any], *, gen: int, catalog: dict[str, Any],
                  checkpoints: list[CheckpointOption] | None = None) -> EditorResult:
    """Draw the whole editor for ``draft``; widget keys include ``gen`` so loading a new draft resets them.
    ``checkpoints`` (of the experiment's earlier runs) are offered as the iterative trainers' comparator."""
    key = f"ed{gen}"
    slots: dict[str, Any] = {}
    input_errors: dict[str, list[str]] = {}
    out = dict(draft)
    top = st.empty()

    c1, c2, c3 = st.columns([2, 3, 2])
    typed_name = c1.text_input("experiment name", value=str(draft.get("name") or ""), key=f"{key}.name")
    out["name"] = typed_name.strip()  # stored trimmed, as the store keeps names
    with c1:
        slots["name"] = st.empty()
    if problem := name_problem(out["name"]):
        input_errors["name"] = [problem]
    out["description"] = c2.text_input("description", value=str(draft.get("description") or ""),
                                       key=f"{key}.description")
    tags_text = c3.text_input("tags (comma-separated)", value=", ".join(draft.get("tags") or []),
                              key=f"{key}.tags")
    out["tags"] = [t.strip() for t in tags_text.split(",") if t.strip()]

    # ---- team
    st.subheader("Team")
    agents_in = [a if isinstance(a, dict) else {} for a in draft.get("agents") or []]
    agents_out = []
    remove_index = None
    for index, agent in enumerate(agents_in):
        earlier = [str(a.get("name")) for a in agents_out]
        edited, errs, remove = _agent_row(index, agent, earlier, f"{key}.agent{index}", slots,
                                          can_remove=len(agents_in) > 1)
        agents_out.append(edited)
        input_errors.update(errs)
        if remove:
            remove_index = index
    out["agents"] = agents_out
    input_errors.update(duplicate_role_errors(agents_out))
    add_agent = st.button("Add agent", key=f"{key}.add_agent", icon=":material/add:")
    slots["agents"] = st.empty()

    # ---- task
    st.subheader("Task")
    task = dict(draft.get("task") or {})
    names = list(catalog)  # built-ins and installed entry points: the tasks a config may name by name
    allowed_modules = ", ".join(context.allowed_task_modules()) or "none"
    current = str(task.get("name") or "")
    options = names + ([current] if current and current not in names else [])
    chosen = st.selectbox(
        "task", options, index=options.index(current) if current in options else None, key=f"{key}.task",
        accept_new_options=True, format_func=lambda n: f"{catalog[n].title} ({n})" if n in catalog else n,
        help="A built-in task, an installed plugin task, or 'package.module:factory' from a module the "
             f"operator allows with COOPLAB_TASK_MODULES (allowed here: {allowed_modules}).",
    )
    slots["task.name"] = st.empty()
    info = catalog.get(chosen)
    params = dict(task.get("params") or {})
    if chosen != current:
        params = info.default_params() if info is not None else {}
    if info is not None:
        st.caption(f"{info.description} · roles: {', '.join(info.roles)} · team sizes: "
                   f"{', '.join(str(n) for n in info.team_sizes)}")
        params, errs = render_fields(model_forms(info.params_model), params,
                                     key=f"{key}.task.{chosen}", path="task.params", slots=slots)
        input_errors.update(errs)
    else:
        forms = [FieldForm(name="params", kind="json", optional=False,
                           help="Parameters passed to your task factory, as JSON.")]
        values, errs = render_fields(forms, {"params": params}, key=f"{key}.task.custom", path="task",
                                     slots=slots, columns=1)
        params = values["params"]
        input_errors.update(errs)
    out["task"] = {**task, "name": chosen or "", "params": params}
    slots["task.params"] = st.empty()
    switched = st.empty()  # filled once the trainer is read: what the previous task left behind

    # ---- trainer
    st.subheader("Trainer")
    trainer = dict(draft.get("trainer") or {})
    trainer, errs = render_fields(named_forms(TrainerSpec, FORM_MAIN), trainer, key=f"{key}.trainer",
                                  path="trainer", slots=slots, columns=4)
    input_errors.update(errs)
    trainer, errs = render_actor_critic(trainer, dict(draft.get("trainer") or {}), key=key, slots=slots)
    input_errors.update(errs)
    trainer = render_comparator(trainer, dict(draft.get("trainer") or {}), checkpoints or [], key=key, slots=slots)
    with st.expander("Advanced trainer settings"):
        rest = [f for f in model_forms(TrainerSpec, exclude=(*FORM_MAIN, "actor_critic", "comparator_policy",
                                                             "comparator_checkpoint"))
                if shown_for(f.name, trainer)]
        trainer, errs = render_fields(rest, trainer, key=f"{key}.trainer", path="trainer", slots=slots,
                                      columns=4)
        input_errors.update(errs)
    out["trainer"] = trainer
    slots["trainer"] = st.empty()

    # ---- system of trainers
    st.subheader("System of trainers")
    system, errs = render_system(draft, agents_out, key=key, slots=slots)
    input_errors.update(errs)
    if system is None:
        out.pop("system", None)
    else:
        out["system"] = system

    reload = None
    if info is not None and chosen != current:
        defaults = task_defaults(info, task_preset(chosen, context.presets()))
        left = carried_over(out, defaults)
        if left:
            with switched.container():
                shown = "; ".join(f"{md_code(path)} {md_text(now)} → {md_text(new)}" for path, now, new in left)
                st.info(f"Kept from the previous task ({md_text(current or 'none')}), with {md_text(chosen)}'s "
                        f"default after the arrow: {shown}.", icon=":material/swap_horiz:")
                if st.button(f"Use {chosen}'s defaults (roles, lengths)", key=f"{key}.task_defaults"):
                    reload = with_task_defaults(out, defaults)

    config, errors = drafts.validate(out, info, preflight=context.preflight_problems)
    if any(path.endswith(".name") and path.startswith("agents.") for path in input_errors):
        # said beside each repeated role name instead of once at the top
        errors = {p: [m for m in ms if not m.startswith("agent names must be unique")] for p, ms in errors.items()}
        errors = {p: ms for p, ms in errors.items() if ms}
    if "name" in input_errors:
        errors.pop("name", None)  # the schema's "at least 1 character" says less than the field's message
    for path, messages in input_errors.items():
        errors[path] = messages + [m for m in errors.get(path, []) if m not in messages]
    if input_errors:
        config = None
    leftovers = place_errors(slots, errors)
    if errors:
        with top.container():
            show_errors([f"{len(errors)} field(s) need attention before this experiment can be saved; "
                         "see the messages next to the fields.", *leftovers])
    return EditorResult(out, config, errors, add_agent=add_agent, remove_agent=remove_index, reload=reload)
