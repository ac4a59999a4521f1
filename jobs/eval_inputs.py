"""What an evaluation stores: :func:`report_inputs` and :func:`analysis_inputs` turn the engine's
:class:`~engine.evaluation.evaluate.EvalReport` and :class:`~engine.evaluation.team_analysis.TeamAnalysis` into the
:class:`db.evaluation_records.EvaluationInput` records of a run (a team analysis: one per variant,
sharing one analysis id; a test-time baseline: :func:`baseline_inputs`). ``cooplab eval`` of a database
run and the evaluation job both store these.

Nothing here imports torch: the reports are read by their attributes.
"""

from __future__ import annotations

import uuid
from typing import Any

from db.evaluation_records import EvaluationInput


def episode_dicts(episodes: list[Any], step: int | None) -> list[dict[str, Any]]:
    """The evaluated episodes as JSON episode dicts (the transcripts' format), at ``step``."""
    from engine.sinks.jsonl import episode_to_dict

    return [episode_to_dict(step or 0, episode) for episode in episodes]


def report_inputs(run_id: int, report: Any) -> list[EvaluationInput]:
    """One evaluation (``engine.evaluation.evaluate.evaluate_run``'s report) as the record to store for ``run_id``."""
    settings = {"seed": report.seed, "greedy": report.greedy, "samples": report.samples, "items": report.items}
    return [EvaluationInput(
        run_id=run_id, split=report.split, settings=settings, metrics=report.metrics,
        standard_errors=report.standard_errors, per_item=report.per_item,
        episodes=episode_dicts(report.episodes, report.checkpoint_step), checkpoint_step=report.checkpoint_step,
        checkpoint_path=report.checkpoint)]


def baseline_inputs(run_id: int, report: Any) -> list[EvaluationInput]:
    """A test-time baseline (``evaluate_run(..., baseline=name)``'s report) as the record to store for
    ``run_id``: ``kind`` baseline, ``label`` the protocol; the run's base models, so no checkpoint."""
    settings = {"seed": report.seed, "greedy": report.greedy, "samples": report.samples, "items": report.items,
                "baseline": report.baseline}
    return [EvaluationInput(
        run_id=run_id, split=report.split, settings=settings, metrics=report.metrics,
        standard_errors=report.standard_errors, per_item=report.per_item, kind="baseline", label=report.baseline)]


def analysis_inputs(run_id: int, analysis: Any, *, checkpoint_path: str | None = None) -> list[EvaluationInput]:
    """A team analysis (``engine.evaluation.team_analysis.analyze_team``) as one record per variant of ``run_id``
    (``kind`` team_analysis, ``label`` the variant), all sharing a new analysis id."""
    group = uuid.uuid4().hex
    inputs = []
    for (variant, metrics, ses), outcome in zip(analysis.rows, analysis.outcomes, strict=True):
        settings = {"samples": analysis.samples, "items": analysis.items, "metric": analysis.metric,
                    "weights": [f"{kind}:{analysis.names[j]}" for kind, j in variant.weights]}
        inputs.append(EvaluationInput(
            run_id=run_id, split=analysis.split, settings=settings, metrics=metrics, standard_errors=ses,
            per_item=[o.to_json() for o in outcome.items],
            episodes=episode_dicts(outcome.episodes, analysis.checkpoint_step),
            checkpoint_step=analysis.checkpoint_step, checkpoint_path=checkpoint_path, kind="team_analysis",
            label=variant.label, analysis=group))
    return inputs
