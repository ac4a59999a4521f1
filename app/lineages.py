"""Attempts of one run's history among a list of runs (pure functions).

Resume makes a new run row (``resumed_from`` the old one) with the same config and seed: for pickers
and seed groups it is the same run, not another seed. A history is named by its first attempt (its
root); the newest attempt stands for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def root_of(run_id: int, parents: Mapping[int, int | None]) -> int:
    """The first attempt of ``run_id``'s history, following ``resumed_from`` (``parents``) as far as
    the runs known go."""
    seen = {run_id}
    while (parent := parents.get(run_id)) is not None and parent in parents and parent not in seen:
        seen.add(parent)
        run_id = parent
    return run_id


def resumed(parents: Mapping[int, int | None]) -> set[int]:
    """The runs some later attempt resumes (superseded in a picker by that attempt)."""
    return {parent for parent in parents.values() if parent is not None}


def one_per_history(run_ids: Iterable[int], parents: Mapping[int, int | None], *, wanted: int,
                    first: int | None = None) -> list[int]:
    """Up to ``wanted`` runs of distinct histories, ``first`` (when given) first, then in the order
    given, skipping attempts that a later attempt resumed: a default pick for comparing runs."""
    chosen: list[int] = []
    roots: set[int] = set()
    superseded = resumed(parents)
    ordered = ([first] if first is not None else []) + [i for i in run_ids if i != first]
    for run_id in ordered:
        root = root_of(run_id, parents)
        if len(chosen) == wanted or root in roots or (run_id != first and run_id in superseded):
            continue
        chosen.append(run_id)
        roots.add(root)
    return chosen
