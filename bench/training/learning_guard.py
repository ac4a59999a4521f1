"""The learning guard's bench: regenerate the recorded numbers, and CoMLRL 1.4.3's gains beside them.

``python -m bench.training.learning_guard`` trains every family (:data:`bench.training.guard_workloads.FAMILIES`)
on the guard seed and prints each gain and fingerprint, and whether they equal the recorded ones;
``--record`` writes them to ``tests/engine/learning_guard.json`` (with the platform). ``--seeds 0 1 2``
also runs other seeds (kept under ``seeds`` with ``--record``: how far the gain moves between seeds,
the margin the guard's floor leaves on another platform), and ``--comlrl`` runs CoMLRL 1.4.3's
trainers on the same workloads and seeds (kept under ``comlrl``). The table gives per family and seed
CoopLab's and CoMLRL's gain. ``--families`` picks some; ``--json`` prints the report as one line.
``--cooplab-variant`` trains CoopLab's side in what-if forms (:data:`bench.training.guard_workloads.VARIANTS`:
``no_clip``, ``plain_text``) to see what a difference from CoMLRL is worth; never with ``--record``.

A change of a recorded number needs a reason in the commit message (docs/benchmarks.md, "The learning guard").
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
from typing import Any

from bench.training import guard_record
from bench.training.guard_workloads import FAMILIES, VARIANTS, Result, run_cooplab
from bench.training.vs_comlrl import ComlrlMissingError


def run(families: list[str], seeds: list[int], *, comlrl: bool, log: Any = None,
        variants: list[str] | None = None) -> dict[str, dict[int, Result]]:
    """``{"cooplab": {family: {seed: Result}}, "comlrl": ...}`` (CoMLRL only with ``comlrl``; CoopLab's side
    in ``variants``, when given)."""
    sides: dict[str, Any] = {"cooplab": functools.partial(run_cooplab, variants=variants) if variants else run_cooplab}
    if comlrl:
        os.environ.setdefault("WANDB_MODE", "disabled")
        from bench.training.guard_comlrl import comlrl_classes, run_comlrl

        comlrl_classes(families[0])  # ComlrlMissingError with the install command before any work
        sides["comlrl"] = run_comlrl
    out: dict[str, Any] = {side: {f: {} for f in families} for side in sides}
    for family in families:
        for seed in seeds:
            for side, fn in sides.items():
                result = fn(family, seed)
                out[side][family][seed] = result
                if log is not None:
                    print(f"{side:7} {family:18} seed {seed}: {result.before.team:.4f} -> {result.after.team:.4f} "
                          f"(gain {result.gain:+.4f}), {result.cpu_s:.1f} CPU s, tokens {result.after.fingerprint[:12]}",
                          file=log, flush=True)
    return out


def gains(results: dict[int, Result]) -> dict[str, float]:
    return {str(seed): r.gain for seed, r in results.items()}


def table(report: dict[str, Any]) -> str:
    """Markdown: per family and seed CoopLab's and CoMLRL's gain, and the seeds' spread against the floor."""
    lines = ["| family | seed | CoopLab gain | CoMLRL gain |", "|---|---|---|---|"]
    comlrl = report.get("comlrl", {})
    for family, per_seed in report["cooplab"].items():
        for seed, gain in per_seed.items():
            theirs = comlrl.get(family, {}).get(seed)
            lines.append(f"| {family} | {seed} | {gain:+.3f} | {'-' if theirs is None else f'{theirs:+.3f}'} |")
        if len(per_seed) > 1:
            ours = list(per_seed.values())
            theirs_all = list(comlrl.get(family, {}).values())
            mean_theirs = f"{statistics.fmean(theirs_all):+.3f}" if theirs_all else "-"
            lines.append(f"| {family} | mean | {statistics.fmean(ours):+.3f} | {mean_theirs} |")
    return "\n".join(lines)


def spread(per_seed: dict[str, float]) -> float | None:
    """The lowest gain over seeds as a fraction of the guard seed's (None without other seeds or a clear
    guard gain): below :data:`guard_record.FLOOR`, another seed would fail the floor."""
    guard = per_seed.get(str(guard_record.GUARD_SEED))
    if guard is None or len(per_seed) < 2 or guard < guard_record.CLEAR_GAIN:
        return None
    return min(per_seed.values()) / guard


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true", help="write the guard seed's numbers to the guard file")
    parser.add_argument("--comlrl", action="store_true", help="also run CoMLRL 1.4.3's trainers on the workloads")
    parser.add_argument("--seeds", nargs="+", type=int, default=[guard_record.GUARD_SEED])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES), metavar="FAMILY")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON line")
    parser.add_argument("--cooplab-variant", nargs="+", default=[], choices=list(VARIANTS), metavar="VARIANT",
                        help="train CoopLab's side in these what-if forms: " +
                             "; ".join(f"{k}: {v}" for k, v in VARIANTS.items()))
    args = parser.parse_args(argv)
    seeds = list(dict.fromkeys([guard_record.GUARD_SEED, *args.seeds]))
    if args.record and args.families != list(FAMILIES):
        parser.error("--record writes every family; leave --families out")
    if args.record and args.cooplab_variant:
        parser.error("--record writes the defaults' numbers; leave --cooplab-variant out")
    try:
        results = run(args.families, seeds, comlrl=args.comlrl, log=None if args.json else sys.stdout,
                      variants=args.cooplab_variant)
    except ComlrlMissingError as exc:
        print(f"learning_guard: {exc}", file=sys.stderr)
        return 2
    report: dict[str, Any] = {side: {f: gains(per_seed) for f, per_seed in by_family.items()}
                              for side, by_family in results.items()}
    guard_results = {f: per_seed[guard_record.GUARD_SEED] for f, per_seed in results["cooplab"].items()}
    try:
        recorded = guard_record.load()
    except ValueError:
        recorded = None
    same = recorded is not None and not guard_record.platform_mismatch_of(recorded)
    report["equals_record"] = {f: recorded is not None and same and all(
        r.record()[k] == recorded.get("families", {}).get(f, {}).get(k) for k in guard_record.EXACT_FIELDS)
        for f, r in guard_results.items()}
    report["spread"] = {f: spread(g) for f, g in report["cooplab"].items()}
    if args.cooplab_variant:
        report["cooplab_variants"] = args.cooplab_variant
    if args.record:
        record = guard_record.build_record(guard_results, previous=recorded)
        if len(seeds) > 1:
            record["seeds"] = report["cooplab"]
        if args.comlrl:
            record["comlrl"] = {"version": comlrl_version(), "gains": report["comlrl"]}
        guard_record.save(record)
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        if args.cooplab_variant:
            print(f"CoopLab's side trained in the variant(s) {', '.join(args.cooplab_variant)}")
        print(table(report))
        print("equal to the file's numbers before this run (same platform):",
              ", ".join(f"{f} {'yes' if ok else 'no'}" for f, ok in report["equals_record"].items()))
        if len(seeds) > 1:
            print("lowest gain over seeds / guard seed's (the floor is "
                  f"{guard_record.FLOOR}):", ", ".join(f"{f} {'-' if s is None else f'{s:.2f}'}"
                                                      for f, s in report["spread"].items()))
        if args.record:
            print(f"recorded: {guard_record.GUARD_FILE}")
    return 0


def comlrl_version() -> str:
    from importlib.metadata import version

    return version("comlrl")


if __name__ == "__main__":
    raise SystemExit(main())
