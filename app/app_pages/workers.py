"""Workers: who is connected, what they run, the queues (and the runs studies hold back), the artifact store
they share, and this machine's CPU/RAM/GPU use."""

from __future__ import annotations

import streamlit as st

from app import context
from app.components.held_back import render_held_back
from app.components.store_outage import render_worker_outages
from app.components.stored_files import render_store_line
from app.escape import md_code, md_text
from app.queries import experiment_names, heartbeat_age, run_label
from app.run_files import store_line
from app.sysinfo import gpu_stats, host_stats
from db.store import Store


@st.fragment(run_every=context.refresh_every())
def live_workers(store: Store) -> None:
    """Workers, queues and utilisation, re-read on each refresh."""
    workers = store.list_workers()
    now = store.server_now()  # sightings are stamped with the database server's clock
    if not workers:
        st.info("No worker has connected yet. `cooplab up` starts the dashboard with one CPU worker; "
                "`cooplab worker --device cuda:0` adds a GPU worker (one per GPU; `--device cuda:0,1,2,3` one that "
                "owns four, for fsdp runs of several ranks).")
    else:
        st.dataframe(
            [
                {
                    "worker": w.name,
                    "online": "● online" if w.online else "○ offline",
                    "last heartbeat": heartbeat_age(w.last_seen, now),
                    "clock skew": "?" if w.clock_skew_s is None else f"{w.clock_skew_s:+.1f} s vs database",
                    "devices": ", ".join(w.devices),
                    "queues": ", ".join(w.queues),
                    "current run": f"#{w.current_run_id}" if w.current_run_id else "idle",
                    "host": w.host,
                    "pid": w.pid,
                }
                for w in workers
            ],
            hide_index=True,
        )
        render_worker_outages(store)

    st.subheader("Queues")
    queued = store.list_runs(statuses=["queued"], limit=500)
    if not queued:
        st.caption("No run is waiting.")
    else:
        names = {i: md_text(name) for i, name in experiment_names(store).items()}  # stored names, as text
        by_queue: dict[str, list[str]] = {}
        for run in sorted(queued, key=lambda r: r.id):
            by_queue.setdefault(run.queue, []).append(run_label(run, names))
        for queue, labels in sorted(by_queue.items()):
            serving = [md_code(w.name) for w in workers if w.online and queue in w.queues]
            st.markdown(f"**{md_code(queue)}** · {len(labels)} waiting · served by "
                        f"{', '.join(serving) or 'no online worker'}")
            for position, label in enumerate(labels, start=1):
                st.markdown(f"{position}. {label}")
    render_held_back(store)  # runs a study has not queued yet wait too, out of the queues

    st.subheader("This machine")
    host = host_stats()
    h1, h2 = st.columns(2)
    h1.metric("CPU", f"{host.cpu_percent:.0f}%", help=f"{host.cpu_count} logical cores")
    h2.metric("RAM", f"{host.ram_used_gb:.1f} / {host.ram_total_gb:.1f} GiB", f"{host.ram_percent:.0f}%",
              delta_color="off")
    gpus, reason = gpu_stats()
    if reason:
        st.caption(f"GPU: {md_text(reason)}.")
    for gpu in gpus:
        g1, g2, g3 = st.columns(3)
        g1.metric(f"GPU {gpu.index}", gpu.name)
        g2.metric("utilisation", f"{gpu.util_percent:.0f}%")
        g3.metric("memory", f"{gpu.mem_used_gb:.1f} / {gpu.mem_total_gb:.1f} GiB")


STORE_REFRESH_S = 30.0


def store_refresh() -> float | None:
    """The store's line is asked every 30 s at most (or the live interval when that is longer)."""
    every = context.refresh_every()
    return None if every is None else max(STORE_REFRESH_S, every)


def artifact_store() -> None:
    """Where runs keep their checkpoints, models and logs, as this dashboard reaches it, and its free space."""

    st.subheader("Artifact store")

    @st.fragment(run_every=store_refresh())
    def live_store() -> None:
        render_store_line(store_line(context.settings()))

    live_store()


def workers_page() -> None:
    st.title("Workers")
    live_workers(context.store())
    artifact_store()


workers_page()
