"""The credit-assignment bench's summaries and markdown tables: pure functions of the per-seed results.

A cell holds one task and one arm (an estimator, or a sampling dtype with its correction) over seeds;
each seed's record is what :meth:`bench.training.credit_runs.RunResult.to_json` gives plus
``before`` (the held-out metric of the untrained team). Every figure is the mean over seeds ± the
standard error over seeds (the sample standard deviation over sqrt(n); 0 for one seed); a paired
difference takes each seed's difference to the reference arm (``group``, or float32 sampling) first.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

NOT_APPLICABLE = "n/a (= group with one turn)"
CREDIT_CALLS = "perf/credit_reward_calls"


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error of the mean (sample standard deviation / sqrt(n); 0 for n = 1)."""
    if not values:
        raise ValueError("mean_se: no values")
    mean = statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return mean, se


def summarize_cell(seeds: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean ± s.e. over seeds of the held-out metric before and after, the gain (after - before, per
    seed), the last-fifth training reward and the wall seconds; the extra reward calls and the sampler
    mismatch figures as means over seeds where every seed logged them."""
    out: dict[str, Any] = {"seeds": len(seeds)}
    columns = {"before": [s["before"]["value"] for s in seeds], "after": [s["after"]["value"] for s in seeds],
               "gain": [s["after"]["value"] - s["before"]["value"] for s in seeds],
               "last_fifth": [s["last_fifth"] for s in seeds], "wall_s": [s["wall_s"] for s in seeds]}
    for name, values in columns.items():
        out[name] = mean_se(values)
    if all(CREDIT_CALLS in s["sums"] for s in seeds):
        out["credit_reward_calls"] = statistics.fmean(s["sums"][CREDIT_CALLS] for s in seeds)
    shared = set.intersection(*(set(s["means"]) for s in seeds)) if seeds else set()
    out["means"] = {key: statistics.fmean(s["means"][key] for s in seeds) for key in sorted(shared)}
    return out


def paired_difference(seeds: list[dict[str, Any]], reference: list[dict[str, Any]]) -> tuple[float, float]:
    """Mean ± s.e. over seeds of the held-out metric after training less ``reference``'s, seed by seed
    (the arms of one seed start from the same weights)."""
    after = {s["seed"]: s["after"]["value"] for s in reference}
    missing = [s["seed"] for s in seeds if s["seed"] not in after]
    if missing:
        raise ValueError(f"paired_difference: the reference has no seed {missing}")
    return mean_se([s["after"]["value"] - after[s["seed"]] for s in seeds])


def pm(cell: tuple[float, float] | None, digits: int = 3, *, sign: bool = False) -> str:
    """``mean ± se`` with ``digits`` decimals (a sign with ``sign``); ``-`` for None."""
    if cell is None:
        return "-"
    return f"{cell[0]:{'+' if sign else ''}.{digits}f} ± {cell[1]:.{digits}f}"


def _calls(summary: dict[str, Any]) -> str:
    return f"{summary['credit_reward_calls']:.0f}" if "credit_reward_calls" in summary else "-"


LEARNING_HEADER = ("| task | estimator | held-out before | held-out after | after - group's (paired) | gain "
                   "| last-fifth train reward | wall s / run | reward calls beyond the rollout / run |")


def learning_table(cells: dict[str, dict[str, dict[str, Any] | None]], labels: dict[str, str]) -> str:
    """The learning comparison: one row per task and estimator; ``None`` marks an estimator that does not
    apply to the task (turn_group on one turn)."""
    lines = [LEARNING_HEADER, "|---|---|---|---|---|---|---|---|---|"]
    for task, arms in cells.items():
        for arm, summary in arms.items():
            if summary is None:
                lines.append(f"| {task} | {labels.get(arm, arm)} | | {NOT_APPLICABLE} | | | | | |")
                continue
            lines.append(f"| {task} | {labels.get(arm, arm)} | {pm(summary['before'])} | {pm(summary['after'])} "
                         f"| {pm(summary.get('vs_reference'), sign=True)} | {pm(summary['gain'])} "
                         f"| {pm(summary['last_fifth'])} | {pm(summary['wall_s'], 1)} | {_calls(summary)} |")
    return "\n".join(lines)


TIS_HEADER = ("| task | sampling | correction | held-out after | after - float32's (paired) | gain "
              "| last-fifth train reward | wall s / run | sampler KL | clipped share |")


def _mismatch(summary: dict[str, Any], word: str) -> str:
    found = [v for k, v in summary["means"].items() if word in k and k.startswith("perf/")]
    return f"{found[0]:.2g}" if found else "-"


def tis_table(cells: dict[str, dict[str, dict[str, Any]]], arms: dict[str, tuple[str, str]]) -> str:
    """Sampling dtype and correction: one row per task and arm (``arms[name] = (sampling, correction)``)."""
    lines = [TIS_HEADER, "|---|---|---|---|---|---|---|---|---|---|"]
    for task, by_arm in cells.items():
        for arm, summary in by_arm.items():
            sampling, correction = arms.get(arm, (arm, ""))
            lines.append(f"| {task} | {sampling} | {correction} | {pm(summary['after'])} "
                         f"| {pm(summary.get('vs_reference'), sign=True)} | {pm(summary['gain'])} "
                         f"| {pm(summary['last_fifth'])} | {pm(summary['wall_s'], 1)} "
                         f"| {_mismatch(summary, 'sampler_kl')} | {_mismatch(summary, 'clip')} |")
    return "\n".join(lines)
