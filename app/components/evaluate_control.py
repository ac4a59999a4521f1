"""The run page's **Evaluate** control: queue an evaluation of the run (at its last or best checkpoint,
or a step) on its workers (:func:`jobs.eval_queue.queue_evaluation`), optionally with test-time
baselines of its base models (only those the run's team and task can play; the form says why the
others are not offered), and the run's evaluation requests with their truthful state (queued,
running, done with the evaluations it stored, failed with its reason), refreshed live; when one ends,
the page reloads so its evaluation appears in the tables.

The table builders are pure functions (tested on their own); :func:`render_evaluate` lays them out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import streamlit as st

from app import commands, context
from app.escape import md_message
from db.eval_request_store import EvalRequestStore
from db.evaluation_records import REQUEST_FINAL, EvalRequest
from db.records import Run
from db.store import Store
from engine.schema.eval_baselines import BASELINES, baseline_title, config_unavailable

MAX_FORM_SAMPLES = 64
STATE_ICONS = {"queued": "⏳ queued", "running": "▶ running", "done": "✔ done", "failed": "✖ failed"}


def checkpoint_choices(steps: Sequence[int], *, keeps_best: bool) -> list[str]:
    """The checkpoints the control offers: ``last``, ``best`` when the run keeps one, then every
    recorded step, newest first."""
    return ["last", *(["best"] if keeps_best else []), *[str(s) for s in sorted(set(steps), reverse=True)]]


def baseline_offer(config: dict[str, Any], catalog: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The test-time baselines the form offers for a run whose stored config is ``config`` (the tasks'
    team sizes from ``catalog``, name to task info), and why each of the others is not offered."""
    sizes = {name: tuple(info.team_sizes) for name, info in catalog.items() if hasattr(info, "team_sizes")}
    unavailable = config_unavailable(config, sizes)
    return [name for name in BASELINES if name not in unavailable], unavailable


def describe_options(options: dict[str, Any]) -> str:
    """A request's options in a few words: ``greedy · 2 items · team analysis · baselines: parallel``."""
    parts = ["greedy" if options.get("greedy") else f"{options.get('samples') or 'default'} sample(s)",
             f"{options.get('items')} items" if options.get("items") else "all items"]
    if options.get("split", "eval") != "eval":
        parts.append(f"{options['split']} split")
    if options.get("team_analysis"):
        parts.append(f"team analysis ({options.get('metric', 'eval/reward_mean')})")
    if options.get("baselines"):
        parts.append(f"baselines: {', '.join(map(str, options['baselines']))}")
    return " · ".join(parts)


def request_rows(requests: Sequence[EvalRequest]) -> list[dict[str, Any]]:
    """One row per evaluation request, as given (newest first)."""
    return [{"request": r.id, "checkpoint": r.checkpoint, "options": describe_options(dict(r.options)),
             "state": STATE_ICONS.get(r.status, r.status), "worker": r.worker or "",
             "evaluations": ", ".join(map(str, r.evaluation_ids)), "reason": r.error or "",
             "queued at": f"{r.created_at:%Y-%m-%d %H:%M:%S}"} for r in requests]


def _queue(run: Run, checkpoint: str, *, samples: int, items: int, greedy: bool, team_analysis: bool,
           baselines: Sequence[str], key: str) -> None:
    from jobs.client import BrokerUnavailable
    from jobs.eval_queue import EvalOptions, EvalRequestError

    options = EvalOptions(samples=None if greedy else samples, items=items or None, greedy=greedy,
                          team_analysis=team_analysis, baselines=tuple(baselines))
    try:
        request = commands.queue_evaluation(run.id, checkpoint=checkpoint, options=options, settings=context.settings())
    except (EvalRequestError, BrokerUnavailable) as exc:
        st.session_state[f"{key}_message"] = ("error", str(exc))
        return
    also = f" with baselines {', '.join(options.baselines)}" if options.baselines else ""
    st.session_state[f"{key}_message"] = ("success", f"Queued evaluation request #{request.id} "
                                                     f"(checkpoint {request.checkpoint}) on {request.queue}{also}",
                                          request.id)


def render_evaluate(store: Store, run: Run, *, keeps_best: bool, key: str) -> None:
    """The Evaluate form and the run's evaluation requests."""
    steps = [c.step for c in store.list_checkpoints(run.id)]
    trainer = dict(run.config.get("trainer") or {})
    with st.form(f"{key}_form", border=True):
        st.markdown("**Evaluate** on the held-out split, on this run's workers")
        c1, c2, c3, c4, c5 = st.columns([2, 2, 2, 1, 2])
        checkpoint = c1.selectbox("checkpoint", checkpoint_choices(steps, keeps_best=keeps_best), key=f"{key}_ckpt",
                                  help="last: the newest checkpoint; best: the one kept by best_checkpoint_metric.")
        default = min(MAX_FORM_SAMPLES, max(1, int(trainer.get("eval_samples_per_item") or 1)))
        samples = c2.number_input("samples per item", 1, MAX_FORM_SAMPLES, default, key=f"{key}_samples",
                                  help="Joint answers per item: pass@k for every k up to it (ignored when greedy).")
        items = c3.number_input("items (0: all)", 0, 100_000, 0, key=f"{key}_items",
                                help="The first N items of the held-out split.")
        greedy = c4.checkbox("greedy", key=f"{key}_greedy", help="Greedy decoding: one answer per item, reproducible.")
        team = c5.checkbox("team analysis", key=f"{key}_team",
                           help="Also each agent reset to its base model: what each agent contributes.")
        offered, unavailable = baseline_offer(dict(run.config), context.task_catalog())
        baselines = st.multiselect(
            "test-time baselines", offered, key=f"{key}_baselines", format_func=baseline_title,
            disabled=not offered, placeholder="none" if offered else "none can be played by this run",
            help="Also the run's base models (untrained) under CoMLRL's test-time protocols, on the same items "
                 "with the same seed, shown beside the team in the held-out table: one agent alone (the task's "
                 "one-agent form), naive concatenation (each agent answers its role alone), a sequential "
                 "pipeline (each agent sees the replies before it) and one round of discussion.")
        if unavailable:
            st.caption(md_message("Not offered for this run: " + "; ".join(
                f"{baseline_title(name)}: {reason}" for name, reason in unavailable.items())))
        submitted = st.form_submit_button("Evaluate", disabled=not steps and not keeps_best)
    if not steps and not keeps_best:
        st.caption("This run has no checkpoints yet; it can be evaluated once it saves one "
                   "(trainer.checkpoint_interval).")
    if submitted:
        _queue(run, checkpoint, samples=int(samples), items=int(items), greedy=greedy, team_analysis=team,
               baselines=baselines, key=key)
    message = st.session_state.get(f"{key}_message")
    if message and len(message) > 2 and _settled(store, run.id, message[2]):
        st.session_state.pop(f"{key}_message")  # "Queued ..." once the request is done or failed: stale
        message = None
    if message:
        (st.error if message[0] == "error" else st.success)(md_message(message[1]))
    _live_requests(store, run.id, key=key)


def _settled(store: Store, run_id: int, request_id: int) -> bool:
    """Whether the run's evaluation request has ended (done or failed): its "Queued" banner is stale."""
    return any(r.id == request_id and r.status in REQUEST_FINAL for r in EvalRequestStore(store).list_for_run(run_id))


def _live_requests(store: Store, run_id: int, *, key: str) -> None:
    """The run's evaluation requests, polled only while one is queued or running (a new request is made
    by a click, which reruns the page; the last one to finish reruns it too)."""
    seen_key = f"{key}_finished"
    pending = any(r.status not in REQUEST_FINAL for r in EvalRequestStore(store).list_for_run(run_id))

    @st.fragment(run_every=context.refresh_every() if pending else None)
    def live() -> None:
        with contextlib.suppress(Exception):  # a busy database: the next refresh settles them
            commands.fail_lost_evaluations(store, settings=context.settings())
        found = EvalRequestStore(store).list_for_run(run_id)
        finished = sorted(r.id for r in found if r.status in REQUEST_FINAL)  # done or failed: redraw the page
        previous = st.session_state.get(seen_key)
        st.session_state[seen_key] = finished
        if previous is not None and finished != previous:
            st.rerun()  # an evaluation was stored: redraw the tables below with it
        if found:
            st.dataframe(request_rows(found), hide_index=True, key=f"{key}_requests")

    live()
