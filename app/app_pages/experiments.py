"""Experiments: list, search and tag filter; create, edit, clone, delete; YAML import/export; launch."""

from __future__ import annotations

import streamlit as st

from app import context, control, editor_state
from app import draft as drafts
from app.components.experiment_form import render_editor
from app.queries import experiment_or_none, experiments_table
from db.errors import DuplicateNameError, RunActiveError

store = context.store()
catalog = context.task_catalog()
presets = context.presets()
quickstart = context.preset_config("quickstart")
editor_state.ensure(quickstart)

st.title("Experiments")
if notice := editor_state.pop_notice():
    st.success(notice)

all_experiments = store.list_experiments(limit=1)
if not all_experiments:
    with st.container(border=True):
        st.markdown("### Welcome to CoopLab")
        st.markdown(
            "There are no experiments yet. The **quick start** trains two tiny agents to cooperate "
            "on this machine's CPU in a few minutes. Create it, then press **Launch run**; or build "
            "your own team in the form below."
        )
        if st.button("Create the quick-start experiment", type="primary", key="create_quickstart"):
            created = store.create_experiment(quickstart.get("name", "quickstart"),
                                              description=quickstart.get("description", ""),
                                              tags=quickstart.get("tags", []), config=quickstart)
            editor_state.load(dict(created.config), created.id)
            editor_state.notify(f"Created experiment '{created.name}'. Press Launch run to train it.")
            st.rerun()
else:
    c1, c2 = st.columns([3, 1])
    search = c1.text_input("search", placeholder="name or description", key="exp_search")
    tag = c2.selectbox("tag", [None, *store.experiment_tags()], key="exp_tag",
                       format_func=lambda t: "(any tag)" if t is None else t)
    listed = store.list_experiments(search=search or None, tag=tag)
    if listed:
        st.dataframe(experiments_table(listed), hide_index=True, height=min(300, 38 + 35 * len(listed)))
    else:
        st.info("No experiment matches this search; clear the search or the tag filter.")

    new_entry = 0  # experiment ids start at 1: 0 stands for "a new experiment"
    open_now = editor_state.open_id() or new_entry
    options = [new_entry, *[e.id for e in listed]]
    if open_now not in options:
        options.append(open_now)
    names = {e.id: e.name for e in listed}

    def _open() -> None:
        picked = st.session_state["exp_pick"]
        if picked == new_entry:
            editor_state.load(quickstart, None)
        else:
            editor_state.load(dict(store.get_experiment(picked).config), picked)

    st.selectbox("open experiment", options, index=options.index(open_now), key="exp_pick", on_change=_open,
                 format_func=lambda i: "➕ new experiment" if i == new_entry else f"#{i} {names.get(i, '')}")

# ---- loading a draft: preset or YAML file
with st.expander("Start from a preset or a YAML file"):
    p1, p2 = st.columns(2)
    with p1:
        preset = st.selectbox("preset", list(presets), key="exp_preset",
                              format_func=lambda n: context.preset_title(n))
        st.caption(context.preset_description(preset))
        if st.button("Load preset into the form", key="exp_load_preset"):
            editor_state.load(context.preset_config(preset), editor_state.open_id())
            st.rerun()
    with p2:
        upload = st.file_uploader("import YAML (the `cooplab train` format)", type=["yaml", "yml", "json"],
                                  key="exp_upload")
        if upload is not None and st.button("Import into the form", key="exp_import"):
            try:
                editor_state.load(drafts.from_yaml(upload.getvalue().decode("utf-8")), editor_state.open_id())
            except (drafts.DraftImportError, UnicodeDecodeError) as exc:
                st.error(str(exc))
            else:
                st.rerun()

open_id = editor_state.open_id()
if open_id is not None and experiment_or_none(store, open_id) is None:
    editor_state.load(quickstart, None)  # deleted meanwhile (another tab or user)
    open_id = None
st.header(f"Edit experiment #{open_id}" if open_id is not None else "New experiment")
result = render_editor(editor_state.draft(), gen=editor_state.gen(), catalog=catalog)

if result.add_agent or result.remove_agent is not None:
    agents = list(result.draft["agents"])
    if result.add_agent:
        agents.append(drafts.new_agent(agents))
    else:
        agents.pop(result.remove_agent)
    editor_state.load({**result.draft, "agents": agents}, open_id)
    st.rerun()

# ---- actions
st.divider()
a1, a2, a3, a4 = st.columns(4)
with a1:
    save_label = "Save changes" if open_id is not None else "Create experiment"
    if st.button(save_label, type="primary", disabled=result.config is None, key="exp_save"):
        config = result.config.model_dump(mode="json")
        try:
            if open_id is None:
                saved = store.create_experiment(config["name"], description=config["description"],
                                                tags=config["tags"], config=config)
            else:
                saved = store.update_experiment(open_id, name=config["name"],
                                                description=config["description"], tags=config["tags"],
                                                config=config)
        except DuplicateNameError:
            st.error(f"An experiment named '{config['name']}' already exists; choose another name.")
        else:
            editor_state.load(dict(saved.config), saved.id)
            editor_state.notify(f"Saved experiment '{saved.name}'.")
            st.rerun()
with a2:
    if result.config is not None:
        st.download_button("Export YAML", drafts.to_yaml(result.config), file_name=f"{result.config.name}.yaml",
                           mime="application/x-yaml", key="exp_export")
    else:
        st.button("Export YAML", disabled=True, key="exp_export_off", help="Fix the form first.")
with a3:
    if open_id is not None:
        clone_name = st.text_input("clone as", value=f"{result.draft.get('name', 'experiment')}-copy",
                                   key=f"exp_clone_name_{open_id}")
        if st.button("Clone", key="exp_clone"):
            try:
                clone = store.clone_experiment(open_id, clone_name)
            except DuplicateNameError:
                st.error(f"An experiment named '{clone_name}' already exists; choose another name.")
            else:
                editor_state.load(dict(clone.config), clone.id)
                editor_state.notify(f"Cloned into '{clone.name}'.")
                st.rerun()
with a4:
    if open_id is not None:
        confirm = st.checkbox("yes, delete it with all its runs", key=f"exp_delete_confirm_{open_id}")
        if st.button("Delete experiment", disabled=not confirm, key="exp_delete"):
            try:
                store.delete_experiment(open_id)
            except RunActiveError as exc:
                st.error(f"{exc}. Stop its runs first.")
            else:
                editor_state.load(quickstart, None)
                editor_state.notify(f"Deleted experiment #{open_id}.")
                st.rerun()

if open_id is not None:
    with st.container(border=True):
        st.markdown("**Launch a run** of the saved experiment")
        l1, l2 = st.columns([1, 3])
        device = l1.selectbox("device", context.devices(store), key="exp_device")
        saved_config = dict(store.get_experiment(open_id).config)
        unsaved = result.config is None or result.config != drafts.validate(drafts.normalise(saved_config))[0]
        if unsaved:
            l2.warning("The form has unsaved changes; the run uses the saved config. Save first to use them.")
        if st.button("Launch run", type="primary", key="exp_launch"):
            try:
                run_id = control.launch(saved_config, experiment_id=open_id, device=device)
            except control.ControlError as exc:
                st.error(str(exc))
            else:
                st.session_state["selected_run"] = run_id
                st.success(f"Queued run #{run_id} on {device}.")
                st.page_link("app_pages/run_detail.py", label=f"Watch run #{run_id}",
                             icon=":material/monitoring:", query_params={"run": str(run_id)})
