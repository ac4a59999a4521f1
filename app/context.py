"""Shared handles for every page: the settings, the store (one per database URL) and the task catalog.

The store is a ``st.cache_resource`` singleton per URL (thread-safe: each call takes its own
connection), created with ``migrate=True`` so a fresh data directory works on first visit.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from app.db_outage import gate
from db.store import Store
from jobs.data_permissions import private_folders
from jobs.settings import Settings, get_settings


@st.cache_resource(show_spinner=False)
def _store_for(url: str) -> Store:
    return Store(url, migrate=True)


def settings() -> Settings:
    """The current settings (read from ``COOPLAB_*`` environment variables)."""
    return get_settings()


def store() -> Store:
    """The store of the configured database, schema brought up to date on first use. Reading runs
    through it also settles runs whose job is gone (``jobs.liveness.look_now``, at most every 2 s), so
    a dead worker's run shows ``lost`` even when no worker is left to notice. While the database is
    unreachable it stops the page (or the refreshing region) with one line saying so (``app/db_outage.py``)."""
    from jobs.liveness import look_now

    current = get_settings()
    if current.database_url is None:
        private_folders([current.data_dir])  # owner-only, like every process that creates it
    gate(current.resolved_database_url, retry=False)  # unreachable: one line, never a traceback
    found = _store_for(current.resolved_database_url)
    look_now(found, current)
    return found


@st.cache_resource(show_spinner=False)
def _catalog() -> dict[str, Any]:
    from engine.schema.task_registry import task_catalog as catalog

    entries = catalog()
    if isinstance(entries, dict):
        return dict(entries)
    return {info.name: info for info in entries}


def task_catalog() -> dict[str, Any]:
    """The tasks a config may name by name: built-ins and installed ``cooplab.tasks`` entry points
    (``engine.schema.task_registry.task_catalog()``, torch-free). The form validates a config under
    :func:`allowed_task_modules`."""
    return _catalog()


def allowed_task_modules() -> tuple[str, ...]:
    """Modules whose ``package.module:factory`` tasks configs may name (``COOPLAB_TASK_MODULES``): the
    allowlist every run config the dashboard parses is validated under."""
    return get_settings().task_module_list


def preflight_problems(config: Any) -> list[Any]:
    """The pre-flight problems of a valid run config (``jobs.preflight``: model sources, context
    lengths, task parameters), each with its dotted ``field`` and ``message``."""
    from jobs.preflight import run_config_problems

    return run_config_problems(config, settings=get_settings())


@st.cache_resource(show_spinner=False)
def presets() -> dict[str, dict[str, Any]]:
    """Ready-made run configs by name (``engine.schema.presets.PRESETS``)."""
    from engine.schema.presets import PRESETS

    return dict(PRESETS)


def _preset_entry(name: str) -> dict[str, Any]:
    entry = presets().get(name)
    if entry is None:
        known = ", ".join(presets()) or "none"
        raise KeyError(f"no preset named {name!r}; known presets: {known}")
    return entry


def preset_config(name: str) -> dict[str, Any]:
    """The run-config dict of a preset (entries may wrap it as ``{"title", "description", "config"}``)."""
    from engine.schema.run_config import RunConfig

    entry = _preset_entry(name)
    if isinstance(entry.get("config"), dict):
        return dict(entry["config"])
    return {k: v for k, v in entry.items() if k in RunConfig.model_fields}


def preset_title(name: str) -> str:
    """A preset's display title (its name when it has none)."""
    entry = _preset_entry(name)
    return str(entry.get("title") or name)


def preset_description(name: str) -> str:
    """A preset's one-paragraph description."""
    entry = _preset_entry(name)
    config = entry.get("config") if isinstance(entry.get("config"), dict) else entry
    return str(entry.get("description") or config.get("description") or "")


def devices(current: Store) -> list[str]:
    """Devices a run can be queued on: ``cpu`` plus every device a known worker serves."""
    found = {"cpu"}
    for worker in current.list_workers():
        found.update(worker.devices)
        found.update(worker.queues)
    return ["cpu", *sorted(found - {"cpu"})]


RUN_PAGES = ("runs", "run_detail", "transcripts", "compare")
NAV_RUN = "_nav_run"  # the run the sidebar's links were drawn with in this script run


def _page_name(page: Any) -> str:
    """``runs``, ``run_detail``, ...; the default page (Experiments) has an empty URL path."""
    return str(getattr(page, "url_path", "") or "experiments")


def sidebar_navigation(sections: dict[str, list[Any]]) -> None:
    """The sidebar's page links, carrying what the session has open: the selected run to the run
    pages (``?run=N``) and the open experiment to the Experiments page, so a page switch lands on the
    same run in ONE history entry (Back returns to where the user was, a refresh keeps it)."""
    run_id = selected_run()  # the URL's run first (a refresh is a new session), else the session's
    raw_experiment = st.query_params.get("experiment")
    experiment_id = raw_experiment if raw_experiment is not None else st.session_state.get("exp_open_id")
    st.session_state[NAV_RUN] = run_id
    with st.sidebar:
        for section, pages in sections.items():
            st.caption(section)
            for page in pages:
                name = _page_name(page)
                params: dict[str, str] = {}
                if name in RUN_PAGES and run_id is not None:
                    params["run"] = str(run_id)
                elif name == "experiments" and experiment_id is not None:
                    params["experiment"] = str(experiment_id)
                st.page_link(page, query_params=params or None, width="stretch")


REFRESH_CHOICES = (1.0, 2.0, 5.0, 10.0)


def refresh_every() -> float | None:
    """Seconds between live refreshes of the auto-updating regions, None when live refresh is off."""
    if not st.session_state.get("live_refresh", True):
        return None
    return float(st.session_state.get("refresh_s", 2.0))


def live_controls() -> None:
    """Sidebar switch and interval for live refresh (shared by every page)."""
    st.sidebar.toggle("Live refresh", value=True, key="live_refresh",
                      help="Re-read runs, charts and logs from the database every few seconds.")
    st.sidebar.select_slider("every (s)", REFRESH_CHOICES, value=2.0, key="refresh_s",
                             disabled=not st.session_state.get("live_refresh", True))


def _parse_id(raw: str | None) -> int | None:
    """A positive integer id from URL text, or None."""
    if raw is None:
        return None
    text = str(raw).strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def selected_run() -> int | None:
    """The run the user is looking at: ``?run=N`` in the URL, else the last one picked on any page.

    An id in the URL that is not a number is not replaced by another run: :func:`page_run` reports it.
    """
    raw = st.query_params.get("run")
    if raw is not None:
        return _parse_id(raw)
    return st.session_state.get("selected_run")


def select_run(run_id: int | None) -> None:
    """Remember the run across pages and in the URL (so the link can be shared, refreshed and
    reached with Back)."""
    st.session_state["selected_run"] = run_id
    if run_id is None:
        st.query_params.pop("run", None)
    elif st.query_params.get("run") != str(run_id):
        st.query_params["run"] = str(run_id)


def run_not_found(raw: str) -> None:
    """Say that the run named in the URL does not exist, with a way back to the runs list; stop the page."""
    from app.escape import md_text

    st.error(f"run {md_text(raw)} not found", icon=":material/search_off:")  # the URL's text, as text
    st.caption("It may have been deleted, or the link has a typo. Pick a run from the list instead.")
    st.page_link("app_pages/runs.py", label="Go to the runs list", icon=":material/list:")
    st.stop()


def page_run(store: Any, newest: int | None) -> int | None:
    """The run a run page shows, written into the URL so refresh, Back and shared links keep it.

    ``?run=N`` wins when that run exists; an unknown or malformed id shows "run N not found" with a
    link to the runs list and stops the page (it never silently shows another run). Without one,
    the run last picked in this session, else ``newest``.
    """
    from db.errors import NotFoundError

    raw = st.query_params.get("run")
    if raw is not None:
        run_id = _parse_id(raw)
        if run_id is None:
            run_not_found(raw)
        try:
            store.get_run(run_id)
        except NotFoundError:
            run_not_found(raw)
        st.session_state["selected_run"] = run_id
        return run_id
    remembered = st.session_state.get("selected_run")
    if remembered is not None:
        try:
            store.get_run(remembered)
        except NotFoundError:
            remembered = None
    run_id = remembered if remembered is not None else newest
    if run_id is not None:
        select_run(run_id)
        if NAV_RUN in st.session_state and st.session_state[NAV_RUN] != run_id:
            st.rerun()  # once: the sidebar's links were drawn before the run was known
    return run_id


def run_picker(labels: dict[int, str], key: str, label: str = "run", current: int | None = None) -> int:
    """A run selectbox that follows the selected run (URL or another page) and updates it when the
    user picks another. ``labels`` maps the run ids offered, in order, to their labels; ``current``
    (default: :func:`selected_run`) is added to them when missing."""
    ids = list(labels)
    current = selected_run() if current is None else current
    wanted = current if current in labels else ids[0]
    if st.session_state.get(key) != wanted:
        st.session_state[key] = wanted  # set before the widget exists: allowed, and wins over stale state

    def _picked() -> None:
        select_run(st.session_state[key])

    picked = st.selectbox(label, ids, key=key, on_change=_picked, format_func=lambda i: labels[i])
    if picked != current:
        select_run(picked)
    return picked
