"""The experiment editor: team (one row per agent), task with its own parameters, trainer settings
(with critic settings for IAC/MAAC) and an optional system of trainers.

Everything is generated from the schemas (``AgentSpec``, ``TrainerSpec``, the task's params model),
laid out as they say (the settings catalog's ``form="main"`` trainer settings first, the agent fields
by their ``form`` place), edited as a plain draft dict, validated on every rerun (with the pre-flight checks: model sources,
context lengths, task parameters; a custom task path must be in an allowed module), and each problem
is printed next to the field it concerns before anything can be saved. A changed task names the role
names and lengths kept from the previous one and offers its own (``app.task_switch``).

Each section of the form is one function that draws it and returns ``(value, errors)``: its part of
the draft and the input it could not read, by dotted field path. Under each widget a section leaves an
empty slot (``slots``, by the same path); once every section is drawn, :func:`render_editor` validates
the whole draft and prints each problem in its field's slot.
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
from app.form_hints import checkpoint_hints, learning_rate_warnings
from app.task_switch import carried_over, task_defaults, task_preset, with_task_defaults
from app.unused_settings import shown_for
from engine.schema.catalog import FORM_MAIN
from engine.schema.run_config import AgentSpec, RunConfig, TrainerSpec

BUILTIN_MODELS = ("builtin:tiny-llama", "builtin:tiny-qwen2", "builtin:smollm2-135m")
BLANK_NAME = "the experiment name is empty (or only spaces); type a name"
MAX_NAME = 200  # what the store keeps
ADVANCED_EXCLUDED = (*FORM_MAIN, "actor_critic", "comparator_policy", "comparator_checkpoint")

Errors = dict[str, list[str]]


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
    errors: Errors
    add_agent: bool = False
    remove_agent: int | None = None
    reload: dict[str, Any] | None = None  # a draft to load instead (the new task's defaults taken)


@dataclass(frozen=True)
class Team:
    """The team section's value: the edited agents, and whether one was asked to be added or removed."""

    agents: list[dict[str, Any]]
    add: bool = False
    remove: int | None = None


@dataclass(frozen=True)
class TaskChoice:
    """The task section's value: the edited ``task`` section, the chosen task's catalog entry (None for
    a custom factory path) and the task the draft named before this run."""

    task: dict[str, Any]
    info: Any
    previous: str

    @property
    def name(self) -> str:
        return str(self.task["name"])

    @property
    def switched(self) -> bool:
        return self.info is not None and self.name != self.previous


def about_section(draft: dict[str, Any], *, key: str, slots: dict[str, Any]) -> tuple[dict[str, Any], Errors]:
    """Name (stored trimmed, as the store keeps names), description and tags."""
    c1, c2, c3 = st.columns([2, 3, 2])
    name = c1.text_input("experiment name", value=str(draft.get("name") or ""), key=f"{key}.name").strip()
    with c1:
        slots["name"] = st.empty()
    description = c2.text_input("description", value=str(draft.get("description") or ""), key=f"{key}.description")
    tags = c3.text_input("tags (comma-separated)", value=", ".join(draft.get("tags") or []), key=f"{key}.tags")
    value = {"name": name, "description": description, "tags": [t.strip() for t in tags.split(",") if t.strip()]}
    problem = name_problem(name)
    return value, ({"name": [problem]} if problem else {})


def _agent_row(index: int, agent: dict[str, Any], earlier: list[str], key: str, slots: dict,
               can_remove: bool) -> tuple[dict[str, Any], Errors, bool]:
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


def duplicate_role_errors(agents: list[dict[str, Any]]) -> Errors:
    """An error beside each role name that another agent of the team also uses."""
    names = [str(a.get("name") or "") for a in agents]
    errors: Errors = {}
    for index, name in enumerate(names):
        others = [str(i) for i, other in enumerate(names) if other == name and i != index]
        if name and others:
            errors[f"agents.{index}.name"] = [f"role name '{name}' is also used by agent {', '.join(others)}; "
                                              "each agent needs its own role name"]
    return errors


def team_section(draft: dict[str, Any], *, key: str, slots: dict[str, Any]) -> tuple[Team, Errors]:
    """One row per agent (each with its Remove button), then Add agent."""
    st.subheader("Team")
    agents_in = [a if isinstance(a, dict) else {} for a in draft.get("agents") or []]
    agents: list[dict[str, Any]] = []
    errors: Errors = {}
    remove = None
    for index, agent in enumerate(agents_in):
        earlier = [str(a.get("name")) for a in agents]
        edited, row_errors, removed = _agent_row(index, agent, earlier, f"{key}.agent{index}", slots,
                                                 can_remove=len(agents_in) > 1)
        agents.append(edited)
        errors.update(row_errors)
        if removed:
            remove = index
    errors.update(duplicate_role_errors(agents))
    add = st.button("Add agent", key=f"{key}.add_agent", icon=":material/add:")
    slots["agents"] = st.empty()
    return Team(agents, add=add, remove=remove), errors


def task_section(draft: dict[str, Any], catalog: dict[str, Any], *, key: str,
                 slots: dict[str, Any]) -> tuple[TaskChoice, Errors]:
    """The task (a catalog entry or a custom factory path) and its parameters: the task's own params
    model as fields, or JSON for a custom factory. A newly chosen task starts from its default params."""
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
        params, errors = render_fields(model_forms(info.params_model), params,
                                       key=f"{key}.task.{chosen}", path="task.params", slots=slots)
    else:
        forms = [FieldForm(name="params", kind="json", optional=False,
                           help="Parameters passed to your task factory, as JSON.")]
        values, errors = render_fields(forms, {"params": params}, key=f"{key}.task.custom", path="task",
                                       slots=slots, columns=1)
        params = values["params"]
    slots["task.params"] = st.empty()
    return TaskChoice({**task, "name": chosen or "", "params": params}, info, current), errors


def trainer_section(draft: dict[str, Any], checkpoints: list[CheckpointOption], *, key: str,
                    slots: dict[str, Any]) -> tuple[dict[str, Any], Errors]:
    """The catalog's main trainer settings, the critic settings (IAC/MAAC), the comparator (iterative
    preference trainers), and the rest that the algorithm reads under "Advanced trainer settings"."""
    st.subheader("Trainer")
    before = dict(draft.get("trainer") or {})
    trainer, errors = render_fields(named_forms(TrainerSpec, FORM_MAIN), before, key=f"{key}.trainer",
                                    path="trainer", slots=slots, columns=4)
    trainer, critic_errors = render_actor_critic(trainer, before, key=key, slots=slots)
    errors.update(critic_errors)
    trainer = render_comparator(trainer, before, checkpoints, key=key, slots=slots)
    with st.expander("Advanced trainer settings"):
        rest = [f for f in model_forms(TrainerSpec, exclude=ADVANCED_EXCLUDED) if shown_for(f.name, trainer)]
        trainer, advanced_errors = render_fields(rest, trainer, key=f"{key}.trainer", path="trainer", slots=slots,
                                                 columns=4)
        errors.update(advanced_errors)
    slots["trainer"] = st.empty()
    return trainer, errors


def system_section(draft: dict[str, Any], agents: list[dict[str, Any]], *, key: str,
                   slots: dict[str, Any]) -> tuple[dict[str, Any] | None, Errors]:
    """The optional system of trainers (None: off)."""
    st.subheader("System of trainers")
    return render_system(draft, agents, key=key, slots=slots)


def task_switch_offer(edited: dict[str, Any], task: TaskChoice, *, key: str, where: Any) -> dict[str, Any] | None:
    """After a task change, in the slot ``where`` (under the task): what the previous task left behind
    (roles, lengths) with the new task's defaults; returns the draft with them taken when asked to."""
    if not task.switched:
        return None
    defaults = task_defaults(task.info, task_preset(task.name, context.presets()))
    left = carried_over(edited, defaults)
    if not left:
        return None
    with where.container():
        shown = "; ".join(f"{md_code(path)} {md_text(now)} → {md_text(new)}" for path, now, new in left)
        st.info(f"Kept from the previous task ({md_text(task.previous or 'none')}), with {md_text(task.name)}'s "
                f"default after the arrow: {shown}.", icon=":material/swap_horiz:")
        if st.button(f"Use {task.name}'s defaults (roles, lengths)", key=f"{key}.task_defaults"):
            return with_task_defaults(edited, defaults)
    return None


def merged_errors(errors: Errors, input_errors: Errors) -> Errors:
    """The validation errors with the form's own input errors first at their fields. A repeated role
    name is said beside each one (not once at the top); a blank name by the field's own message."""
    out = dict(errors)
    if any(path.endswith(".name") and path.startswith("agents.") for path in input_errors):
        out = {p: [m for m in ms if not m.startswith("agent names must be unique")] for p, ms in out.items()}
        out = {p: ms for p, ms in out.items() if ms}
    if "name" in input_errors:
        out.pop("name", None)  # the schema's "at least 1 character" says less than the field's message
    for path, messages in input_errors.items():
        out[path] = messages + [m for m in out.get(path, []) if m not in messages]
    return out


def render_editor(draft: dict[str, Any], *, gen: int, catalog: dict[str, Any],
                  checkpoints: list[CheckpointOption] | None = None) -> EditorResult:
    """Draw the whole editor for ``draft``; widget keys include ``gen`` so loading a new draft resets them.
    ``checkpoints`` (of the experiment's earlier runs) are offered as the iterative trainers' comparator."""
    key = f"ed{gen}"
    slots: dict[str, Any] = {}
    top = st.empty()
    about, about_errors = about_section(draft, key=key, slots=slots)
    team, team_errors = team_section(draft, key=key, slots=slots)
    task, task_errors = task_section(draft, catalog, key=key, slots=slots)
    switched = st.empty()  # filled once the whole draft is read: what the previous task left behind
    trainer, trainer_errors = trainer_section(draft, checkpoints or [], key=key, slots=slots)
    hints = st.container()  # filled once the whole draft is read: what the settings will do
    system, system_errors = system_section(draft, team.agents, key=key, slots=slots)

    edited = {**draft, **about, "agents": team.agents, "task": task.task, "trainer": trainer}
    if system is None:
        edited.pop("system", None)
    else:
        edited["system"] = system
    reload = task_switch_offer(edited, task, key=key, where=switched)
    with hints:
        for warning in learning_rate_warnings(edited):
            st.warning(warning, icon=":material/trending_up:")
        for hint in checkpoint_hints(trainer):
            st.caption(hint)
    input_errors = {**about_errors, **team_errors, **task_errors, **trainer_errors, **system_errors}
    config, errors = drafts.validate(edited, task.info, preflight=context.preflight_problems,
                                     task_modules=context.allowed_task_modules())
    errors = merged_errors(errors, input_errors)
    leftovers = place_errors(slots, errors)
    if errors:
        with top.container():
            show_errors([f"{len(errors)} field(s) need attention before this experiment can be saved; "
                         "see the messages next to the fields.", *leftovers])
    return EditorResult(edited, None if input_errors else config, errors, add_agent=team.add,
                        remove_agent=team.remove, reload=reload)
