"""The run page's System tab: what the run trained with (its job's environment: git commit and dirty
diff, Python and package versions, host, command line) and the resources it used (the last
``resources/...`` sample; the Charts tab draws them over time in its "resources" section), with the
environment as JSON to download."""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from app.components.downloads import offer
from db.records import Run
from db.store import Store

RESOURCES = (("resources/cpu_percent", "CPU", "{:.0f}%", "the job's process tree; 100% = one core"),
             ("resources/rss_mib", "RAM", "{:,.0f} MiB", "resident memory of the job's process tree"),
             ("resources/gpu_util_percent", "GPU utilisation", "{:.0f}%", "the run's GPUs, whole devices"),
             ("resources/gpu_memory_mib", "GPU memory", "{:,.0f} MiB", "held by the job's processes"))


def _latest(store: Store, run_id: int, key: str) -> float | None:
    series = store.series(run_id, key, x="wall_time", max_points=4)  # the last point is always kept
    return series.ys[-1] if series.ys else None


def _resources(store: Store, run: Run) -> None:
    keys = set(store.metric_keys(run.id))
    shown = [(label, fmt, why, _latest(store, run.id, key)) for key, label, fmt, why in RESOURCES if key in keys]
    if not shown:
        st.caption("No resource samples yet: the job records them from its first step on, every "
                   "COOPLAB_RESOURCE_INTERVAL_S seconds (default 15) and when training ends.")
        return
    st.caption("Last sample; the Charts tab draws them over time (section \"resources\").")
    for column, (label, fmt, why, value) in zip(st.columns(len(shown)), shown, strict=True):
        column.metric(label, "-" if value is None else fmt.format(value), help=why)


def _git_line(git: dict[str, Any]) -> str:
    if "commit" not in git:
        return f"git: {git.get('error', 'not recorded')}"
    state = "dirty" if git.get("dirty") else "clean"
    return f"git `{git['commit'][:12]}` on `{git.get('branch', '?')}` ({state})"


def render_run_system(store: Store, run: Run) -> None:
    """The System tab of run ``run``."""
    st.subheader("Resources")
    _resources(store, run)
    st.subheader("Environment")
    env = store.run_environment(run.id)
    if env is None:
        st.caption("Not recorded: the job records it when it starts (runs trained before this was recorded have "
                   "none).")
        return
    git = env.get("git") or {}
    st.markdown(f"{_git_line(git)} · Python {env.get('python', {}).get('version', '?')} · host "
                f"`{env.get('host', '?')}` · device `{env.get('device') or '?'}`")
    packages = env.get("packages") or {}
    if packages:
        st.markdown(" · ".join(f"{name} `{version}`" for name, version in packages.items()))
    if env.get("command"):
        st.code(env["command"], language="bash")
    if git.get("dirty"):
        cut = " (cut: the first {:,} of {:,} characters)".format(len(git.get("diff", "")), git.get("diff_chars", 0)) \
            if git.get("diff_truncated") else ""
        untracked = git.get("untracked_count", 0)
        with st.expander(f"uncommitted changes{cut}" + (f" · {untracked} untracked files" if untracked else "")):
            st.code(git.get("diff") or "(only untracked files)", language="diff")
            if git.get("untracked"):
                st.caption("untracked: " + ", ".join(git["untracked"]))
    offer("environment JSON", lambda: json.dumps(env, indent=2), file_name=f"run{run.id}-environment.json",
          mime="application/json", key=f"dl_env_{run.id}")
