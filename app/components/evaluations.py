"""A run's evaluations of record (``cooplab eval``, :mod:`db.evaluation_store`): one table row per
evaluation with every metric as ``mean ± s.e.`` and the best checkpoint marked, the test-time
baselines of the run's base models (one agent alone, naive concatenation, sequential pipeline, one
round of discussion) as rows beside the team's, the same table as a CSV download, team analyses as a
table of variants, and the per-item outcomes of one evaluation whose rows open the evaluated episode.

The table builders are pure functions (tested on their own); :func:`render_evaluations` lays them out.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import streamlit as st

from app import commands
from app.components.downloads import offer
from app.components.transcript_view import render_episode
from app.escape import md_code
from app.held_out import metric_order
from app.who_mattered import who_mattered
from db.csv_cells import spreadsheet_cell
from db.evaluation_records import Evaluation
from db.ops_transcripts import episode_totals
from db.records import EpisodeView
from engine.schema.eval_baselines import BASELINES, baseline_title
from engine.schema.run_config import agents_from_folders
from engine.transcripts import TurnRecord

BEST_MARK = "★ best"
TEAM = "team"
BASE_MODELS = "base models"
"""A baseline's checkpoint cell: it plays the run's models as they were before training."""


def promoted_config(config: dict[str, Any], folders: Sequence[str]) -> dict[str, Any]:
    """``config`` with agent i's model read from ``folders[i]`` (a run's ``model_best/agent_<i>``): each
    folder is a whole model, so the agents keep their names and settings but no weight sharing or
    LoRA adapter (the export holds the merged weights)."""
    agents = config.get("agents") or []
    if len(folders) != len(agents):
        raise ValueError(f"{len(folders)} exported model folder(s) for {len(agents)} agents; promote needs one each")
    return agents_from_folders(config, list(folders))


def best_step(output_dir: str | None) -> int | None:
    """The step of the run's best checkpoint (``checkpoints/best.json``), None when it kept none."""
    if not output_dir:
        return None
    path = Path(output_dir) / "checkpoints" / "best.json"
    try:
        return int(json.loads(path.read_text(encoding="utf-8"))["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _mean_se(evaluation: Evaluation, key: str) -> str:
    se = evaluation.standard_errors.get(key)
    value = evaluation.metrics[key]
    return f"{value:.4f}" if se is None else f"{value:.4f} ± {se:.4f}"


def held_out_records(evaluations: Sequence[Evaluation]) -> list[Evaluation]:
    """The held-out table's evaluations: the team's (newest checkpoint last), then the test-time
    baselines in protocol order (single, parallel, pipeline, discussion), each oldest first."""
    team = sorted((e for e in evaluations if e.kind == "eval"), key=lambda e: (e.checkpoint_step or 0, e.id))
    rank = {name: i for i, name in enumerate(BASELINES)}
    baselines = sorted((e for e in evaluations if e.kind == "baseline"),
                       key=lambda e: (rank.get(e.label, len(rank)), e.label, e.id))
    return [*team, *baselines]


def evaluated_as(evaluation: Evaluation) -> str:
    """What an evaluation measured: ``team`` or ``baseline: pipeline (sequential pipeline)``."""
    return f"baseline: {baseline_title(evaluation.label)}" if evaluation.kind == "baseline" else TEAM


def evaluation_rows(evaluations: Sequence[Evaluation], best: int | None, *, tests: bool = True) -> list[dict[str, Any]]:
    """One row per evaluation of the team and per test-time baseline, side by side (team analyses are
    shown apart; see :func:`held_out_records` for the order); the metrics in
    :func:`app.held_out.metric_order` (team reward first; pass@k only for a task with tests)."""
    rows = []
    shown = held_out_records(evaluations)
    keys = metric_order((k for e in shown for k in e.metrics), tests=tests)
    for e in shown:
        settings = e.settings
        step = BASE_MODELS if e.kind == "baseline" else "" if e.checkpoint_step is None else str(e.checkpoint_step)
        row = {"evaluation": e.id, "evaluated": evaluated_as(e), "checkpoint": f"{step} {BEST_MARK}"
               if best is not None and e.kind == "eval" and e.checkpoint_step == best else step, "split": e.split,
               "items × samples": f"{settings.get('items', '?')} × {settings.get('samples', '?')}",
               "greedy": bool(settings.get("greedy")), "seed": settings.get("seed")}
        row.update({key: _mean_se(e, key) if key in e.metrics else "" for key in keys})
        rows.append(row)
    return rows


def evaluations_csv(evaluations: Sequence[Evaluation], *, tests: bool = True) -> str:
    """The held-out table as CSV (the team's evaluations and the baselines, :func:`held_out_records`):
    per metric its mean and its standard error (``<metric> s.e.``) as numbers, cells made safe for a
    spreadsheet (:func:`db.csv_cells.spreadsheet_cell`)."""
    shown = held_out_records(evaluations)
    keys = metric_order((k for e in shown for k in e.metrics), tests=tests)
    columns = ["evaluation", "run", "evaluated", "baseline", "checkpoint_step", "split", "seed", "greedy", "samples",
               "items", *[c for key in keys for c in (key, f"{key} s.e.")]]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([spreadsheet_cell(c) for c in columns])
    for e in shown:
        settings = e.settings
        row = [e.id, e.run_id, TEAM if e.kind == "eval" else "baseline", e.label if e.kind == "baseline" else "",
               e.checkpoint_step, e.split, settings.get("seed"), settings.get("greedy"), settings.get("samples"),
               settings.get("items")]
        for key in keys:
            row += [e.metrics.get(key), e.standard_errors.get(key)]
        writer.writerow([spreadsheet_cell(v) for v in row])
    return out.getvalue()


def analysis_tables(evaluations: Sequence[Evaluation]) -> dict[str, list[dict[str, Any]]]:
    """Team analyses by their id: per variant its metric (the one the analysis was run for) ± s.e."""
    tables: dict[str, list[dict[str, Any]]] = {}
    for e in evaluations:
        if e.kind != "team_analysis" or e.analysis is None:
            continue
        metric = e.settings.get("metric", "eval/reward_mean")
        tables.setdefault(e.analysis, []).append({
            "configuration": e.label, "checkpoint": e.checkpoint_step, metric: _mean_se(e, metric)
            if metric in e.metrics else "", "weights": ", ".join(e.settings.get("weights", []))})
    return tables


def item_rows(evaluation: Evaluation) -> list[dict[str, Any]]:
    """The per-item outcomes of one evaluation."""
    rows = []
    for item in evaluation.per_item:
        correct = item.get("correct")
        row = {"item": item.get("index"), "return": item.get("return"),
               "turn rewards": ", ".join(f"{r:.3f}" for r in item.get("turn_rewards", [])),
               "correct": "" if correct is None else f"{correct} / {item.get('samples')}"}
        row.update({k.removeprefix("eval/"): v for k, v in (item.get("task_metrics") or {}).items()})
        rows.append(row)
    return rows


def episode_view(evaluation: Evaluation, index: int) -> EpisodeView | None:
    """The evaluated episode of item ``index`` as a stored-episode view (None when it was not kept)."""
    if index >= len(evaluation.episodes):
        return None
    data = evaluation.episodes[index]
    fields = set(TurnRecord.__dataclass_fields__)
    turns = tuple(TurnRecord(**{k: (float("nan") if v is None and k in ("reward", "ret", "advantage") else v)
                                for k, v in turn.items() if k in fields}) for turn in data.get("turns", []))
    # a stored evaluation episode holds its turns only: its team reward and return come from them, as for
    # a training episode (reading a missing total as 0 showed "team reward 0.000" beside turns of 1.000)
    reward, ret = episode_totals(turns)
    if data.get("reward") is not None:
        reward = float(data["reward"])
    if data.get("ret") is not None:
        ret = float(data["ret"])
    return EpisodeView(id=evaluation.id * 100_000 + index, run_id=evaluation.run_id, step=int(data.get("step", 0)),
                       split=str(data.get("split", evaluation.split)), sample_index=int(data.get("sample_index", 0)),
                       item_index=data.get("item_index"), reward=reward, ret=ret, turns=turns)


def render_best_models(store: Any, *, experiment_id: int, output_dir: str | None, key: str) -> None:
    """The best checkpoint's exported models (``model_best/``), and promoting them to the experiment's
    model sources (the experiment's config then names these folders; runs already made are unchanged)."""
    from app.components.downloads import exported_models

    folders = exported_models(output_dir, "model_best")
    if not folders:
        return
    step = best_step(output_dir)
    st.markdown(f"**Best models** (checkpoint step {step}): " + ", ".join(md_code(f) for f in folders))
    if st.button("Use the best models as this experiment's model sources", key=f"{key}.promote",
                 help="The experiment's agents then load these folders; its other settings stay as they are."):
        experiment = store.get_experiment(experiment_id)
        try:
            config = promoted_config(dict(experiment.config), folders)
        except ValueError as exc:
            st.error(str(exc))
            return
        commands.set_experiment_config(store, experiment_id, config)
        st.success(f"The experiment's agents now start from the best models of step {step}.")


def task_has_tests(config: Mapping[str, Any], catalog: Mapping[str, Any]) -> bool:
    """Whether a run's task checks answers with tests (a coding task), so pass@k means what it says; a
    task the catalog does not know is given the benefit of the doubt."""
    info = catalog.get(str((config.get("task") or {}).get("name") or ""))
    return info is None or "code" in (getattr(info, "tags", ()) or ())


def render_evaluations(evaluations: Sequence[Evaluation], *, run_id: int, output_dir: str | None,
                       tests: bool | None = None) -> None:
    """The Evaluations tab of a run (``tests``: its task checks answers with tests, so pass@k means
    something; None: from the run's task)."""
    if tests is None and evaluations:
        from app import context

        tests = task_has_tests(context.store().get_run(run_id).config, context.task_catalog())
    command = f"cooplab eval {run_id} --checkpoint best" if best_step(output_dir) is not None else \
        f"cooplab eval {run_id} --checkpoint last"
    if not evaluations:
        st.caption(f"No evaluations yet. **Evaluate** above queues one on the run's workers; {md_code(command)} "
                   "evaluates a checkpoint here and now. Either evaluates on the task's held-out split and stores "
                   "it here; add `--team-analysis` for each agent's contribution.")
        return
    rows = evaluation_rows(evaluations, best_step(output_dir), tests=tests is not False)
    if rows:
        st.markdown("**Held-out evaluations** (mean ± standard error over items)")
        st.dataframe(rows, hide_index=True, key=f"evals_{run_id}")
        if any(e.kind == "baseline" for e in evaluations):
            st.caption("A baseline row is the run's base models (untrained) under a test-time protocol, on the "
                       "same held-out items with the same seed as the team's evaluation queued with it.")
        offer("held-out evaluations CSV", lambda: evaluations_csv(evaluations, tests=tests is not False),
              file_name=f"run{run_id}-evaluations.csv", mime="text/csv", key=f"dl_evals_{run_id}",
              help="The table above: per metric its mean and standard error as numbers, one row per evaluation.")
    for analysis, table in analysis_tables(evaluations).items():
        st.markdown(f"**Team analysis** {md_code(analysis[:8])}: each agent reset to its base model")
        variants = [e for e in evaluations if e.kind == "team_analysis" and e.analysis == analysis]
        if sentence := who_mattered(variants, variants[0].settings.get("metric", "eval/reward_mean")):
            st.markdown(sentence)
        st.dataframe(table, hide_index=True, key=f"analysis_{run_id}_{analysis}")
    st.caption(f"More: {md_code(command)} (`--team-analysis`, `--samples K`, `--split train`); test-time "
               "baselines: the form's *test-time baselines*.")
    plain = [e for e in evaluations if e.kind == "eval"]
    if not plain:
        return
    chosen = st.selectbox("per-item outcomes of evaluation", [e.id for e in plain], index=len(plain) - 1,
                          key=f"eval_pick_{run_id}")
    evaluation = next(e for e in plain if e.id == chosen)
    items = item_rows(evaluation)
    st.dataframe(items, hide_index=True, key=f"eval_items_{run_id}_{chosen}")
    if items:
        item = st.selectbox("open the evaluated episode of item", [r["item"] for r in items],
                            key=f"eval_item_{run_id}_{chosen}")
        episode = episode_view(evaluation, [r["item"] for r in items].index(item))
        if episode is None:
            st.caption("This evaluation kept no episode for that item.")
        else:
            render_episode(episode, key=f"eval_episode_{chosen}_{item}")
