"""One plain sentence on a team analysis: which agent mattered most, read from the numbers already stored.

An agent's drop is the analysis metric of ``trained`` less that of ``<agent> reset`` (that agent alone
back at its base model), with the standard error ``sqrt(se_trained² + se_reset²)``, as
:mod:`engine.evaluation.team_analysis` defines an agent's contribution. The agent whose reset lowers
the metric most mattered most; a drop under two standard errors is said to be within the noise. The
other agents' resets follow with what each does to the metric (lowers or raises it, by how much). When
no reset lowers it, a reset that raises it by more than two standard errors is named: that agent's
training lowered the metric, which "no agent mattered" alone would hide.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from app.escape import md_code, md_text
from db.evaluation_records import Evaluation

RESET = " reset"


def reset_drops(variants: Sequence[Evaluation], metric: str) -> dict[str, tuple[float, float]]:
    """Per agent with a ``<agent> reset`` row: ``(drop, se)`` of ``metric`` against ``trained`` (empty when
    there is no ``trained`` row with the metric; a drop that is not a number is left out)."""
    by_label = {e.label: e for e in variants if e.label and metric in e.metrics}
    trained = by_label.get("trained")
    if trained is None:
        return {}
    value, se = trained.metrics[metric], trained.standard_errors.get(metric, 0.0)
    drops = {}
    for label, e in by_label.items():
        if label.endswith(RESET):
            drop, drop_se = value - e.metrics[metric], math.sqrt(se ** 2 + e.standard_errors.get(metric, 0.0) ** 2)
            if math.isfinite(drop):
                drops[label.removesuffix(RESET)] = (drop, drop_se)
    return drops


def change(drop: float, se: float) -> str:
    """What a reset does to the metric: ``lowers it by 0.100 ± 0.071`` or ``raises it by …``."""
    return f"{'lowers' if drop >= 0 else 'raises'} it by {abs(drop):.3f} ± {se:.3f}"


def who_mattered(variants: Sequence[Evaluation], metric: str) -> str | None:
    """The sentence (Markdown, stored names as text) for one analysis' variants; None when it has no
    agent reset (a single agent)."""
    drops = reset_drops(variants, metric)
    if not drops:
        return None
    name, (drop, se) = max(drops.items(), key=lambda item: item[1][0])
    if drop <= 0:
        said = (f"No agent mattered: resetting any one of them to its base model does not lower "
                f"{md_code(metric)}")
        worst, (least, least_se) = min(drops.items(), key=lambda item: item[1][0])
        if -least > 2 * least_se:  # beyond the noise: that agent's training lowered the metric
            return said + f"; resetting **{md_text(worst)}** {change(least, least_se)} (its training lowered it)."
        return said + "."
    noise = " (within two standard errors: more items or samples would tell)" if drop < 2 * se else ""
    others = "; ".join(f"{md_text(other)}'s reset {change(d, s)}" for other, (d, s) in drops.items() if other != name)
    return (f"**{md_text(name)}** mattered most: resetting it to its base model lowers {md_code(metric)} by "
            f"{drop:.3f} ± {se:.3f}{noise}" + (f" ({others})." if others else "."))
