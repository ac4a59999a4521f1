"""Studies: define one (a base experiment, fields and values from the run-config schema, grid or
random, seeds per point, a concurrency cap, early stopping), watch its children, and read its results
as distributions over seeds: a sortable table, curves of the top points with bands, setting → result
scatter, CSV, and promote the best point to a new experiment. The page is drawn again whenever a child
or the study changes state (``app.study_watch``), so the results follow the children live.

Each field searched has one text box of comma-separated values, checked at that box (each value
against the schema with the base's other settings) before the whole study is."""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from app import commands, context
from app.components.study_results import render_results
from app.escape import md_code, md_message, md_text
from app.queries import study_experiment_ids
from app.study_form import (
    base_value,
    default_values,
    searchable_paths,
    space_from_fields,
    study_preview,
    value_hint,
    value_text,
)
from app.study_watch import can_resume, can_stop, watch_state
from db.records import Experiment
from db.store import Store
from db.study_records import ACTIVE
from db.study_store import StudyStore
from jobs.study_limits import StudyLimits, study_limits
from jobs.study_spec import StudySpec, parse_study_spec

FIRST_FIELD = "trainer.agent_learning_rate"  # what a new study searches until told otherwise
PER_ROW = 2  # value fields side by side


def _many(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@st.cache_data(max_entries=16, show_spinner=False)
def _checked_fields(base_json: str, texts_json: str, max_values: int) -> tuple[dict[str, list[Any]], dict[str, str]]:
    """:func:`space_from_fields`, kept for the same base, texts and limit: a rerun checks nothing again."""
    return space_from_fields(json.loads(base_json), json.loads(texts_json), max_values=max_values,
                             task_modules=context.allowed_task_modules())


@st.cache_data(max_entries=16, show_spinner="Checking every config of the study…")
def _preview(spec_json: str, max_points: int, max_seeds: int, max_runs: int, max_expand_s: float,
             ) -> tuple[int, str | None]:
    """:func:`study_preview`, kept per study and limits: a rerun of the page does not expand it again."""
    return study_preview(json.loads(spec_json), StudyLimits(max_points, max_seeds, max_runs, max_expand_s),
                         context.allowed_task_modules())


def _key(data: Any) -> str:
    return json.dumps(data, sort_keys=True, default=str)


def search_space(base: dict[str, Any], limits: StudyLimits) -> dict[str, list[Any]] | None:
    """The fields to search and one values box per field, each problem said under its box; the space
    when every box reads, else None. A box holds at most as many values as a study may have points."""
    paths = searchable_paths(base)
    fields = st.multiselect("fields to search", paths, default=[p for p in (FIRST_FIELD,) if p in paths],
                            key="st_fields", help="From the run-config schema: the trainer's settings and each "
                                                  "agent's (agents.<i>.<field>). The first one varies slowest.")
    if not fields:
        st.error("Pick at least one field to search, then type its values.")
        return None
    st.caption("Values of each field, comma-separated (numbers, true/false, null or text); each one is checked "
               "against the schema here, with the base experiment's other settings.")
    texts: dict[str, str] = {}
    boxes: dict[str, Any] = {}
    for start in range(0, len(fields), PER_ROW):
        for column, path in zip(st.columns(PER_ROW), fields[start:start + PER_ROW], strict=False):
            with column:
                texts[path] = st.text_input(path, value=default_values(base, path), key=f"st_values.{path}",
                                            placeholder=value_hint(path), help=f"{value_hint(path)}. The base "
                                            f"experiment's value: {md_code(value_text(base_value(base, path)))}.")
                boxes[path] = st.empty()
    space, problems = _checked_fields(_key(base), _key(texts), limits.max_points)
    for path, problem in problems.items():
        with boxes[path].container():
            st.error(md_message(problem), icon=":material/error:")
    return None if problems else space


def study_options() -> dict[str, Any]:
    """Search method, points, seeds, study seed, concurrency cap, device and early stopping."""
    m1, m2, m3, m4, m5 = st.columns(5)
    method = m1.radio("search", ["grid", "random"], horizontal=True, key="st_method")
    samples = m2.number_input("random points", 1, 1000, 8, key="st_samples", disabled=method != "random")
    seeds = m3.number_input("seeds per point", 1, 100, 2, key="st_seeds")
    study_seed = m4.number_input("study seed", 0, 2**31 - 1, 0, key="st_seed")
    cap = m5.number_input("at most at once", 1, 64, 2, key="st_cap")
    d1, d2 = st.columns([1, 3])
    device = d1.text_input("device", "cpu", key="st_device", help="The queue its runs go to: cpu or cuda:N.")
    served = context.devices(context.store())
    if device.strip() and device.strip() not in served:
        d1.warning(f"No worker serves {md_code(device.strip())} now (workers serve {', '.join(served)}): its runs "
                   f"would wait in the queue until `cooplab worker --device {md_text(device.strip())}` starts on a "
                   "machine with that GPU.", icon=":material/warning:")
    early = d2.toggle("stop clearly worse runs early (median rule on train/reward_mean)", key="st_early")
    return {"method": method, "samples": int(samples), "seeds": int(seeds), "seed": int(study_seed),
            "max_concurrent": int(cap), "device": device.strip(), "early_stopping": {} if early else None}


def checked_spec(name: str, base: dict[str, Any], space: dict[str, list[Any]] | None,
                 options: dict[str, Any], limits: StudyLimits) -> tuple[StudySpec | None, int]:
    """The study and how many runs it makes, every generated config validated through the one schema;
    (None, 0) with the problem shown when it cannot be queued. Its size is counted within the
    operator's ``limits`` first, and the expansion is kept per study, so a rerun does not repeat it."""
    if space is None:
        return None, 0
    data = {"name": name, "base": base, "space": space, **options}
    count, problem = _preview(_key(data), limits.max_points, limits.max_seeds, limits.max_runs,
                              limits.max_expand_s)
    if problem is not None:
        st.error(md_message(problem))
        return None, 0
    spec = parse_study_spec(data)
    st.success(f"{_many(count // options['seeds'], 'point')} × {_many(options['seeds'], 'seed')} = "
               f"{_many(count, 'run')}, every config valid.")
    return spec, count


def queue_button(spec: StudySpec | None, count: int) -> None:
    """Queue the study; the Watch tab then follows it."""
    if not st.button("Queue the study", type="primary", disabled=spec is None, key="st_queue"):
        return
    try:
        created = commands.queue_study(spec, settings=context.settings())
    except Exception as exc:  # noqa: BLE001 - pre-flight problems, a taken name, the broker down
        st.error(md_message(exc))
        return
    st.session_state["st_open"] = created.id
    st.session_state["st_pick"] = created.id  # the Watch tab follows the study just queued
    if "study" in st.query_params:
        st.query_params["study"] = str(created.id)
    st.success(f"Study {md_text(repr(created.name))} queued: {count} runs, at most {created.max_concurrent} at once. "
               "Open “Watch and results”.")


def follow_base(base_id: int, names: dict[int, str]) -> None:
    """Another base experiment picked: the values boxes start again from the new base's values (three
    learning rates around its own), and the study name follows it unless the user typed one of their own."""
    shown = st.session_state.get("st_base_shown")
    st.session_state["st_base_shown"] = base_id
    if shown is None or shown == base_id:
        return
    for key in [k for k in st.session_state if str(k).startswith("st_values.")]:
        del st.session_state[key]
    if st.session_state.get("st_name") in (None, f"{names.get(shown, '')} sweep"):
        st.session_state.pop("st_name", None)


def define_tab(experiments: list[Experiment]) -> None:
    """A study starts from a real experiment (not another study's own)."""
    if not experiments:
        st.info("A study starts from an experiment's config. Create an experiment first on the Experiments page.")
        return
    by_id = {e.id: e for e in experiments}
    c1, c2 = st.columns(2)
    base_id = c1.selectbox("base experiment", list(by_id), format_func=lambda i: by_id[i].name, key="st_base")
    follow_base(base_id, {i: e.name for i, e in by_id.items()})
    name = c2.text_input("study name", value=f"{by_id[base_id].name} sweep", key="st_name")
    base = dict(by_id[base_id].config)
    limits = study_limits(context.settings())  # COOPLAB_MAX_STUDY_*
    space = search_space(base, limits)
    spec, count = checked_spec(name, base, space, study_options(), limits)
    queue_button(spec, count)


def opened_study(ids: list[int]) -> int | None:
    """The study to show first: a link's (``?study=N``, once), else the one just queued."""
    linked = st.query_params.get("study")
    opened = int(linked) if linked and linked.isdigit() and int(linked) in ids else st.session_state.get("st_open")
    if linked and opened in ids and st.session_state.get("st_linked") != opened:
        st.session_state["st_linked"] = opened
        st.session_state["st_pick"] = opened  # a link (?study=N) opens its study once
    return opened


def children_section(store: Store, studies: StudyStore, study_id: int, drawn: Any, active: bool) -> None:
    """The study's line and its children, re-read on every refresh; watching an active study drives it."""

    @st.fragment(run_every=context.refresh_every())
    def live_children() -> None:
        if active:
            commands.drive_study(study_id, settings=context.settings(), store=store)
        study = studies.get_study(study_id)
        trials = studies.trials(study_id)
        if watch_state(study, trials) != drawn:
            st.rerun()  # a child or the study changed state: results, picker and buttons follow
        counts: dict[str, int] = {}
        for t in trials:
            counts[t.status] = counts.get(t.status, 0) + 1
        st.markdown(f"**{md_text(study.name)}** · {study.status} · "
                    + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
                    + f" · at most {study.max_concurrent} at once on {md_code(study.queue)}")
        st.dataframe([{"point": t.point, **t.params, "seed": t.seed, "run": t.run_id, "status": t.status,
                       "step": t.step, "note": t.stop_reason or (t.error or "").split("\n")[0]} for t in trials],
                     hide_index=True, key="st_children")

    live_children()


def study_buttons(studies: StudyStore, study_id: int) -> None:
    """Stop all and Resume all, each enabled when the study's children allow it."""
    study, trials = studies.get_study(study_id), studies.trials(study_id)
    b1, b2, _ = st.columns([1, 1, 4])
    if b1.button("Stop all", key="st_stop", disabled=not can_stop(study, trials),
                 help="Cancel the waiting children and stop the running ones (each keeps a checkpoint)."):
        st.toast(f"{commands.stop_study(study_id, settings=context.settings())} runs asked to stop")
    if b2.button("Resume all", key="st_resume", disabled=not can_resume(study, trials),
                 help="Run again the children that ended stopped, cancelled or lost, each from its checkpoint."):
        st.toast(f"{commands.resume_study(study_id, settings=context.settings())} children queued again")


def watch_tab(store: Store, studies: StudyStore) -> None:
    """Pick a study; its children (live), Stop/Resume all, and its results."""
    by_study = {s.id: s for s in studies.list_studies()}
    if not by_study:
        st.info("No study yet: define one in the Define tab, or run `cooplab study STUDY.yaml`.")
        st.stop()
    ids = list(by_study)
    opened = opened_study(ids)
    if st.session_state.get("st_pick") not in ids:
        st.session_state["st_pick"] = opened if opened in ids else ids[0]
    # named without its state: a browser keeps a picker's labels while its value stays, so a state in
    # them went stale ("(active)" after the study finished); the live line below says the state
    study_id = st.selectbox("study", ids, key="st_pick", format_func=lambda i: f"#{i} {by_study[i].name}")
    drawn = watch_state(by_study[study_id], studies.trials(study_id))  # what the page below shows
    children_section(store, studies, study_id, drawn, active=by_study[study_id].status == ACTIVE)
    study_buttons(studies, study_id)
    render_results(store, studies, studies.get_study(study_id))


def studies_page() -> None:
    store = context.store()
    studies = StudyStore(store)
    st.title("Studies")
    define, watch = st.tabs(["Define", "Watch and results"])
    with define:
        of_studies = study_experiment_ids(store)
        define_tab([e for e in store.list_experiments(limit=500) if e.id not in of_studies])
    with watch:
        watch_tab(store, studies)


studies_page()
