"""Experiments: list, search and tag filter; create, edit, clone, delete; YAML import/export; launch.

The open experiment lives in the URL (``?experiment=N``, ``?experiment=new``), so a refresh, Back or a
shared link reopens it. Save, Launch and Clone sit in an action bar at the top of the experiment
that stays in view while the form scrolls; "unsaved changes" is a real diff of the form against the
saved config (defaults filled in on both sides), listing what changed. Every change to an experiment
goes through :mod:`app.commands`.
"""

from __future__ import annotations

import streamlit as st

from app import commands, context, editor_state
from app import draft as drafts
from app.components.comparator_choice import experiment_checkpoints
from app.components.experiment_form import EditorResult, name_problem, render_editor
from app.components.launch import LaunchChoice, launch_options, launch_runs, launched_message
from app.configdiff import changed_fields
from app.control import ControlError
from app.escape import md_code, md_message, md_text
from app.queries import experiment_or_none, experiments_table, study_experiment_ids
from db.errors import DuplicateNameError, RunActiveError, StaleEditError
from db.records import Experiment
from db.store import Store
from engine.schema.run_config import RunConfig

NEW = "new"
STALE = "exp_stale_refused"
FORM_CSS = """<style>
/* the action bar stays at the top of the window while the form scrolls (its wrapper is what sticks) */
[data-testid="stLayoutWrapper"]:has(> .st-key-exp_action_bar), .st-key-exp_action_bar {
  position: sticky; top: 3.75rem; z-index: 99; background-color: rgb(255 255 255);}
.st-key-exp_action_bar {padding: 0.4rem 0 0.2rem 0; border-bottom: 1px solid rgba(49, 51, 63, 0.15);}
/* its "Unsaved changes" note takes one line, cut with an ellipsis (hovering it shows it whole): the bar
   stays about 100 px high however many fields changed; errors keep every line */
.st-key-exp_action_bar [data-testid="stAlertContainer"]:has([data-testid="stAlertContentWarning"]) {
  padding: 0.3rem 0.75rem;}
.st-key-exp_action_bar [data-testid="stAlertContentWarning"] p {overflow: hidden; text-overflow: ellipsis; margin: 0;}
.st-key-exp_action_bar [data-testid="stAlertContentWarning"] p,
.st-key-exp_action_bar [data-testid="stAlertContentWarning"] p * {white-space: nowrap;}
.st-key-exp_action_bar [data-testid="stAlertContentWarning"]:hover p,
.st-key-exp_action_bar [data-testid="stAlertContentWarning"]:hover p * {white-space: normal;}
/* a field the browser scrolls to (Tab, Shift-Tab, focus) lands below the bar, never under it */
html, [data-testid="stAppViewContainer"], [data-testid="stMain"] {scroll-padding-top: 12rem;}
/* a small window stacks the bar's buttons: the bar then scrolls with the form instead of covering it */
@media (max-width: 640px), (max-height: 560px) {
  [data-testid="stLayoutWrapper"]:has(> .st-key-exp_action_bar), .st-key-exp_action_bar {position: static;}
}
/* learning rates: no +/- steppers (a step of 0.01 means nothing at 1e-3), so the box shows the whole number */
[class*="learning_rate"] [data-testid="stNumberInputStepUp"],
[class*="learning_rate"] [data-testid="stNumberInputStepDown"] {display: none;}
</style>"""


def blank_experiment(store: Store) -> dict:
    """What "new experiment" opens: the quick start's team and settings under a fresh name, without the
    quick start's description and tags."""
    taken = {e.name for e in store.list_experiments(limit=10_000)}
    index = 1
    while f"experiment-{index}" in taken:
        index += 1
    return {**context.preset_config("quickstart"), "name": f"experiment-{index}", "description": "", "tags": []}


def open_experiment(store: Store, experiment_id: int | None) -> None:
    """Load an experiment (None: a new one) into the form and name it in the URL."""
    if experiment_id is None:
        editor_state.load(blank_experiment(store), None)
    else:
        stored = store.get_experiment(experiment_id)
        editor_state.load(dict(stored.config), experiment_id, saved_at=stored.updated_at)
    show_in_url(experiment_id)


def show_in_url(experiment_id: int | None) -> None:
    wanted = NEW if experiment_id is None else str(experiment_id)
    if st.query_params.get("experiment") != wanted:
        st.query_params["experiment"] = wanted


def show_stored(experiment: Experiment, notice: str) -> None:
    """Open an experiment just written to the store (created, saved or cloned) and say so."""
    editor_state.load(dict(experiment.config), experiment.id, saved_at=experiment.updated_at)
    show_in_url(experiment.id)
    editor_state.notify(notice)
    st.rerun()


def name_taken(name: str) -> None:
    st.error(f"An experiment named '{md_text(name)}' already exists; choose another name.")


def follow_url(store: Store) -> None:
    """The experiment named in the URL (refresh, Back, a shared link) wins over the session's."""
    raw = st.query_params.get("experiment")
    if raw is not None and raw != NEW:
        wanted = int(raw) if raw.strip().isdigit() else None
        if wanted is not None and wanted == editor_state.open_id() and experiment_or_none(store, wanted) is None:
            st.warning(f"Experiment #{wanted} was deleted (in another tab or by another user); "
                       "the form now holds a new experiment.")
            open_experiment(store, None)  # the one this session had open is gone: start a new draft
        elif wanted is None or experiment_or_none(store, wanted) is None:
            st.error(f"experiment {md_text(raw)} not found", icon=":material/search_off:")  # the URL's text, as text
            st.caption("It may have been deleted, or the link has a typo.")
            st.page_link("app_pages/experiments.py", label="Go to the experiments list", icon=":material/list:",
                         query_params={"experiment": NEW})
            st.stop()
        elif editor_state.open_id() != wanted:
            stored = store.get_experiment(wanted)
            editor_state.load(dict(stored.config), wanted, saved_at=stored.updated_at)
    elif raw == NEW and editor_state.open_id() is not None:
        editor_state.load(blank_experiment(store), None)


def welcome(store: Store) -> None:
    """No experiment yet: the quick start, one click away."""
    quickstart = context.preset_config("quickstart")
    with st.container(border=True):
        st.markdown("### Welcome to CoopLab")
        st.markdown(
            "There are no experiments yet. The **quick start** trains two tiny agents to cooperate "
            "on this machine's CPU in a few minutes. Create it, then press **Launch run**; or build "
            "your own team in the form below."
        )
        if st.button("Create the quick-start experiment", type="primary", key="create_quickstart"):
            created = commands.create_experiment(store, quickstart)
            show_stored(created, f"Created experiment '{md_text(created.name)}'. Press Launch run to train it.")


def experiment_list(store: Store) -> list[Experiment]:
    """The list with search and tag filter (a study's own experiments only when asked for); returns
    the experiments listed."""
    with st.expander("All experiments", expanded=editor_state.open_id() is None):
        c1, c2 = st.columns([3, 1])
        search = c1.text_input("search", placeholder="name or description", key="exp_search")
        tag = c2.selectbox("tag", [None, *store.experiment_tags()], key="exp_tag",
                           format_func=lambda t: "(any tag)" if t is None else t)
        listed = store.list_experiments(search=search or None, tag=tag)
        of_studies = study_experiment_ids(store)
        hidden = [e for e in listed if e.id in of_studies]
        if hidden:  # a study's own experiment holds its runs: listed only when asked for
            h1, h2 = st.columns([3, 1])
            if not h2.toggle("show study experiments", key="exp_show_studies",
                             help="Each study keeps its runs in an experiment of its own, named 'study: …'."):
                listed = [e for e in listed if e.id not in of_studies]
                h1.caption(f"{len(hidden)} study experiment{'' if len(hidden) == 1 else 's'} hidden "
                           "(the Studies page shows their runs).")
        if listed:
            st.dataframe(experiments_table(listed), hide_index=True, height=min(300, 38 + 35 * len(listed)))
        else:
            st.info("No experiment matches this search; clear the search or the tag filter.")
    return listed


def experiment_picker(store: Store, listed: list[Experiment]) -> None:
    """Open one of the listed experiments, or a new one."""
    new_entry = 0  # experiment ids start at 1: 0 stands for "a new experiment"
    open_now = editor_state.open_id() or new_entry
    options = [new_entry, *[e.id for e in listed]]
    if open_now not in options:
        options.append(open_now)
    names = {e.id: e.name for e in listed}
    if open_now not in names and open_now != new_entry:
        names[open_now] = store.get_experiment(open_now).name
    if st.session_state.get("exp_pick") != open_now:
        st.session_state["exp_pick"] = open_now  # follow the URL and the actions below

    def _open() -> None:
        picked = st.session_state["exp_pick"]
        open_experiment(store, None if picked == new_entry else picked)

    st.selectbox("open experiment", options, key="exp_pick", on_change=_open,
                 format_func=lambda i: "+ new experiment" if i == new_entry else f"#{i} {names.get(i, '')}")


def draft_loaders() -> None:
    """Load a preset or a YAML file into the form (the open experiment stays the one saved to)."""
    with st.expander("Start from a preset or a YAML file"):
        p1, p2 = st.columns(2)
        with p1:
            preset = st.selectbox("preset", list(context.presets()), key="exp_preset",
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
                    st.error(md_message(exc))
                else:
                    st.rerun()


def apply_form_requests(result: EditorResult, open_id: int | None) -> None:
    """An agent added or removed, or the new task's defaults taken: the form reloads with them."""
    if result.add_agent or result.remove_agent is not None:
        agents = list(result.draft["agents"])
        if result.add_agent:
            agents.append(drafts.new_agent(agents))
        else:
            agents.pop(result.remove_agent)
        editor_state.load({**result.draft, "agents": agents}, open_id)
        st.rerun()
    if result.reload is not None:  # the new task's defaults taken
        editor_state.load(result.reload, open_id)
        st.rerun()


def save(store: Store, result: EditorResult, open_id: int | None, *, overwrite: bool = False) -> None:
    """Save the form; refused when the experiment was saved elsewhere since the form loaded it (unless
    ``overwrite``: the user chose to replace that version)."""
    config = result.config.model_dump(mode="json")
    try:
        saved = commands.save_experiment(store, open_id, config,
                                         if_saved_at=None if overwrite else editor_state.base_saved_at())
    except DuplicateNameError:
        name_taken(config["name"])
    except StaleEditError:
        st.session_state[STALE] = True
        st.rerun()
    else:
        show_stored(saved, f"Saved experiment '{md_text(saved.name)}'.")


def stale_edit(store: Store, result: EditorResult, open_id: int, stored: Experiment) -> bool:
    """When the experiment was saved elsewhere (another tab, another user) after this form loaded it:
    say so, and offer to reload that version or to overwrite it with the form. True while it is so."""
    base = editor_state.base_saved_at()
    if base is None or stored.updated_at == base:
        st.session_state.pop(STALE, None)
        return False
    when = stored.updated_at.strftime("%H:%M:%S UTC")
    refused = " Save was refused:" if st.session_state.get(STALE) else ""
    with st.container(border=True, key="exp_stale"):
        st.error(f"Experiment #{open_id} was saved elsewhere (another tab or user) at {when}, after this form "
                 f"loaded it.{refused} saving this form would undo that save. Reload the saved version (your "
                 "unsaved changes here are dropped), or overwrite it with this form.", icon=":material/sync_problem:")
        r1, r2 = st.columns(2)
        if r1.button("Reload the saved version", key="exp_stale_reload", icon=":material/refresh:"):
            st.session_state.pop(STALE, None)
            show_stored(stored, f"Reloaded experiment '{md_text(stored.name)}' as saved at {when}.")
        if r2.button("Overwrite with this form", key="exp_stale_overwrite", disabled=result.config is None,
                     icon=":material/save_as:"):
            st.session_state.pop(STALE, None)
            save(store, result, open_id, overwrite=True)
    return True


def clone_popover(store: Store, result: EditorResult, open_id: int) -> None:
    clone_name = st.text_input("clone as", value=f"{result.draft.get('name', 'experiment')}-copy",
                               key=f"exp_clone_name_{open_id}").strip()
    if clone_problem := name_problem(clone_name):
        st.error(md_message(clone_problem))
    if st.button("Clone", key="exp_clone", type="primary", disabled=clone_problem is not None):
        try:
            clone = commands.clone_experiment(store, open_id, clone_name)
        except DuplicateNameError:
            name_taken(clone_name)
        else:
            show_stored(clone, f"Cloned into '{md_text(clone.name)}'.")


def export_button(result: EditorResult) -> None:
    if result.config is not None:
        st.download_button("Export YAML", drafts.to_yaml(result.config), file_name=f"{result.config.name}.yaml",
                           mime="application/x-yaml", key="exp_export", on_click="ignore",
                           icon=":material/download:")
    else:
        st.button("Export YAML", disabled=True, key="exp_export_off", help="Fix the form first.")


def delete_popover(store: Store, open_id: int) -> None:
    confirm = st.checkbox("yes, delete it with all its runs", key=f"exp_delete_confirm_{open_id}")
    if st.button("Delete experiment", disabled=not confirm, key="exp_delete"):
        try:
            commands.delete_experiment(store, open_id)
        except RunActiveError as exc:
            st.error(md_message(f"{exc}. Stop its runs first."))
        else:
            editor_state.load(blank_experiment(store), None)
            show_in_url(None)
            editor_state.notify(f"Deleted experiment #{open_id}.")
            st.rerun()


def holds_saved(result: EditorResult, saved_config: dict | None, catalog: dict) -> bool:
    """Whether the form holds the saved config, unchanged and valid (the saved one with the schema's and
    the task's defaults filled in, as the form fills them): then the form's validated config, parsed
    once on this rerun, is the one a launch queues, and the saved dict is not parsed again."""
    if result.config is None or saved_config is None:
        return False
    return result.config.model_dump(mode="json") == {"system": None,
                                                     **editor_state.filled_config(saved_config, catalog)}


def unsaved_warning(saved_config: dict | None, result: EditorResult, catalog: dict) -> None:
    """What the form changed against the saved config (defaults filled in on both sides)."""
    if saved_config is None or holds_saved(result, saved_config, catalog):
        return
    changes = changed_fields(editor_state.effective_config(saved_config, catalog),
                             editor_state.effective_config(result.draft, catalog))
    if changes:
        shown = "; ".join(f"{md_code(field)} {md_text(old)} → {md_text(new)}" for field, old, new in changes[:4])
        more = f" and {len(changes) - 4} more" if len(changes) > 4 else ""
        st.warning(f"Unsaved changes: {shown}{more}. A run uses the saved config: save first to use them.",
                   icon=":material/edit_note:")


def launch(saved_config: RunConfig | dict, open_id: int, choice: LaunchChoice) -> None:
    """Queue the runs of the saved config (validated already, or a stored dict) and link the last one."""
    try:
        run_ids = launch_runs(saved_config, open_id, choice)
    except ControlError as exc:
        st.error(md_message(exc))
    else:
        st.session_state["selected_run"] = run_ids[-1]  # the run pages open it next
        st.success(launched_message(run_ids, choice.device))
        links = st.columns(min(len(run_ids), 5)) if len(run_ids) > 1 else [st.container()]
        for index, run_id in enumerate(run_ids):  # every run launched, not only the last one
            links[index % len(links)].page_link("app_pages/run_detail.py", label=f"Watch run #{run_id}",
                                                icon=":material/monitoring:", query_params={"run": str(run_id)})
        if len(run_ids) > 1:
            st.page_link("app_pages/compare.py", label="Compare these runs (mean and band over seeds)",
                         icon=":material/stacked_line_chart:",
                         query_params={"runs": ",".join(str(i) for i in run_ids[:8]), "by": "seed"})


def action_bar(store: Store, result: EditorResult, open_id: int | None, catalog: dict) -> None:
    """Save, Launch, Clone, Export, Delete, and what is unsaved."""
    stored = store.get_experiment(open_id) if open_id is not None else None
    saved_config = dict(stored.config) if stored is not None else None
    stale = stored is not None and open_id is not None and stale_edit(store, result, open_id, stored)
    a1, a2, a3, a4, a5, a6 = st.columns([1.3, 1.1, 0.9, 1, 1, 1.1], vertical_alignment="center")
    save_label = "Save changes" if open_id is not None else "Create experiment"
    # primary only when there is something to save (a form that holds the saved config has nothing)
    changed = open_id is None or not holds_saved(result, saved_config, catalog)
    if a1.button(save_label, type="primary" if changed else "secondary", disabled=result.config is None or stale,
                 key="exp_save",
                 icon=":material/save:", help="Saved elsewhere since this form loaded it: reload or overwrite above."
                 if stale else None):
        save(store, result, open_id)
    launch_clicked = False
    if open_id is not None:
        launch_clicked = a2.button("Launch run", type="primary", key="exp_launch", icon=":material/play_arrow:",
                                   help="Queue a run of the saved config (options: device, seed, runs).")
        with a3.popover("Options", icon=":material/tune:"):
            choice = launch_options(store, open_id, saved_config, key="exp_launch_opts")
        with a4.popover("Clone", icon=":material/content_copy:"):
            clone_popover(store, result, open_id)
    else:
        a2.caption("Create the experiment to launch it.")
    with a5:
        export_button(result)
    if open_id is not None:
        with a6.popover("Delete", icon=":material/delete:"):
            delete_popover(store, open_id)
    if not stale:  # a stale form's diff would show the other save as the user's own change
        unsaved_warning(saved_config, result, catalog)
    if launch_clicked:
        launch(result.config if holds_saved(result, saved_config, catalog) else saved_config, open_id, choice)


def experiments_page() -> None:
    store = context.store()
    catalog = context.task_catalog()
    if editor_state.DRAFT not in st.session_state:  # first visit of this session: a new experiment
        editor_state.ensure(blank_experiment(store))
    st.title("Experiments")
    st.html(FORM_CSS)
    if notice := editor_state.pop_notice():
        st.success(notice)
    follow_url(store)
    if not store.list_experiments(limit=1):
        welcome(store)
    else:
        experiment_picker(store, experiment_list(store))
    open_id = editor_state.open_id()
    if open_id is not None and experiment_or_none(store, open_id) is None:
        editor_state.load(blank_experiment(store), None)  # deleted meanwhile (another tab or user)
        open_id = None
    show_in_url(open_id)
    draft_loaders()
    st.header(f"Edit experiment #{open_id}" if open_id is not None else "New experiment")
    bar = st.container(key="exp_action_bar")  # filled once the form below has been read
    result = render_editor(editor_state.draft(), gen=editor_state.gen(), catalog=catalog,
                           checkpoints=experiment_checkpoints(store, open_id))
    apply_form_requests(result, open_id)
    with bar:
        action_bar(store, result, open_id, catalog)


experiments_page()
