"""Studies: define one (a base experiment, fields and values from the run-config schema, grid or
random, seeds per point, a concurrency cap, early stopping), watch its children, and read its results
as distributions over seeds: a sortable table, curves of the top points with bands, setting → result
scatter, CSV, and promote the best point to a new experiment. The page is drawn again whenever a child
or the study changes state (``app.study_watch``), so the results follow the children live."""

from __future__ import annotations

import streamlit as st

from app import context
from app.components.study_results import render_results
from app.escape import md_code, md_message, md_text
from app.queries import study_experiment_ids
from app.study_form import searchable_paths, space_from_rows
from app.study_watch import can_resume, can_stop, watch_state
from db.study_records import ACTIVE
from db.study_store import StudyStore
from jobs.study_space import StudySpaceError
from jobs.study_spec import StudySpec, parse_study_spec, study_trials


def _many(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


store = context.store()
studies = StudyStore(store)
st.title("Studies")

define_tab, watch_tab = st.tabs(["Define", "Watch and results"])

with define_tab:
    of_studies = study_experiment_ids(store)  # a study starts from a real experiment, not another study's
    experiments = [e for e in store.list_experiments(limit=500) if e.id not in of_studies]
    if not experiments:
        st.info("A study starts from an experiment's config. Create an experiment first on the Experiments page.")
    else:
        by_id = {e.id: e for e in experiments}
        c1, c2 = st.columns(2)
        base_id = c1.selectbox("base experiment", list(by_id), format_func=lambda i: by_id[i].name, key="st_base")
        name = c2.text_input("study name", value=f"{by_id[base_id].name} sweep", key="st_name")
        base = dict(by_id[base_id].config)
        paths = searchable_paths(base)
        st.caption("Fields to search (from the run-config schema) and their values, comma-separated.")
        lr = float((base.get("trainer") or {}).get("agent_learning_rate") or 1e-5)
        rows = st.data_editor(  # starts with the learning rate around the base's own
            [{"path": "trainer.agent_learning_rate", "values": f"{lr / 3:.2g}, {lr:g}, {lr * 3:.2g}"}],
            num_rows="dynamic", key="st_space",
            column_config={"path": st.column_config.SelectboxColumn("field", options=paths, required=True),
                           "values": st.column_config.TextColumn("values", help="e.g. 0.0001, 0.001")})
        m1, m2, m3, m4, m5 = st.columns(5)
        method = m1.radio("search", ["grid", "random"], horizontal=True, key="st_method")
        samples = m2.number_input("random points", 1, 1000, 8, key="st_samples", disabled=method != "random")
        seeds = m3.number_input("seeds per point", 1, 100, 2, key="st_seeds")
        study_seed = m4.number_input("study seed", 0, 2**31 - 1, 0, key="st_seed")
        cap = m5.number_input("at most at once", 1, 64, 2, key="st_cap")
        d1, d2 = st.columns([1, 3])
        device = d1.text_input("device", "cpu", key="st_device", help="The queue its runs go to: cpu or cuda:N.")
        early = d2.toggle("stop clearly worse runs early (median rule on train/reward_mean)", key="st_early")
        spec: StudySpec | None = None
        count = 0
        try:
            space = space_from_rows(rows, paths)
            spec = parse_study_spec({
                "name": name, "base": base, "space": space, "method": method, "samples": int(samples),
                "seeds": int(seeds), "seed": int(study_seed), "max_concurrent": int(cap), "device": device.strip(),
                "early_stopping": {} if early else None})
            count = len(study_trials(spec))  # every generated config through the one schema
        except StudySpaceError as exc:
            spec = None
            st.error(md_message(exc))
        if spec is not None:
            points = count // int(seeds)
            st.success(f"{_many(points, 'point')} × {_many(int(seeds), 'seed')} = {_many(count, 'run')}, "
                       "every config valid.")
        if st.button("Queue the study", type="primary", disabled=spec is None, key="st_queue"):
            from jobs.studies import create_study

            try:
                created = create_study(spec, settings=context.settings())
            except Exception as exc:  # noqa: BLE001 - pre-flight problems, a taken name, the broker down
                st.error(md_message(exc))
            else:
                st.session_state["st_open"] = created.id
                st.session_state["st_pick"] = created.id  # the Watch tab follows the study just queued
                if "study" in st.query_params:
                    st.query_params["study"] = str(created.id)
                st.success(f"Study {md_text(repr(created.name))} queued: {count} runs, at most {created.max_concurrent} at once. "
                           "Open “Watch and results”.")

with watch_tab:
    all_studies = studies.list_studies()
    if not all_studies:
        st.info("No study yet: define one in the Define tab, or run `cooplab study STUDY.yaml`.")
        st.stop()
    by_study = {s.id: s for s in all_studies}
    linked = st.query_params.get("study")
    opened = int(linked) if linked and linked.isdigit() and int(linked) in by_study else st.session_state.get("st_open")
    ids = list(by_study)
    if linked and opened in ids and st.session_state.get("st_linked") != opened:
        st.session_state["st_linked"] = opened
        st.session_state["st_pick"] = opened  # a link (?study=N) opens its study once
    if st.session_state.get("st_pick") not in ids:
        st.session_state["st_pick"] = opened if opened in ids else ids[0]
    # named without its state: a browser keeps a picker's labels while its value stays, so a state in
    # them went stale ("(active)" after the study finished); the live line below says the state
    study_id = st.selectbox("study", ids, key="st_pick", format_func=lambda i: f"#{i} {by_study[i].name}")
    drawn = watch_state(by_study[study_id], studies.trials(study_id))  # what the page below shows

    @st.fragment(run_every=context.refresh_every())
    def live_children() -> None:
        from jobs.studies import schedule_study

        if by_study[study_id].status == ACTIVE:
            schedule_study(study_id, settings=context.settings(), store=store)  # watching also drives it
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
    study_now, trials_now = studies.get_study(study_id), studies.trials(study_id)
    b1, b2, _ = st.columns([1, 1, 4])
    if b1.button("Stop all", key="st_stop", disabled=not can_stop(study_now, trials_now),
                 help="Cancel the waiting children and stop the running ones (each keeps a checkpoint)."):
        from jobs.studies import stop_study

        st.toast(f"{stop_study(study_id, settings=context.settings())} runs asked to stop")
    if b2.button("Resume all", key="st_resume", disabled=not can_resume(study_now, trials_now),
                 help="Run again the children that ended stopped, cancelled or lost, each from its checkpoint."):
        from jobs.studies import resume_study

        st.toast(f"{resume_study(study_id, settings=context.settings())} children queued again")
    render_results(store, studies, studies.get_study(study_id))
